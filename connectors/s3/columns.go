package s3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ferryio/ferry/sdk"
)

// columnTypes maps each column type to its Parquet node (the types' other spellings,
// PostgreSQL's as the PostgreSQL sink's columns, are aliases in Config).
var columnTypes = map[colType]func() parquet.Node{
	colString:  parquet.String,
	colJSON:    parquet.String,
	colInt64:   func() parquet.Node { return parquet.Int(64) },
	colFloat64: func() parquet.Node { return parquet.Leaf(parquet.DoubleType) },
	colBool:    func() parquet.Node { return parquet.Leaf(parquet.BooleanType) },
}

// baseColumns are the columns every Parquet object has.
var baseColumns = []string{"stream", "topic", "partition", "offset", "id", "timestamp", "origin_timestamp", "headers", "payload"}

// checkColumns checks what Config cannot per entry: the format, and names taken.
func checkColumns(cols []Column, f format) error {
	if len(cols) > 0 && f != formatParquet {
		return sdk.FieldErr("columns", "typed columns need output_format = \"parquet\"")
	}
	for i, c := range cols {
		if slices.Contains(baseColumns, c.Name) || slices.ContainsFunc(cols[:i], func(o Column) bool { return o.Name == c.Name }) {
			return sdk.FieldErr(fmt.Sprintf("columns[%d].name", i), "%q is taken (by a metadata column or an earlier entry)", c.Name)
		}
	}
	return nil
}

// extract computes the typed columns' values of one JSON payload: a pointer to each value,
// nil for a missing field or a JSON null. Pointers, because parquet-go writes a Go zero
// value (0, false, "") held as a plain value in an optional column as null: only a nil
// pointer may mean null. An error names the column and says what the field held: the
// message is rejected.
func extract(cols []Column, payload []byte) ([]any, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("typed columns: the payload is not JSON: %w", err)
	}
	out := make([]any, len(cols))
	for i, c := range cols {
		v := doc
		for _, k := range strings.Split(c.Path, ".") {
			obj, _ := v.(map[string]any)
			v = obj[k] // nil when v is not an object or k is missing
		}
		if v == nil {
			continue
		}
		var err error
		if out[i], err = convert(c.Type, v); err != nil {
			return nil, fmt.Errorf("column %q (path %s): %w", c.Name, c.Path, err)
		}
	}
	return out, nil
}

// convert returns a pointer to v as a value of the column type typ (never nil: v is not
// a JSON null).
func convert(typ colType, v any) (any, error) {
	switch typ {
	case colString:
		if s, ok := v.(string); ok {
			return &s, nil
		}
		b, err := json.Marshal(v)
		s := string(b)
		return &s, err
	case colJSON:
		b, err := json.Marshal(v)
		s := string(b)
		return &s, err
	case colInt64:
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return &i, nil
			}
		}
		return nil, fmt.Errorf("want an integer, got %s", jsonKind(v))
	case colFloat64:
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return &f, nil
			}
		}
		return nil, fmt.Errorf("want a number, got %s", jsonKind(v))
	default: // colBool
		if b, ok := v.(bool); ok {
			return &b, nil
		}
		return nil, fmt.Errorf("want true or false, got %s", jsonKind(v))
	}
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return fmt.Sprintf("%t", x)
	case map[string]any:
		return "an object"
	}
	return "an array"
}

// columnsSchema is the schema of an object with typed columns: the base columns (payload
// as text or bytes) and each typed column, optional (null only for a nil pointer: see
// extract).
func columnsSchema(cols []Column, raw bool) *parquet.Schema {
	payload := parquet.String()
	if raw {
		payload = parquet.Leaf(parquet.ByteArrayType)
	}
	g := parquet.Group{
		"stream": parquet.Encoded(parquet.String(), &parquet.RLEDictionary), "topic": parquet.Encoded(parquet.String(), &parquet.RLEDictionary),
		"partition": parquet.Encoded(parquet.Uint(32), &parquet.RLEDictionary), "offset": parquet.Encoded(parquet.Uint(64), &parquet.DeltaBinaryPacked),
		"id":        parquet.String(),
		"timestamp": parquet.Encoded(parquet.Timestamp(parquet.Microsecond), &parquet.DeltaBinaryPacked), "origin_timestamp": parquet.Encoded(parquet.Timestamp(parquet.Microsecond), &parquet.DeltaBinaryPacked),
		"headers": parquet.Map(parquet.String(), parquet.String()), "payload": payload,
	}
	for _, c := range cols {
		g[c.Name] = parquet.Optional(columnTypes[c.Type]())
	}
	return parquet.NewSchema("ferry", g)
}

// columnsRow is one row of an object with typed columns.
func columnsRow(cols []Column, r *row, raw bool) map[string]any {
	headers := r.headers
	if headers == nil {
		headers = map[string]string{}
	}
	m := map[string]any{
		"stream": r.stream, "topic": r.topic, "partition": r.partition, "offset": r.offset, "id": r.id,
		"timestamp": r.timestamp, "origin_timestamp": r.originTimestamp, "headers": headers,
	}
	if raw {
		m["payload"] = r.payload
	} else {
		m["payload"] = string(r.payload)
	}
	for i, c := range cols {
		m[c.Name] = r.extra[i]
	}
	return m
}
