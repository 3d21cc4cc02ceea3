package transform

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/sdk"
)

// Payload is a message's payload as a chain with a format conversion carries it: a JSON
// value (Format json), or the bytes of another format (raw, text, proto, flat_buffer,
// avro). It is upstream's Payload enum: the field transforms act on json payloads only
// and pass every other one unchanged; the *_convert transforms change the format.
type Payload struct {
	Format sdk.Schema
	JSON   *fastjson.Value // Format json
	Bytes  []byte          // every other format
}

// Converter is a transform that may change a payload's format (the *_convert ones). Bytes it
// returns are the caller's; JSON values live in the arena or in the converter's decode
// buffers until its next call.
type Converter interface {
	Convert(p Payload, a *fastjson.Arena) (Payload, error)
}

// Converts reports whether c has a format conversion: then the pipelines carry payloads
// through ApplyPayload, as upstream's Payload values, instead of JSON values only.
func (c *Chain) Converts() bool { return c.converts }

// ApplyPayload runs every transform on p in order: a converter on any payload, a field
// transform on a json payload (others pass unchanged, as upstream). An error names the
// transform.
func (c *Chain) ApplyPayload(p Payload, a *fastjson.Arena) (Payload, error) {
	for i, t := range c.ts {
		var err error
		switch {
		case isConverter(t):
			p, err = t.(Converter).Convert(p, a)
		case p.Format == sdk.SchemaJSON:
			p.JSON, err = t.Apply(p.JSON, a)
		}
		if err != nil {
			return Payload{}, fmt.Errorf("transform %s: %w", c.names[i], err)
		}
	}
	return p, nil
}

func isConverter(t Transform) bool {
	_, ok := t.(Converter)
	return ok
}

// errNotJSON is the error of a converter used through Chain.Apply (JSON values only) when
// it turns the payload into another format.
var errNotJSON = errors.New("the payload is no longer JSON; only a payload pipeline (Chain.ApplyPayload) carries other formats")

// applyAsJSON is the Transform side of a converter: a JSON value in, a JSON value out.
func applyAsJSON(c Converter, v *fastjson.Value, a *fastjson.Arena) (*fastjson.Value, error) {
	p, err := c.Convert(Payload{Format: sdk.SchemaJSON, JSON: v}, a)
	if err != nil {
		return nil, err
	}
	if p.Format != sdk.SchemaJSON {
		return nil, fmt.Errorf("now %s: %w", p.Format, errNotJSON)
	}
	return p.JSON, nil
}

// format reads a schema-valued key (source_format, target_format): required, one of
// Iggy's schema names.
func (t *table) format(key string) (sdk.Schema, error) {
	s, _, err := t.str(key, true)
	if err != nil {
		return "", err
	}
	f, err := sdk.ParseSchema(s)
	if err != nil {
		return "", t.errorf(key, "%v", err)
	}
	return f, nil
}

// formats reads the source_format and target_format of a conversion.
func (t *table) formats() (from, to sdk.Schema, err error) {
	if from, err = t.format("source_format"); err != nil {
		return "", "", err
	}
	if to, err = t.format("target_format"); err != nil {
		return "", "", err
	}
	return from, to, nil
}

// fieldMappings reads the optional field_mappings table (old key = "new key").
func (t *table) fieldMappings() (map[string]string, error) {
	sub, ok, err := t.subTable("field_mappings")
	if err != nil || !ok {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(sub.m)) // the first bad key is the same one every time
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		s, _, err := sub.str(k, true)
		if err != nil {
			return nil, err
		}
		m[k] = s
	}
	return m, nil
}

// options reads a required table of required fields: booleans, unsigned integers and
// strings (conversion_options: upstream's struct has no defaults, so every field must be
// written). The strings are checked only: no conversion uses one.
func (t *table) options(key string, bools, uints, strs []string) (map[string]bool, map[string]uint64, error) {
	sub, ok, err := t.subTable(key)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, t.errorf(key, "required key missing (upstream has no default: write all of %v)", append(append(append([]string{}, bools...), uints...), strs...))
	}
	bs := make(map[string]bool, len(bools))
	for _, n := range bools {
		if _, present := sub.m[n]; !present {
			return nil, nil, sub.errorf(n, "required key missing")
		}
		if bs[n], err = sub.boolean(n, false); err != nil {
			return nil, nil, err
		}
	}
	us := make(map[string]uint64, len(uints))
	for _, n := range uints {
		v, present := sub.get(n)
		if !present {
			return nil, nil, sub.errorf(n, "required key missing")
		}
		i, isInt := v.(int64)
		if !isInt || i < 0 {
			return nil, nil, sub.errorf(n, "want a non-negative integer, got %s", typeName(v))
		}
		us[n] = uint64(i)
	}
	for _, n := range strs {
		if _, _, err := sub.str(n, true); err != nil {
			return nil, nil, err
		}
	}
	return bs, us, sub.unknownKeys()
}

// renameKeys renames the top-level keys of a JSON object by m, keeping their order (a key
// renamed onto an existing one replaces its value in place, as upstream's map insert).
// Other values are returned as they are.
func renameKeys(v *fastjson.Value, m map[string]string, a *fastjson.Arena) *fastjson.Value {
	o := object(v)
	if o == nil || len(m) == 0 {
		return v
	}
	out := a.NewObject()
	oo, _ := out.Object()
	o.Visit(func(k []byte, val *fastjson.Value) {
		key := string(k)
		if nk, ok := m[key]; ok {
			key = nk
		}
		oo.Set(key, val)
	})
	return out
}

// appendPrettyJSON appends v as simd-json's (and serde_json's) pretty printer writes it:
// two-space indents, ": " after keys, empty objects and arrays as {} and [].
func appendPrettyJSON(dst []byte, v *fastjson.Value, indent int) []byte {
	nl := func(dst []byte, n int) []byte {
		dst = append(dst, '\n')
		for range n {
			dst = append(dst, ' ', ' ')
		}
		return dst
	}
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		if o.Len() == 0 {
			return append(dst, "{}"...)
		}
		dst = append(dst, '{')
		first := true
		o.Visit(func(k []byte, e *fastjson.Value) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = nl(dst, indent+1)
			dst = schema.AppendString(dst, k)
			dst = append(dst, ':', ' ')
			dst = appendPrettyJSON(dst, e, indent+1)
		})
		dst = nl(dst, indent)
		return append(dst, '}')
	case fastjson.TypeArray:
		arr, _ := v.Array()
		if len(arr) == 0 {
			return append(dst, "[]"...)
		}
		dst = append(dst, '[')
		for i, e := range arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = nl(dst, indent+1)
			dst = appendPrettyJSON(dst, e, indent+1)
		}
		dst = nl(dst, indent)
		return append(dst, ']')
	}
	return schema.AppendJSON(dst, v)
}
