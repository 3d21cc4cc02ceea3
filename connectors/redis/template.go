package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ferryio/ferry/sdk"
)

// template is a parsed stream_key: literal text and placeholders.
type template []part

type part struct {
	lit    string
	field  string // "stream", "topic", "partition" or "header"
	header string
}

// parseTemplate reads "{stream}:{topic}:{partition}" and {header:NAME}; a literal "{" is
// not allowed.
func parseTemplate(s string) (template, error) {
	var t template
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			t = append(t, part{lit: s})
			break
		}
		if i > 0 {
			t = append(t, part{lit: s[:i]})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("unclosed { at byte %d", i)
		}
		name := s[i+1 : i+j]
		switch {
		case name == "stream" || name == "topic" || name == "partition":
			t = append(t, part{field: name})
		case strings.HasPrefix(name, "header:") && len(name) > len("header:"):
			t = append(t, part{field: "header", header: strings.TrimPrefix(name, "header:")})
		default:
			return nil, fmt.Errorf("unknown placeholder {%s} (want {stream}, {topic}, {partition} or {header:NAME})", name)
		}
		s = s[i+j+1:]
	}
	return t, nil
}

func (t template) hasPartition() bool {
	for _, p := range t {
		if p.field == "partition" {
			return true
		}
	}
	return false
}

// render fills the template for one message (a missing header renders empty).
func (t template) render(topic sdk.TopicMetadata, partition uint32, headers []sdk.Header) string {
	var b strings.Builder
	for _, p := range t {
		switch p.field {
		case "":
			b.WriteString(p.lit)
		case "stream":
			b.WriteString(topic.Stream)
		case "topic":
			b.WriteString(topic.Topic)
		case "partition":
			b.WriteString(strconv.FormatUint(uint64(partition), 10))
		case "header":
			if v, ok := sdk.Lookup(headers, p.header); ok {
				if s, err := v.AsString(); err == nil {
					b.WriteString(s)
				}
			}
		}
	}
	return b.String()
}
