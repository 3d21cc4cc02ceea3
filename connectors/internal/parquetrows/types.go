package parquetrows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ferryio/ferry/sdk"
)

// Type is a typed column's type, as a config file names it.
type Type string

// The column types. JSON holds the value's JSON text.
const (
	String  Type = "string"
	Int64   Type = "int64"
	Float64 Type = "float64"
	Bool    Type = "bool"
	JSON    Type = "json"
)

// TypeField declares key as a column type; the PostgreSQL spellings (text, bigint,
// double, boolean, jsonb, as the PostgreSQL sink's columns name them) are aliases.
func TypeField(f *sdk.Fields, key string, dst *Type) *sdk.Field[Type] {
	return sdk.Enum(f, key, dst, sdk.Choice(String, "text"), sdk.Choice(Int64, "bigint"), sdk.Choice(Float64, "double"),
		sdk.Choice(Bool, "boolean"), sdk.Choice(JSON, "jsonb"))
}

// Node is the type's Parquet node, required (wrap it in parquet.Optional for a column
// that may be null, parquet.FieldID for a table format's field ids).
func (t Type) Node() parquet.Node {
	switch t {
	case Int64:
		return parquet.Int(64)
	case Float64:
		return parquet.Leaf(parquet.DoubleType)
	case Bool:
		return parquet.Leaf(parquet.BooleanType)
	}
	return parquet.String() // String, JSON
}

// Column is a typed column filled from the JSON payload's field at Path (dot-separated);
// a missing field or a JSON null is null.
type Column struct {
	Name string
	Type Type
	Path string
}

// Node is the column's Parquet node: optional, null only for a nil pointer (see Extract).
func (c Column) Node() parquet.Node { return parquet.Optional(c.Type.Node()) }

// CheckPath refuses what is no dot-separated field path (empty, or an empty segment).
func CheckPath(p string) error {
	if p == "" || strings.Contains(p, "..") {
		return fmt.Errorf("%q is not a dot-separated field path", p)
	}
	return nil
}

// Extract computes the columns' values of one JSON payload: a pointer to each value, nil
// for a missing field or a JSON null. Pointers, because parquet-go writes a Go zero value
// (0, false, "") held as a plain value in an optional column as null: only a nil pointer
// may mean null. An error names the column and says what the field held (the sink
// rejects the message).
func Extract(cols []Column, payload []byte) ([]any, error) {
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
		if out[i], err = Convert(c.Type, v); err != nil {
			return nil, fmt.Errorf("column %q (path %s): %w", c.Name, c.Path, err)
		}
	}
	return out, nil
}

// Convert returns a pointer to v, a decoded JSON value (numbers as json.Number), as a
// value of typ: *string, *int64, *float64 or *bool. v is not nil (a JSON null is the
// caller's null). A string column takes a string as it is and any other value as its
// JSON text; numbers must fit the type (an int64 column refuses 1.5).
func Convert(typ Type, v any) (any, error) {
	switch typ {
	case String:
		if s, ok := v.(string); ok {
			return &s, nil
		}
		b, err := json.Marshal(v)
		s := string(b)
		return &s, err
	case JSON:
		b, err := json.Marshal(v)
		s := string(b)
		return &s, err
	case Int64:
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return &i, nil
			}
		}
		return nil, fmt.Errorf("want an integer, got %s", kind(v))
	case Float64:
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return &f, nil
			}
		}
		return nil, fmt.Errorf("want a number, got %s", kind(v))
	case Bool:
		if b, ok := v.(bool); ok {
			return &b, nil
		}
		return nil, fmt.Errorf("want true or false, got %s", kind(v))
	}
	return nil, fmt.Errorf("unknown column type %q", typ)
}

func kind(v any) string {
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
