package elasticsearch

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// indexTemplate renders a message's index name: literal text and the placeholders
// {stream}, {topic}, {partition} and {date:LAYOUT}, the message's timestamp (UTC) in a
// layout of yyyy, MM, dd and HH (e.g. "iggy-{date:yyyy.MM.dd}").
type indexTemplate struct {
	parts []indexPart
}

type indexPart struct {
	lit    string
	field  string // "stream", "topic", "partition" or "date"
	layout string // Go layout of a date
}

func parseIndexTemplate(s string) (indexTemplate, error) {
	var t indexTemplate
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			t.parts = append(t.parts, indexPart{lit: s})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, indexPart{lit: s[:i]})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return t, fmt.Errorf("unclosed placeholder at byte %d", i)
		}
		name := s[i+1 : i+j]
		switch {
		case name == "stream" || name == "topic" || name == "partition":
			t.parts = append(t.parts, indexPart{field: name})
		case strings.HasPrefix(name, "date:"):
			layout := strings.NewReplacer("yyyy", "2006", "MM", "01", "dd", "02", "HH", "15").Replace(name[len("date:"):])
			if layout == "" {
				return t, fmt.Errorf("{date:} at byte %d has no layout (want e.g. {date:yyyy.MM.dd})", i)
			}
			t.parts = append(t.parts, indexPart{field: "date", layout: layout})
		default:
			return t, fmt.Errorf("unknown placeholder {%s} at byte %d (want {stream}, {topic}, {partition} or {date:yyyy.MM.dd})", name, i)
		}
		s = s[i+j+1:]
	}
	return t, nil
}

// static reports whether the template names one index whatever the message.
func (t indexTemplate) static() (string, bool) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.field != "" {
			return "", false
		}
		b.WriteString(p.lit)
	}
	return b.String(), true
}

func (t indexTemplate) render(topic sdk.TopicMetadata, part uint32, msg *sdk.ConsumedMessage) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.field {
		case "":
			b.WriteString(p.lit)
		case "stream":
			b.WriteString(topic.Stream)
		case "topic":
			b.WriteString(topic.Topic)
		case "partition":
			b.WriteString(strconv.FormatUint(uint64(part), 10))
		case "date":
			b.WriteString(time.UnixMicro(int64(msg.Timestamp)).UTC().Format(p.layout))
		}
	}
	return b.String()
}
