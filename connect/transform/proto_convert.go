package transform

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/sdk"
)

// protoConvert is proto_convert. Without a schema it does upstream's "basic conversion": a
// proto payload is upstream's Payload::Proto, a string (Format proto, Bytes its text), and a
// binary protobuf arrives as raw bytes. With one (schema_path or descriptor_set, and
// message_type), JSON → proto writes the message's binary form as raw bytes (upstream's
// Payload::Raw), and raw bytes → JSON decode it.
type protoConvert struct {
	from, to    sdk.Schema
	mappings    map[string]string
	messageType string
	hasType     bool
	pretty      bool // conversion_options.pretty_json
	metadata    bool // conversion_options.include_metadata
	json        *schema.Decoder
	schema      *protoSchema // nil without schema_path or descriptor_set
}

var (
	protoBools   = []string{"validate_messages", "pretty_json", "include_metadata", "strict_mode"}
	protoStrings = []string{"type_url_prefix"}
)

func buildProtoConvert(t *table) (Transform, error) {
	from, to, err := t.formats()
	if err != nil {
		return nil, err
	}
	pair := [2]sdk.Schema{from, to}
	ok := from == sdk.SchemaProto || to == sdk.SchemaProto || from == to ||
		pair == [2]sdk.Schema{sdk.SchemaJSON, sdk.SchemaText} || pair == [2]sdk.Schema{sdk.SchemaText, sdk.SchemaJSON} ||
		pair == [2]sdk.Schema{sdk.SchemaJSON, sdk.SchemaRaw} || pair == [2]sdk.Schema{sdk.SchemaRaw, sdk.SchemaJSON}
	if !ok { // upstream builds it and fails every message
		return nil, t.errorf("target_format", "proto_convert does not convert %s to %s (want proto on one side, or json with text or raw)", from, to)
	}
	c := &protoConvert{from: from, to: to}
	if c.mappings, err = t.fieldMappings(); err != nil {
		return nil, err
	}
	if c.messageType, c.hasType, err = t.str("message_type", false); err != nil {
		return nil, err
	}
	if _, _, err = t.str("schema_registry_url", false); err != nil { // read, unused upstream
		return nil, err
	}
	paths, err := t.list("include_paths", true)
	if err != nil {
		return nil, err
	}
	includes := make([]string, len(paths))
	for i, p := range paths {
		s, isStr := p.(string)
		if !isStr {
			return nil, t.errorf(fmt.Sprintf("include_paths[%d]", i), "want a string, got %s", typeName(p))
		}
		includes[i] = s
	}
	if c.schema, err = loadProtoSchema(t, includes, c.messageType, c.hasType); err != nil {
		return nil, err
	}
	if err := t.requiredBool("preserve_unknown_fields"); err != nil {
		return nil, err
	}
	opts, _, err := t.options("conversion_options", protoBools, nil, protoStrings)
	if err != nil {
		return nil, err
	}
	c.pretty, c.metadata = opts["pretty_json"], opts["include_metadata"]
	if c.json, err = schema.NewDecoder(sdk.SchemaJSON, ""); err != nil {
		return nil, err
	}
	return c, nil
}

// requiredBool checks a boolean key upstream requires and Ferry does not use.
func (t *table) requiredBool(key string) error {
	v, present := t.get(key)
	if !present {
		return t.errorf(key, "required key missing")
	}
	if _, isBool := v.(bool); !isBool {
		return t.errorf(key, "want true or false, got %s", typeName(v))
	}
	return nil
}

func (c *protoConvert) Apply(v *fastjson.Value, a *fastjson.Arena) (*fastjson.Value, error) {
	return applyAsJSON(c, v, a)
}

// errPayloadType is upstream's InvalidPayloadType, with what was expected.
func errPayloadType(want string, got sdk.Schema) error {
	article := "a "
	if strings.HasPrefix(want, "a") {
		article = "an "
	}
	return fmt.Errorf("want %s payload, got %s", article+want, got)
}

