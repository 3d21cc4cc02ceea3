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
	return s.appendRow(make([]any, 0, len(s.cols)+1), new(rowValues), names(topic), part, m)
}

// topicNames holds a topic's stream and topic names as interface values, made once per
// batch rather than once per row (each conversion of a string to any allocates).
type topicNames struct{ stream, topic any }

func names(topic sdk.TopicMetadata) topicNames { return topicNames{topic.Stream, topic.Topic} }

// rowValues holds a row's own values; the row refers to them by pointer, which an
// interface holds without an allocation (a value such as a time.Time would be copied to
// the heap). A batch makes its rows' rowValues in one allocation.
type rowValues struct {
	id               msgID
	offset, checksum int64
	ts, origin       time.Time
	json             json.RawMessage
	bytes            []byte
	text             string
}

// appendRow appends row's values to r (which has room for them: no allocation for r),
// keeping them in v.
func (s *Sink) appendRow(r []any, v *rowValues, names topicNames, part uint32, m *sdk.ConsumedMessage) []any {
	lo, hi := m.ID.Halves()
	v.id = msgID{hi: hi, lo: lo}
	r = append(r, &v.id)
	if s.cfg.IncludeMetadata {
		v.offset = int64(m.Offset)
		r = append(r, &v.offset, micros(&v.ts, m.Timestamp), names.stream, names.topic, int32(part))
	}
	if s.cfg.IncludeChecksum {
		v.checksum = int64(m.Checksum) // bit pattern kept, as the official sink
		r = append(r, &v.checksum)
	}
	if s.cfg.IncludeOriginTimestamp {
		r = append(r, micros(&v.origin, m.OriginTimestamp))
	}
	// A message always has a payload: an empty one (nil, as a conversion may hand on) is
	// empty bytes, never the NULL a nil slice encodes to.
	payload := m.Payload
	if payload == nil {
		payload = []byte{}
	}
	switch s.cfg.PayloadFormat {
	case formatJSON:
		v.json = payload
		r = append(r, &v.json)
	case formatText:
		v.text = string(payload)
		r = append(r, &v.text)
	default:
		v.bytes = payload
		r = append(r, &v.bytes)
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

// pgxValues is a row's values as pgx takes them, the sink's own by value rather than by
// pointer: pgx would validate a *json.RawMessage itself (as a json.Marshaler) instead of
// sending it, and the database's refusal is what names a bad row.
func pgxValues(vals []any) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		switch p := v.(type) {
		case *msgID:
			out[i] = *p
		case *int64:
			out[i] = *p
		case *time.Time:
			out[i] = *p
		case *json.RawMessage:
			out[i] = *p
		case *[]byte:
			out[i] = *p
		case *string:
			out[i] = *p
		default:
			out[i] = v
		}
	}
	return out
}

// micros sets *t to us µs since the epoch and returns t; 0 (unset) is NULL (nil).
func micros(t *time.Time, us uint64) any {
	if us == 0 {
		return nil
	}
	*t = time.UnixMicro(int64(us)).UTC()
	return t
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
