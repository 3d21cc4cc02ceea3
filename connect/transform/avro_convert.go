package transform

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/sdk"
)

// avroConvert is avro_convert: between Avro datums and JSON (both ways, with the table's
// Avro schema), and from Avro to text (base64) or raw (the bytes). Pairs upstream does not
// convert pass the payload unchanged, as upstream. The JSON form of a datum is the one of
// an avro stream's decoder (connect/schema: Avro's JSON encoding, record fields in schema
// order), so a datum converted to JSON and back is the same bytes.
type avroConvert struct {
	from, to sdk.Schema
	mappings map[string]string
	enc      *schema.Encoder // to avro; nil without a schema
	dec      *schema.Decoder // avro to JSON; nil without a schema
	text     *schema.Decoder // text payloads read as JSON (text → avro)
}

var avroOptions = []string{"pretty_json", "include_metadata", "strict_mode"}

func buildAvroConvert(t *table) (Transform, error) {
	from, to, err := t.formats()
	if err != nil {
		return nil, err
	}
	c := &avroConvert{from: from, to: to}
	if c.mappings, err = t.fieldMappings(); err != nil {
		return nil, err
	}
	// Upstream reads these options and uses none of them in avro_convert.
	if _, _, err := t.options("conversion_options", avroOptions, nil, nil); err != nil {
		return nil, err
	}
	text, key, err := avroSchemaOf(t)
	if err != nil {
		return nil, err
	}
	needSchema := from != to && (to == sdk.SchemaAvro && (from == sdk.SchemaJSON || from == sdk.SchemaText) ||
		from == sdk.SchemaAvro && to == sdk.SchemaJSON)
	if text == "" {
		if needSchema {
			// Upstream builds the transform and fails every message; Ferry refuses the file.
			return nil, t.errorf("", "%s → %s needs schema_json or schema_path", from, to)
		}
		return c, nil
	}
	if c.enc, err = schema.NewEncoder(sdk.SchemaAvro, text); err != nil {
		return nil, t.errorf(key, "%v", err)
	}
	if c.dec, err = schema.NewDecoder(sdk.SchemaAvro, text); err != nil {
		return nil, t.errorf(key, "%v", err)
	}
	if c.text, err = schema.NewDecoder(sdk.SchemaJSON, ""); err != nil {
		return nil, err
	}
	return c, nil
}

// avroSchemaOf returns the Avro schema of the table: schema_json, else the file at
// schema_path (read now, relative to the working directory), else "". It names the key it
// came from.
func avroSchemaOf(t *table) (string, string, error) {
	inline, hasInline, err := t.str("schema_json", false)
	if err != nil {
		return "", "", err
	}
	path, hasPath, err := t.str("schema_path", false)
	if err != nil {
		return "", "", err
	}
	if hasInline { // upstream: schema_json wins over schema_path
		return inline, "schema_json", nil
	}
	if !hasPath {
		return "", "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", t.errorf("schema_path", "%v", err)
	}
	return string(b), "schema_path", nil
}

func (c *avroConvert) Apply(v *fastjson.Value, a *fastjson.Arena) (*fastjson.Value, error) {
	return applyAsJSON(c, v, a)
}

// Convert follows upstream's AvroConvert: field_mappings first (on a JSON object), then the
// pair of formats the table names.
func (c *avroConvert) Convert(p Payload, a *fastjson.Arena) (Payload, error) {
	if p.Format == sdk.SchemaJSON {
		p.JSON = renameKeys(p.JSON, c.mappings, a)
	}
	switch {
	case c.from == c.to:
		return p, nil
	case c.to == sdk.SchemaAvro && (c.from == sdk.SchemaJSON || c.from == sdk.SchemaText):
		return c.encode(p)
	case c.from == sdk.SchemaAvro && c.to == sdk.SchemaJSON:
		if p.Format != sdk.SchemaAvro {
			return Payload{}, fmt.Errorf("want an avro payload, got %s", p.Format)
		}
		if len(p.Bytes) == 0 {
			return Payload{}, errors.New("empty avro payload")
		}
		v, err := c.dec.Decode(p.Bytes)
		if err != nil {
			return Payload{}, err
		}
		return Payload{Format: sdk.SchemaJSON, JSON: renameKeys(v, c.mappings, a)}, nil
	case c.from == sdk.SchemaAvro && (c.to == sdk.SchemaText || c.to == sdk.SchemaRaw):
		return reformat(p, sdk.SchemaAvro, c.to)
	case c.from == sdk.SchemaRaw && c.to == sdk.SchemaAvro:
		if p.Format != sdk.SchemaRaw {
			return Payload{}, fmt.Errorf("want a raw payload, got %s", p.Format)
		}
		return Payload{Format: sdk.SchemaAvro, Bytes: p.Bytes}, nil // unchecked, as upstream
	}
	return p, nil // a pair upstream does not convert
}

// encode is upstream's Avro stream encoder on any payload: JSON (and text or proto read as
// JSON) becomes a datum of the schema; other bytes are taken as Avro as they are.
func (c *avroConvert) encode(p Payload) (Payload, error) {
	v := p.JSON
	switch p.Format {
	case sdk.SchemaJSON:
	case sdk.SchemaText, sdk.SchemaProto:
		var err error
		if v, err = c.text.Decode(p.Bytes); err != nil {
			return Payload{}, fmt.Errorf("%s payload is not JSON: %w", p.Format, err)
		}
	default:
		return Payload{Format: sdk.SchemaAvro, Bytes: p.Bytes}, nil
	}
	out, err := c.enc.Encode(nil, sdk.SchemaJSON, v, nil)
	if err != nil {
		return Payload{}, err
	}
	return Payload{Format: sdk.SchemaAvro, Bytes: out}, nil
}

// reformat is upstream's convert_format of the Avro and FlatBuffer encoders towards text
// or raw: the encoder's own binary format (binary) becomes base64 text or raw bytes, JSON
// becomes pretty JSON text or compact JSON bytes, text and raw swap (raw to text must be
// UTF-8); anything else is unchanged.
func reformat(p Payload, binary, to sdk.Schema) (Payload, error) {
	switch p.Format {
	case binary:
		if to == sdk.SchemaText {
			return Payload{Format: to, Bytes: base64.StdEncoding.AppendEncode(nil, p.Bytes)}, nil
		}
		return Payload{Format: to, Bytes: p.Bytes}, nil
	case sdk.SchemaJSON:
		if to == sdk.SchemaText {
			return Payload{Format: to, Bytes: appendPrettyJSON(nil, p.JSON, 0)}, nil
		}
		return Payload{Format: to, Bytes: schema.AppendJSON(nil, p.JSON)}, nil
	case sdk.SchemaText:
		if to == sdk.SchemaRaw {
			return Payload{Format: to, Bytes: p.Bytes}, nil
		}
	case sdk.SchemaRaw:
		if to == sdk.SchemaText {
			if !utf8.Valid(p.Bytes) {
				return Payload{}, errors.New("raw payload is not UTF-8 text")
			}
			return Payload{Format: to, Bytes: p.Bytes}, nil
		}
	}
	return p, nil
}
