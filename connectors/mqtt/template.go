package mqtt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/sdk"
)

// template is a sink topic template, parsed once: literal text and {…} fields.
type template struct {
	parts    []part
	needJSON bool
}

type partKind int

const (
	partText partKind = iota
	partStream
	partTopic
	partPartition
	partOffset
	partHeader
	partJSON
)

type part struct {
	kind partKind
	text string   // literal text, or the header's name
	path []string // a JSON field's path
}

// parseTemplate parses s; an unknown {field} or a wildcard is an error naming it.
func parseTemplate(s string) (template, error) {
	var t template
	rest := s
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.parts = append(t.parts, part{kind: partText, text: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, part{kind: partText, text: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return template{}, fmt.Errorf("%q: a { without its }", s)
		}
		field := rest[i+1 : i+j]
		rest = rest[i+j+1:]
		name, arg, hasArg := strings.Cut(field, ":")
		switch {
		case field == "stream":
			t.parts = append(t.parts, part{kind: partStream})
		case field == "topic":
			t.parts = append(t.parts, part{kind: partTopic})
		case field == "partition":
			t.parts = append(t.parts, part{kind: partPartition})
		case field == "offset":
			t.parts = append(t.parts, part{kind: partOffset})
		case name == "header" && hasArg && arg != "":
			t.parts = append(t.parts, part{kind: partHeader, text: arg})
		case name == "json" && hasArg && arg != "":
			t.parts = append(t.parts, part{kind: partJSON, path: strings.Split(arg, ".")})
			t.needJSON = true
		default:
			return template{}, fmt.Errorf("%q: unknown field {%s} (want {stream}, {topic}, {partition}, {offset}, {header:NAME} or {json:a.b})", s, field)
		}
	}
	for _, p := range t.parts {
		if p.kind == partText && strings.ContainsAny(p.text, "+#\x00") {
			return template{}, fmt.Errorf("%q: a topic to publish on cannot hold + # or NUL", s)
		}
	}
	return t, nil
}

// render returns msg's topic.
func (t template) render(tm sdk.TopicMetadata, m sdk.MessagesMetadata, msg *sdk.ConsumedMessage) (string, error) {
	var b strings.Builder
	var doc *fastjson.Value
	if t.needJSON {
		var p fastjson.Parser
		v, err := p.ParseBytes(msg.Payload)
		if err != nil {
			return "", fmt.Errorf("the payload is not JSON: %w", err)
		}
		doc = v
	}
	for _, p := range t.parts {
		switch p.kind {
		case partText:
			b.WriteString(p.text)
		case partStream:
			b.WriteString(tm.Stream)
		case partTopic:
			b.WriteString(tm.Topic)
		case partPartition:
			b.WriteString(strconv.FormatUint(uint64(m.Partition.PartitionID), 10))
		case partOffset:
			b.WriteString(strconv.FormatUint(msg.Offset, 10))
		case partHeader:
			f, ok := sdk.Lookup(msg.Headers, p.text)
			if !ok {
				return "", fmt.Errorf("no header %q", p.text)
			}
			s, err := f.AsString()
			if err != nil {
				return "", fmt.Errorf("header %q: %w", p.text, err)
			}
			b.WriteString(s)
		case partJSON:
			v := doc.Get(p.path...)
			if v == nil {
				return "", fmt.Errorf("no JSON field %s", strings.Join(p.path, "."))
			}
			switch v.Type() {
			case fastjson.TypeString:
				b.Write(v.GetStringBytes())
			case fastjson.TypeNumber, fastjson.TypeTrue, fastjson.TypeFalse:
				b.WriteString(v.String())
			default:
				return "", fmt.Errorf("JSON field %s is a %s, not a string, number or bool", strings.Join(p.path, "."), v.Type())
			}
		}
	}
	topic := b.String()
	switch {
	case topic == "":
		return "", errors.New("the topic is empty")
	case strings.ContainsAny(topic, "+#\x00"):
		return "", fmt.Errorf("topic %q holds + # or NUL", topic)
	case len(topic) > 65535:
		return "", fmt.Errorf("topic of %d bytes (at most 65535)", len(topic))
	}
	return topic, nil
}
