package transform

import (
	"encoding/base64"
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/sdk"
)

// flatBufferConvert is flat_buffer_convert: JSON to a FlatBuffer of upstream's generic
// shape (no schema is used, as upstream), a FlatBuffer to upstream's JSON summary, to text
// (base64) or to raw. Other pairs are refused when the table is read, as upstream; a
// payload not in source_format fails its message.
type flatBufferConvert struct {
	from, to  sdk.Schema
	mappings  map[string]string
	rootTable string // root_table_name, "" when not set
	hasRoot   bool
	verify    bool                 // conversion_options.verify_buffers
	sizeHint  int                  // conversion_options.buffer_size_hint, the builder's first allocation (capped)
	builder   *flatbuffers.Builder // reused message to message (a chain is one goroutine's)
	pos       []flatbuffers.UOffsetT
	text      []byte
}

// maxSizeHint caps buffer_size_hint: a hint is not a reason to allocate a gigabyte.
const maxSizeHint = 1 << 20

var (
	flatBufferBools = []string{"verify_buffers", "pretty_json", "include_metadata", "strict_mode"}
	flatBufferUints = []string{"buffer_size_hint"}
)

func buildFlatBufferConvert(t *table) (Transform, error) {
	from, to, err := t.formats()
	if err != nil {
		return nil, err
	}
	ok := from == to || from == sdk.SchemaJSON && to == sdk.SchemaFlatBuffer ||
		from == sdk.SchemaFlatBuffer && (to == sdk.SchemaJSON || to == sdk.SchemaText || to == sdk.SchemaRaw)
	if !ok {
		return nil, t.errorf("target_format", "unsupported FlatBuffer conversion: %s → %s (want json → flat_buffer, or flat_buffer → json, text or raw)", from, to)
	}
	c := &flatBufferConvert{from: from, to: to}
	if c.mappings, err = t.fieldMappings(); err != nil {
		return nil, err
	}
	if c.rootTable, c.hasRoot, err = t.str("root_table_name", false); err != nil {
		return nil, err
	}
	// Read as upstream and unused by its conversions: no .fbs schema is compiled.
	if _, _, err = t.str("schema_path", false); err != nil {
		return nil, err
	}
	paths, err := t.list("include_paths", true)
	if err != nil {
		return nil, err
	}
	for i, p := range paths {
		if _, isStr := p.(string); !isStr {
			return nil, t.errorf(fmt.Sprintf("include_paths[%d]", i), "want a string, got %s", typeName(p))
		}
	}
	if v, present := t.m["preserve_unknown_fields"]; !present {
		t.get("preserve_unknown_fields")
		return nil, t.errorf("preserve_unknown_fields", "required key missing")
	} else if _, isBool := v.(bool); !isBool {
		return nil, t.errorf("preserve_unknown_fields", "want true or false, got %s", typeName(v))
	}
	t.get("preserve_unknown_fields")
	opts, hints, err := t.options("conversion_options", flatBufferBools, flatBufferUints, nil)
	if err != nil {
		return nil, err
	}
	c.verify = opts["verify_buffers"]
	c.sizeHint = int(min(hints["buffer_size_hint"], maxSizeHint))
	return c, nil
}

func (c *flatBufferConvert) Apply(v *fastjson.Value, a *fastjson.Arena) (*fastjson.Value, error) {
	return applyAsJSON(c, v, a)
}

func (c *flatBufferConvert) Convert(p Payload, a *fastjson.Arena) (Payload, error) {
	if p.Format != c.from {
		return Payload{}, fmt.Errorf("want a %s payload, got %s", c.from, p.Format)
	}
	switch {
	case c.from == c.to:
		return p, nil
	case c.to == sdk.SchemaFlatBuffer:
		if c.builder == nil {
			c.builder = flatbuffers.NewBuilder(c.sizeHint)
		}
		return Payload{Format: sdk.SchemaFlatBuffer, Bytes: c.build(renameKeys(p.JSON, c.mappings, a))}, nil
	case c.to == sdk.SchemaJSON:
		return c.summary(p.Bytes, a)
	}
	return reformat(p, sdk.SchemaFlatBuffer, c.to)
}

// summary is upstream's FlatBuffer decoder: {"buffer_size", "has_root_table" (always true
// there), "root_table_type" (root_table_name, when set), "raw_data_base64"}, keys renamed
// by field_mappings. An empty buffer is refused, and one under 4 bytes when verify_buffers.
func (c *flatBufferConvert) summary(b []byte, a *fastjson.Arena) (Payload, error) {
	if len(b) == 0 {
		return Payload{}, errors.New("empty flat_buffer payload")
	}
	if c.verify && len(b) < 4 {
		return Payload{}, fmt.Errorf("%d bytes, a FlatBuffer has at least 4 (verify_buffers)", len(b))
	}
	o := a.NewObject()
	o.Set("buffer_size", a.NewNumberInt(len(b)))
	o.Set("has_root_table", a.NewTrue())
	if c.hasRoot {
		o.Set("root_table_type", a.NewString(c.rootTable))
	}
	o.Set("raw_data_base64", a.NewStringBytes(base64.StdEncoding.AppendEncode(nil, b)))
	return Payload{Format: sdk.SchemaJSON, JSON: renameKeys(o, c.mappings, a)}, nil
}

// build returns the FlatBuffer upstream's encoder builds from a JSON value without a
// schema (the flatbuffers builder lays it out back to front, so the bytes are the Rust
// builder's):
//
//   - an object: one string per key and one per value (a string value as is, any other as
//     its compact JSON), created in key order, then as the root a vector of u32 holding,
//     for each pair, the two strings' positions from the end of the buffer (plain numbers,
//     not offsets: upstream's choice);
//   - anything else: its compact JSON as the root string.
func (c *flatBufferConvert) build(v *fastjson.Value) []byte {
	b := c.builder
	b.Reset()
	if o := object(v); o != nil {
		c.pos = c.pos[:0]
		o.Visit(func(k []byte, e *fastjson.Value) {
			c.pos = append(c.pos, b.CreateByteString(k))
			if e.Type() == fastjson.TypeString {
				s, _ := e.StringBytes()
				c.pos = append(c.pos, b.CreateByteString(s))
			} else {
				c.text = schema.AppendJSON(c.text[:0], e)
				c.pos = append(c.pos, b.CreateByteString(c.text))
			}
		})
		b.StartVector(flatbuffers.SizeUint32, len(c.pos), flatbuffers.SizeUint32)
		for i := len(c.pos) - 1; i >= 0; i-- {
			b.PrependUint32(uint32(c.pos[i])) // a number, not an offset (see above)
		}
		b.Finish(b.EndVector(len(c.pos)))
	} else {
		c.text = schema.AppendJSON(c.text[:0], v)
		b.Finish(b.CreateByteString(c.text))
	}
	return append([]byte(nil), b.FinishedBytes()...)
}