// Convert follows upstream's ProtoConvert without a schema: field_mappings first, then
// from proto to anything, to proto from anything, the json/text/raw pairs, or the same
// format; any other pair fails every message, as upstream.
func (c *protoConvert) Convert(p Payload, a *fastjson.Arena) (Payload, error) {
	if p.Format == sdk.SchemaJSON {
		p.JSON = renameKeys(p.JSON, c.mappings, a)
	}
	switch {
	case c.from == sdk.SchemaProto:
		return c.fromProto(p, a)
	case c.to == sdk.SchemaProto:
		return c.toProto(p)
	case c.from == sdk.SchemaJSON && c.to == sdk.SchemaText:
		if p.Format != sdk.SchemaJSON {
			return Payload{}, errPayloadType("json", p.Format)
		}
		return Payload{Format: sdk.SchemaText, Bytes: c.jsonText(p.JSON)}, nil
	case c.from == sdk.SchemaJSON && c.to == sdk.SchemaRaw:
		if p.Format != sdk.SchemaJSON {
			return Payload{}, errPayloadType("json", p.Format)
		}
		return Payload{Format: sdk.SchemaRaw, Bytes: schema.AppendJSON(nil, p.JSON)}, nil
	case (c.from == sdk.SchemaText || c.from == sdk.SchemaRaw) && c.to == sdk.SchemaJSON:
		if p.Format != c.from {
			return Payload{}, errPayloadType(string(c.from), p.Format)
		}
		v, err := c.json.Decode(p.Bytes)
		if err != nil {
			return Payload{}, fmt.Errorf("%s payload is not JSON: %w", p.Format, err)
		}
		return Payload{Format: sdk.SchemaJSON, JSON: v}, nil
	case c.from == c.to:
		return p, nil
	}
	return Payload{}, fmt.Errorf("proto_convert does not convert %s to %s", c.from, c.to) // refused by build
}

// parse reads b as JSON when it is JSON; proto text that is not JSON is not an error
// (upstream keeps it as text).
func (c *protoConvert) parse(b []byte) (*fastjson.Value, bool) {
	v, err := c.json.Decode(b)
	return v, err == nil
}

func (c *protoConvert) jsonText(v *fastjson.Value) []byte {
	if c.pretty {
		return appendPrettyJSON(nil, v, 0)
	}
	return schema.AppendJSON(nil, v)
}

// anyOf decodes b as a google.protobuf.Any (as prost: unknown fields skipped), or reports
// false.
func anyOf(b []byte) (typeURL, value []byte, ok bool) {
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return nil, nil, false
		}
		off += n
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b[off:])
			if m < 0 {
				return nil, nil, false
			}
			if num == 1 {
				typeURL = v
			} else {
				value = v
			}
			off += m
			continue
		}
		if num == 1 || num == 2 {
			return nil, nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off:])
		if m < 0 {
			return nil, nil, false
		}
		off += m
	}
	if !utf8.Valid(typeURL) { // prost's string field
		return nil, nil, false
	}
	return typeURL, value, true
}

func (c *protoConvert) fromProto(p Payload, a *fastjson.Arena) (Payload, error) {
	b64 := func(b []byte) []byte { return base64.StdEncoding.AppendEncode(nil, b) }
	switch c.to {
	case sdk.SchemaProto:
		return p, nil
	case sdk.SchemaJSON:
		if c.schema != nil && p.Format == sdk.SchemaRaw {
			return c.decodeWithSchema(p.Bytes, a)
		}
		switch p.Format {
		case sdk.SchemaProto:
			v, isJSON := c.parse(p.Bytes)
			if !isJSON {
				o := a.NewObject()
				o.Set("proto_text", a.NewStringBytes(p.Bytes))
				o.Set("format", a.NewString("text"))
				return Payload{Format: sdk.SchemaJSON, JSON: o}, nil
			}
			if !c.metadata {
				return Payload{Format: sdk.SchemaJSON, JSON: v}, nil
			}
			m := a.NewObject()
			m.Set("converted_from", a.NewString("protobuf"))
			m.Set("timestamp", a.NewNumberString(fmt.Sprint(now().UnixMilli())))
			mt := "unknown"
			if c.hasType {
				mt = c.messageType
			}
			m.Set("message_type", a.NewString(mt))
			o := a.NewObject()
			o.Set("data", v)
			o.Set("metadata", m)
			return Payload{Format: sdk.SchemaJSON, JSON: o}, nil
		case sdk.SchemaRaw:
			o := a.NewObject()
			if url, val, ok := anyOf(p.Bytes); ok {
				o.Set("type_url", a.NewStringBytes(url))
				o.Set("value", a.NewStringBytes(b64(val)))
				if c.metadata {
					m := a.NewObject()
					m.Set("converted_from", a.NewString("protobuf_any"))
					m.Set("timestamp", a.NewNumberString(fmt.Sprint(now().UnixMilli())))
					o.Set("metadata", m)
				}
			} else {
				o.Set("binary_data", a.NewStringBytes(b64(p.Bytes)))
				o.Set("format", a.NewString("raw_binary"))
			}
			return Payload{Format: sdk.SchemaJSON, JSON: o}, nil
		}
		return Payload{}, errPayloadType("proto or raw", p.Format)
	case sdk.SchemaText:
		switch p.Format {
		case sdk.SchemaProto:
			return Payload{Format: sdk.SchemaText, Bytes: p.Bytes}, nil
		case sdk.SchemaRaw:
			if url, val, ok := anyOf(p.Bytes); ok {
				return Payload{Format: sdk.SchemaText, Bytes: fmt.Appendf(nil, "Type: %s\nData: %d bytes\nBase64: %s", url, len(val), b64(val))}, nil
			}
			return Payload{Format: sdk.SchemaText, Bytes: fmt.Appendf(nil, "Binary protobuf data: %d bytes\nBase64: %s", len(p.Bytes), b64(p.Bytes))}, nil
		}
		return Payload{}, errPayloadType("proto or raw", p.Format)
	}
	// raw, flat_buffer, avro: the bytes (a proto string's text), in the target format.
	if p.Format != sdk.SchemaProto && p.Format != sdk.SchemaRaw {
		return Payload{}, errPayloadType("proto or raw", p.Format)
	}
	return Payload{Format: c.to, Bytes: p.Bytes}, nil
}

