package mqtt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ferryio/ferry/sdk"
)

// FieldTopicMapping: the source's [[plugin_config.topic_mapping]] tables, each sending
// the messages of MQTT topics that match its filter to an Iggy stream and topic, fixed or
// a template over the MQTT topic's levels. The first table whose filter matches wins; a
// message no table matches goes to the [[streams]] entry.
const FieldTopicMapping = "topic_mapping"

// Keys of one topic_mapping table.
const (
	MappingFilter = "filter" // an MQTT topic filter (+ and #), matched against each message's topic
	MappingStream = "stream" // the Iggy stream; default the [[streams]] entry's
	MappingTopic  = "topic"  // the Iggy topic
)

// mapping is one topic_mapping table as configured, and parsed.
type mapping struct {
	Filter string
	Stream string
	Topic  string

	levels        []string // the filter's levels
	stream, topic nameTemplate
}

// nameTemplate is an Iggy stream or topic name: literal text and {N}, the N-th level
// (from 1) of the message's MQTT topic. nil: not set (the [[streams]] entry's).
type nameTemplate []namePart

type namePart struct {
	text  string
	level int // > 0: the level at this index + 1; 0: text
}

func declareMapping(m *mapping, f *sdk.Fields) {
	f.String(MappingFilter, &m.Filter).Required().Doc("MQTT topic filter (+ and #) of the messages this table maps")
	f.String(MappingStream, &m.Stream).Doc("Iggy stream, a template: {N} is the N-th level of the MQTT topic (default the [[streams]] entry's)")
	f.String(MappingTopic, &m.Topic).Required().Doc("Iggy topic, a template: {N} is the N-th level of the MQTT topic, e.g. \"temp-{2}\"")
}

// checkMappings parses every table of ms, in place. Errors name the table's key and the
// filter: a filter no broker accepts, a shared subscription (a mapping matches topics), a
// filter that matches none of the subscribed ones (its table could never apply), a
// template with an unknown field or a level the filter may not have.
func checkMappings(ms []mapping, subscribed []string) error {
	var errs []error
	for i := range ms {
		m := &ms[i]
		key := func(k string) string { return fmt.Sprintf("%s[%d].%s", FieldTopicMapping, i, k) }
		if err := checkFilter(m.Filter); err != nil {
			errs = append(errs, sdk.FieldErr(key(MappingFilter), "%v", err))
			continue
		}
		if strings.HasPrefix(m.Filter, "$share/") {
			errs = append(errs, sdk.FieldErr(key(MappingFilter), "%q: a mapping matches the topics of messages, not a shared subscription: write the filter without $share/GROUP/", m.Filter))
			continue
		}
		m.levels = strings.Split(m.Filter, "/")
		if !overlapsAny(m.levels, subscribed) {
			errs = append(errs, sdk.FieldErr(key(MappingFilter), "%q matches none of the subscribed filters (plugin_config.%s = %q): no message could take this mapping", m.Filter, FieldTopics, subscribed))
		}
		var err error
		if m.Stream != "" {
			if m.stream, err = parseName(m.Stream, m.levels); err != nil {
				errs = append(errs, sdk.FieldErr(key(MappingStream), "%v", err))
			}
		}
		if m.topic, err = parseName(m.Topic, m.levels); err != nil {
			errs = append(errs, sdk.FieldErr(key(MappingTopic), "%v", err))
		}
	}
	return errors.Join(errs...)
}

// fixedLevels is how many levels every topic a filter matches has for sure: all of them,
// or those before a #. (# matches its parent level too: "a/#" matches "a".)
func fixedLevels(levels []string) int {
	if levels[len(levels)-1] == "#" {
		return len(levels) - 1
	}
	return len(levels)
}

// parseName parses a name template of a mapping whose filter has levels.
func parseName(s string, levels []string) (nameTemplate, error) {
	if s == "" {
		return nil, errors.New("empty: want an Iggy name such as \"telemetry\" or \"temp-{2}\"")
	}
	var t nameTemplate
	rest := s
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t = append(t, namePart{text: rest})
			break
		}
		if i > 0 {
			t = append(t, namePart{text: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%q: a { without its }", s)
		}
		field := rest[i+1 : i+j]
		rest = rest[i+j+1:]
		n, err := strconv.Atoi(field)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: unknown field {%s} (want {N}, N the number of a level of the MQTT topic: {1} is the first)", s, field)
		}
		filter := strings.Join(levels, "/")
		if n > fixedLevels(levels) {
			if fixedLevels(levels) < len(levels) {
				return nil, fmt.Errorf("%q: level %d is not one every topic of filter %q has (at most {%d}: the levels before #)", s, n, filter, fixedLevels(levels))
			}
			return nil, fmt.Errorf("%q: level %d is past the last of filter %q (%d levels)", s, n, filter, len(levels))
		}
		t = append(t, namePart{level: n})
	}
	return t, nil
}

// render returns the name for a topic of levels; "" when nothing is set or the levels it
// takes are empty.
func (t nameTemplate) render(levels []string) string {
	if len(t) == 1 && t[0].level == 0 {
		return t[0].text
	}
	var b strings.Builder
	for _, p := range t {
		if p.level == 0 {
			b.WriteString(p.text)
		} else {
			b.WriteString(levels[p.level-1])
		}
	}
	return b.String()
}

// matches reports whether an MQTT topic of levels matches a filter of filterLevels, as a
// broker matches it: + is one level, # the rest (the parent level included), and a
// wildcard at the first level does not match a topic that begins with $.
func matches(filterLevels, levels []string) bool {
	if len(levels) > 0 && strings.HasPrefix(levels[0], "$") && (filterLevels[0] == "+" || filterLevels[0] == "#") {
		return false
	}
	for i, f := range filterLevels {
		switch {
		case f == "#":
			return true
		case i >= len(levels):
			return false
		case f != "+" && f != levels[i]:
			return false
		}
	}
	return len(levels) == len(filterLevels)
}

// overlapsAny reports whether some topic matches both the filter of levels and one of
// subscribed (a $share/GROUP/ prefix is not part of the topic filter).
func overlapsAny(levels []string, subscribed []string) bool {
	for _, s := range subscribed {
		if rest, ok := strings.CutPrefix(s, "$share/"); ok {
			if _, f, ok := strings.Cut(rest, "/"); ok {
				s = f
			}
		}
		if overlap(levels, strings.Split(s, "/")) {
			return true
		}
	}
	return false
}

// overlap reports whether two filters match a topic in common.
func overlap(a, b []string) bool {
	for i := 0; ; i++ {
		switch {
		case i < len(a) && a[i] == "#", i < len(b) && b[i] == "#":
			return true
		case i == len(a) || i == len(b):
			return len(a) == len(b) // a # after the shorter one's end was the case above
		case a[i] != "+" && b[i] != "+" && a[i] != b[i]:
			return false
		}
	}
}

// route is where the source sends a message: the target of the first mapping its topic
// matches. mapped is false when none matches (the [[streams]] entry's); empty is true
// when the matching mapping rendered an empty name (then the entry's too).
func route(ms []mapping, topic string) (stream, iggyTopic string, mapped, empty bool) {
	levels := strings.Split(topic, "/")
	for i := range ms {
		m := &ms[i]
		if !matches(m.levels, levels) {
			continue
		}
		iggyTopic = m.topic.render(levels)
		if m.stream != nil {
			stream = m.stream.render(levels)
			if stream == "" {
				return "", "", true, true
			}
		}
		if iggyTopic == "" {
			return "", "", true, true
		}
		return stream, iggyTopic, true, false
	}
	return "", "", false, false
}
