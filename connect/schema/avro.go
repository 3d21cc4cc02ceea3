package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/linkedin/goavro/v2"
)

// avroCodec decodes Avro datums of one schema and writes them as Avro's JSON encoding with
// record fields in schema order (goavro's own textual encoder writes them in map order).
// Logical types are read as their underlying type (a timestamp-millis as its long), so
// what a datum holds is written exactly.
type avroCodec struct {
	codec *goavro.Codec
	root  any            // the schema, decoded JSON
	named map[string]any // named types by name and by full name
}

func newAvroCodec(schemaJSON string) (*avroCodec, error) {
	var root any
	if err := json.Unmarshal([]byte(schemaJSON), &root); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	plain := stripLogical(root)
	b, err := json.Marshal(plain)
	if err != nil {
		return nil, err
	}
	c, err := goavro.NewCodec(string(b))
	if err != nil {
		return nil, err
	}
	a := &avroCodec{codec: c, root: plain, named: map[string]any{}}
	a.collect(plain, "")
	return a, nil
}

// stripLogical drops logicalType annotations (goavro would turn them into time.Time or
// *big.Rat values).
func stripLogical(s any) any {
	switch x := s.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			if k == "logicalType" {
				continue
			}
			out[k] = stripLogical(v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = stripLogical(v)
		}
		return out
	}
	return s
}

func (a *avroCodec) collect(s any, ns string) {
	switch x := s.(type) {
	case map[string]any:
		if name, ok := x["name"].(string); ok {
			if n, ok := x["namespace"].(string); ok {
				ns = n
			}
			a.named[name] = x
			if ns != "" {
				a.named[ns+"."+name] = x
			}
		}
		for _, k := range []string{"type", "items", "values"} {
			if v, ok := x[k]; ok {
				a.collect(v, ns)
			}
		}
		if fs, ok := x["fields"].([]any); ok {
			for _, f := range fs {
				if fm, ok := f.(map[string]any); ok {
					a.collect(fm["type"], ns)
				}
			}
		}
	case []any:
		for _, v := range x {
			a.collect(v, ns)
		}
	}
}

// decode appends the JSON of the datum in p; trailing bytes are an error.
func (a *avroCodec) decode(dst, p []byte) ([]byte, error) {
	native, rest, err := a.codec.NativeFromBinary(p)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%d trailing bytes after the datum (byte %d)", len(rest), len(p)-len(rest))
	}
	return a.appendValue(dst, native, a.root)
}

// typeOf resolves a schema node to its definition: a primitive name, or a map/array node.
func (a *avroCodec) typeOf(s any) any {
	if name, ok := s.(string); ok {
		if def, ok := a.named[name]; ok {
			return def
		}
		return name
	}
	if m, ok := s.(map[string]any); ok {
		if t, ok := m["type"].(string); ok {
			switch t {
			case "record", "error", "enum", "fixed", "array", "map":
			default:
				return a.typeOf(t) // {"type": "long"} and the like
			}
		}
	}
	return s
}

func (a *avroCodec) appendValue(dst []byte, v any, s any) ([]byte, error) {
	s = a.typeOf(s)
	switch t := s.(type) {
	case string:
		return appendAvroPrimitive(dst, v, t)
	case []any: // union: null, or {"branch name": value} as Avro's JSON encoding
		if v == nil {
			return append(dst, "null"...), nil
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf("union value %T", v)
		}
		for name, inner := range m {
			branch, err := a.branch(t, name)
			if err != nil {
				return nil, err
			}
			dst = append(dst, '{')
			dst = AppendString(dst, []byte(name))
			dst = append(dst, ':')
			dst, err = a.appendValue(dst, inner, branch)
			if err != nil {
				return nil, err
			}
			return append(dst, '}'), nil
		}
	case map[string]any:
		switch t["type"] {
		case "record", "error":
			m, _ := v.(map[string]any)
			fs, _ := t["fields"].([]any)
			dst = append(dst, '{')
			for i, f := range fs {
				fm, _ := f.(map[string]any)
				name, _ := fm["name"].(string)
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = AppendString(dst, []byte(name))
				dst = append(dst, ':')
				var err error
				if dst, err = a.appendValue(dst, m[name], fm["type"]); err != nil {
					return nil, err
				}
			}
			return append(dst, '}'), nil
		case "enum":
			s, _ := v.(string)
			return AppendString(dst, []byte(s)), nil
		case "fixed":
			return appendAvroPrimitive(dst, v, "bytes")
		case "array":
			l, _ := v.([]any)
			dst = append(dst, '[')
			for i, e := range l {
				if i > 0 {
					dst = append(dst, ',')
				}
				var err error
				if dst, err = a.appendValue(dst, e, t["items"]); err != nil {
					return nil, err
				}
			}
			return append(dst, ']'), nil
		case "map":
			m, _ := v.(map[string]any)
			keys := slices.Sorted(maps.Keys(m))
			dst = append(dst, '{')
			for i, k := range keys {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = AppendString(dst, []byte(k))
				dst = append(dst, ':')
				var err error
				if dst, err = a.appendValue(dst, m[k], t["values"]); err != nil {
					return nil, err
				}
			}
			return append(dst, '}'), nil
		}
	}
	return nil, fmt.Errorf("unsupported schema node %v", s)
}

// branch finds the union branch goavro named name.
func (a *avroCodec) branch(union []any, name string) (any, error) {
	for _, b := range union {
		switch x := b.(type) {
		case string:
			if x == name || a.fullName(a.named[x]) == name {
				return b, nil
			}
		case map[string]any:
			if x["type"] == name || a.fullName(x) == name || x["name"] == name {
				return b, nil
			}
		}
	}
	return nil, fmt.Errorf("union has no branch %q", name)
}

func (a *avroCodec) fullName(def any) string {
	m, ok := def.(map[string]any)
	if !ok {
		return ""
	}
	name, _ := m["name"].(string)
	if ns, ok := m["namespace"].(string); ok && ns != "" {
		return ns + "." + name
	}
	full := name
	for k, d := range a.named { // the longest name this very definition is known by
		if dm, ok := d.(map[string]any); ok && reflect.ValueOf(dm).UnsafePointer() == reflect.ValueOf(m).UnsafePointer() && len(k) > len(full) {
			full = k
		}
	}
	return full
}

func appendAvroPrimitive(dst []byte, v any, t string) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("%s %v cannot be written as JSON", t, x)
		}
		return strconv.AppendFloat(dst, float64(x), 'g', -1, 32), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s %v cannot be written as JSON", t, x)
		}
		return strconv.AppendFloat(dst, x, 'g', -1, 64), nil
	case string:
		return AppendString(dst, []byte(x)), nil
	case []byte: // bytes and fixed: a string of code points 0-255, as Avro's JSON encoding
		u := make([]byte, 0, len(x)*2)
		for _, c := range x {
			u = utf8.AppendRune(u, rune(c))
		}
		return AppendString(dst, u), nil
	}
	return nil, fmt.Errorf("%s value %T", t, v)
}