func (c *protoConvert) toProto(p Payload) (Payload, error) {
	switch c.from {
	case sdk.SchemaJSON:
		if p.Format != sdk.SchemaJSON {
			return Payload{}, errPayloadType("json", p.Format)
		}
		return c.jsonToProto(p.JSON)
	case sdk.SchemaText:
		if p.Format != sdk.SchemaText {
			return Payload{}, errPayloadType("text", p.Format)
		}
		if v, isJSON := c.parse(p.Bytes); isJSON {
			return c.jsonToProto(v)
		}
		return Payload{Format: sdk.SchemaProto, Bytes: p.Bytes}, nil
	}
	if p.Format != c.from { // raw, flat_buffer, avro: their bytes as proto text
		return Payload{}, errPayloadType(string(c.from), p.Format)
	}
	if utf8.Valid(p.Bytes) {
		return Payload{Format: sdk.SchemaProto, Bytes: p.Bytes}, nil
	}
	return Payload{Format: sdk.SchemaProto, Bytes: fmt.Appendf(nil, "binary_data: %q", base64.StdEncoding.EncodeToString(p.Bytes))}, nil
}

// jsonToProto is upstream's json_to_protobuf: with a schema the message's binary form (a raw
// payload, as upstream), else the JSON's text as proto text. Upstream falls back to the text
// when its encoder fails; Ferry fails the message instead, so a bad record is not passed on
// in another shape.
func (c *protoConvert) jsonToProto(v *fastjson.Value) (Payload, error) {
	if c.schema == nil {
		return Payload{Format: sdk.SchemaProto, Bytes: c.jsonText(v)}, nil
	}
	b, err := c.schema.encode(schema.AppendJSON(nil, v))
	if err != nil {
		return Payload{}, err
	}
	return Payload{Format: sdk.SchemaRaw, Bytes: b}, nil
}

// decodeWithSchema reads raw bytes as the schema's message and gives its JSON, wrapped in
// data and metadata with include_metadata as for proto text.
func (c *protoConvert) decodeWithSchema(b []byte, a *fastjson.Arena) (Payload, error) {
	text, err := c.schema.decode(b)
	if err != nil {
		return Payload{}, err
	}
	v, err := c.json.Decode(text)
	if err != nil { // protojson wrote it: a bug, not bad input
		return Payload{}, fmt.Errorf("decode %s: protojson output is not JSON: %w", c.messageType, err)
	}
	if !c.metadata {
		return Payload{Format: sdk.SchemaJSON, JSON: v}, nil
	}
	m := a.NewObject()
	m.Set("converted_from", a.NewString("protobuf"))
	m.Set("timestamp", a.NewNumberString(fmt.Sprint(now().UnixMilli())))
	m.Set("message_type", a.NewString(c.messageType))
	o := a.NewObject()
	o.Set("data", v)
	o.Set("metadata", m)
	return Payload{Format: sdk.SchemaJSON, JSON: o}, nil
}
