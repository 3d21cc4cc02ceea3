package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ferryio/ferry/sdk"
)

// convError is a column mapping that could not convert a payload field to its column's
// type: the row is rejected before it reaches the database.
type convError struct{ error }

// row builds the values of one message in s.cols order, plus one trailing slot: nil, or
// the convError that rejects the row.
func (s *Sink) row(topic sdk.TopicMetadata, part uint32, m *sdk.ConsumedMessage) []any {
	return s.appendRow(make([]any, 0, len(s.cols)+1), names(topic), part, m)
}

// topicNames holds a topic's stream and topic names as interface values, made once per
// batch rather than once per row (each conversion of a string to any allocates).
type topicNames struct{ stream, topic any }

func names(topic sdk.TopicMetadata) topicNames { return topicNames{topic.Stream, topic.Topic} }

// appendRow appends row's values to r (which has room for them: no allocation for r).
func (s *Sink) appendRow(r []any, names topicNames, part uint32, m *sdk.ConsumedMessage) []any {
	lo, hi := m.ID.Halves()
	r = append(r, msgID{hi: hi, lo: lo})
	if *s.cfg.IncludeMetadata {
		r = append(r, int64(m.Offset), micros(m.Timestamp), names.stream, names.topic, int32(part))
	}
	if *s.cfg.IncludeChecksum {
		r = append(r, int64(m.Checksum)) // bit pattern kept, as the official sink
	}
	if *s.cfg.IncludeOriginTimestamp {
		r = append(r, micros(m.OriginTimestamp))
	}
	switch s.cfg.PayloadFormat {
	case FormatJSON:
		r = append(r, json.RawMessage(m.Payload))
	case FormatText:
		r = append(r, string(m.Payload))
	default:
		r = append(r, m.Payload)
	}
	var bad error
	if len(s.cfg.Columns) > 0 {
		var doc any
		d := json.NewDecoder(bytes.NewReader(m.Payload))
		d.UseNumber()
		if err := d.Decode(&doc); err != nil {
			doc = nil // not JSON: every mapped column is NULL
		}
		for _, c := range s.cfg.Columns {
			v, err := convert(lookup(doc, c.Path), c.Type)
			if err != nil && bad == nil {
				bad = convError{fmt.Errorf("column %s (path %s, type %s): %w", c.Name, c.Path, c.Type, err)}
			}
			r = append(r, v)
		}
	}
	if bad != nil {
		return append(r, bad)
	}
	return append(r, nil)
}

// micros turns µs since the epoch into a timestamp; 0 (unset) is NULL.
func micros(us uint64) any {
	if us == 0 {
		return nil
	}
	return time.UnixMicro(int64(us)).UTC()
}

// lookup walks a dot-separated path through JSON objects; nil when any step is missing.
func lookup(doc any, path string) any {
	for _, k := range strings.Split(path, ".") {
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = obj[k]
	}
	return doc
}

// convert turns a decoded JSON value into a Go value pgx encodes as the SQL type typ.
func convert(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	t := strings.ToLower(strings.TrimSpace(typ))
	switch {
	case t == "json" || t == "jsonb":
		b, err := json.Marshal(v)
		return json.RawMessage(b), err
	case strings.Contains(t, "int") || strings.Contains(t, "serial"):
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("want an integer, got %s", kind(v))
		}
		i, err := n.Int64()
		if err != nil {
			return nil, fmt.Errorf("want an integer, got %s", n)
		}
		return i, nil
	case strings.HasPrefix(t, "numeric") || strings.HasPrefix(t, "decimal"):
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("want a number, got %s", kind(v))
		}
		var out pgtype.Numeric
		if err := out.Scan(n.String()); err != nil {
			return nil, fmt.Errorf("want a number: %w", err)
		}
		return out, nil
	case strings.HasPrefix(t, "float") || strings.HasPrefix(t, "double") || t == "real":
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("want a number, got %s", kind(v))
		}
		f, err := n.Float64()
		return f, err
	case strings.HasPrefix(t, "bool"):
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want true or false, got %s", kind(v))
		}
		return b, nil
	case strings.HasPrefix(t, "timestamp") || t == "date":
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want an RFC 3339 string, got %s", kind(v))
		}
		ts, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			return nil, fmt.Errorf("want an RFC 3339 time: %w", err)
		}
		return ts, nil
	}
	if str, ok := v.(string); ok {
		return str, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
