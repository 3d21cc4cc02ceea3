// Package transform builds Iggy's message transforms (add_fields, update_fields,
// delete_fields, filter_fields, unwrap_envelope, and the format conversions avro_convert,
// flat_buffer_convert and proto_convert) from their connector-file tables and applies them to payloads.
// It is pure apart from the clock and the random source of the computed values, and from
// reading an avro_convert schema_path when a chain is built.
//
// Like upstream, every field transform acts on the top-level keys of a JSON object and
// passes any other payload unchanged; a conversion may turn a payload into another
// format, so a chain holding one is run with ApplyPayload on a Payload. Deliberate
// differences (docs/iggy-compatibility.md, "Differences from Iggy's runtime"): a Chain runs its transforms in
// the order the file lists them (upstream: a hash map's order), greater_than/less_than/
// between match integer literals too (upstream: only floats), and a conversion's table is
// checked when it is read.
package transform

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/valyala/fastjson"
)

// ErrConfig is wrapped by every error of Build about a transform's table.
var ErrConfig = errors.New("invalid transform")

// ConfigError is Build's error: the key path in the connector file and what is wrong.
type ConfigError struct {
	Path string // e.g. transforms.add_fields.fields[0].value
	Msg  string
}

func (e *ConfigError) Error() string { return e.Path + ": " + ErrConfig.Error() + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrConfig) hold.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Spec is one `[transforms.<type>]` table as the connector file wrote it.
type Spec struct {
	Type    string
	Enabled bool
	Table   map[string]any // the whole table, enabled included
}

// Transform changes one JSON value. It returns the value to go on with (unwrap_envelope
// returns another one); a may allocate new values for this message.
type Transform interface {
	Apply(v *fastjson.Value, a *fastjson.Arena) (*fastjson.Value, error)
}

// Chain is the enabled transforms of a connector, in file order. A chain with a conversion
// reuses decode buffers: each pipeline builds its own and uses it from one goroutine.
type Chain struct {
	ts       []Transform
	names    []string
	converts bool // some transform is a Converter
}

// Append adds t, named name in its errors, at the end of c: after Build's transforms, a
// program embedding Ferry's runtime may add its own.
func (c *Chain) Append(name string, t Transform) {
	c.ts = append(c.ts, t)
	c.names = append(c.names, name)
	c.converts = c.converts || isConverter(t)
}

// Len is the number of transforms in c.
func (c *Chain) Len() int { return len(c.ts) }

// Apply runs every transform on v in order. An error names the transform.
func (c *Chain) Apply(v *fastjson.Value, a *fastjson.Arena) (*fastjson.Value, error) {
	for i, t := range c.ts {
		var err error
		if v, err = t.Apply(v, a); err != nil {
			return nil, fmt.Errorf("transform %s: %w", c.names[i], err)
		}
	}
	return v, nil
}

// Types are the transform types Build knows.
var Types = []string{"add_fields", "avro_convert", "delete_fields", "filter_fields", "flat_buffer_convert", "proto_convert", "unwrap_envelope", "update_fields"}

// Build returns the chain of the enabled specs, in their order. A disabled spec is checked
// for its type only, as upstream (its fields are not read).
func Build(specs []Spec) (*Chain, error) {
	c := &Chain{}
	for _, s := range specs {
		path := "transforms." + s.Type
		if !s.Enabled {
			if !known(s.Type) {
				return nil, &ConfigError{Path: path, Msg: "unknown type (want one of " + strings.Join(Types, ", ") + ")"}
			}
			continue
		}
		t, err := build(s.Type, &table{path: path, m: s.Table})
		if err != nil {
			return nil, err
		}
		c.Append(s.Type, t)
	}
	return c, nil
}

func known(typ string) bool {
	i := sort.SearchStrings(Types, typ)
	return i < len(Types) && Types[i] == typ
}

func build(typ string, t *table) (Transform, error) {
	t.used = map[string]bool{"enabled": true}
	var tr Transform
	var err error
	switch typ {
	case "add_fields":
		tr, err = buildAdd(t)
	case "update_fields":
		tr, err = buildUpdate(t)
	case "delete_fields":
		tr, err = buildDelete(t)
	case "filter_fields":
		tr, err = buildFilter(t)
	case "unwrap_envelope":
		tr, err = buildUnwrap(t)
	case "avro_convert":
		tr, err = buildAvroConvert(t)
	case "flat_buffer_convert":
		tr, err = buildFlatBufferConvert(t)
	case "proto_convert":
		tr, err = buildProtoConvert(t)
	default:
		return nil, t.errorf("", "unknown type (want one of %s)", strings.Join(Types, ", "))
	}
	if err != nil {
		return nil, err
	}
	return tr, t.unknownKeys()
}

// object returns v's object, or nil when v is not one.
func object(v *fastjson.Value) *fastjson.Object {
	if v.Type() != fastjson.TypeObject {
		return nil
	}
	o, _ := v.Object()
	return o
}
