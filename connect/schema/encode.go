package schema

import (
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/linkedin/goavro/v2"
	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ferryio/ferry/sdk"
)

// Encoder encodes payloads to a stream of one schema: Encode, plus avro.
type Encoder struct {
	to   sdk.Schema
	avro *goavro.Codec // the schema without logical types, as the decoder reads it
}

// NewEncoder returns the encoder to a stream of schema to; avroSchema as NewDecoder's.
func NewEncoder(to sdk.Schema, avroSchema string) (*Encoder, error) {
	if _, err := sdk.ParseSchema(string(to)); err != nil {
		return nil, err
	}
	e := &Encoder{to: to}
	if to == sdk.SchemaAvro && avroSchema != "" {
		c, err := newAvroCodec(avroSchema)
		if err != nil {
			return nil, fmt.Errorf("avro schema: %w", err)
		}
		e.avro = c.codec
	}
	return e, nil
}

// Encode is [Encode] to e's schema. To avro: avro bytes are checked to be one datum of the
// schema and sent as they are; a JSON value (or json payload) in Avro's JSON encoding (as
// the avro decoder writes it) is encoded as a binary datum.
func (e *Encoder) Encode(dst []byte, from sdk.Schema, v *fastjson.Value, payload []byte) ([]byte, error) {
	if e.to != sdk.SchemaAvro {
		return Encode(dst, from, e.to, v, payload)
	}
	if from == "" {
		from = e.to
	}
	if e.avro == nil {
		return nil, ErrNoAvroSchema
	}
	switch {
	case v == nil && from == sdk.SchemaAvro:
		_, rest, err := e.avro.NativeFromBinary(payload)
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		if len(rest) > 0 {
			return nil, fmt.Errorf("avro: %d trailing bytes after the datum", len(rest))
		}
		return append(dst, payload...), nil
	case v != nil || from == sdk.SchemaJSON:
		text := payload
		if v != nil {
			text = AppendJSON(nil, v)
		}
		native, _, err := e.avro.NativeFromTextual(text)
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		out, err := e.avro.BinaryFromNative(dst, native)
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot convert a %s payload to the stream's schema avro", from)
}

// Check reports whether payload is valid for schema s as produced by a source: json must
// be valid JSON, text valid UTF-8; other schemas take any bytes.
func Check(s sdk.Schema, payload []byte) error {
	switch s {
	case sdk.SchemaJSON:
		if !utf8.Valid(payload) {
			return fmt.Errorf("payload is not JSON: %w", errNotUTF8(payload))
		}
		if err := fastjson.ValidateBytes(payload); err != nil {
			return fmt.Errorf("payload is not valid JSON (stream schema json): %w", err)
		}
	case sdk.SchemaText:
		if !utf8.Valid(payload) {
			return fmt.Errorf("payload is not text (stream schema text): %w", errNotUTF8(payload))
		}
	}
	return nil
}

// Encode appends to dst the payload sent to a stream of schema to, for a message a source
// produced in schema from: v is its JSON value after transforms (nil when it has none:
// raw, text, or a proto payload that is not an Any), payload the bytes as produced.
//
//   - to json: a JSON value as compact JSON; text as a JSON string literal; raw bytes when
//     they are valid JSON (Ferry; upstream refuses raw);
//   - to text: text as is; a JSON value as its JSON text; raw bytes when valid UTF-8;
//   - to raw: the bytes (a JSON value as its JSON text; upstream accepts raw only);
//   - to proto: proto bytes as is; a JSON object {"type_url":s,"value":base64} as the Any
//     it describes (what a proto payload decodes to);
//   - to flat_buffer: flat_buffer or raw bytes as is;
//   - anything else is an error naming both schemas.
func Encode(dst []byte, from, to sdk.Schema, v *fastjson.Value, payload []byte) ([]byte, error) {
	if from == "" {
		from = to
	}
	switch to {
	case sdk.SchemaJSON:
		switch {
		case v != nil:
			return AppendJSON(dst, v), nil
		case from == sdk.SchemaText:
			if !utf8.Valid(payload) {
				return nil, fmt.Errorf("text payload: %w", errNotUTF8(payload))
			}
			return AppendString(dst, payload), nil
		case from == sdk.SchemaRaw || from == sdk.SchemaJSON:
			if !utf8.Valid(payload) {
				return nil, fmt.Errorf("payload is not JSON: %w", errNotUTF8(payload))
			}
			if err := fastjson.ValidateBytes(payload); err != nil {
				return nil, fmt.Errorf("payload is not valid JSON (stream schema json): %w", err)
			}
			return append(dst, payload...), nil
		}
	case sdk.SchemaText:
		if v != nil {
			return AppendJSON(dst, v), nil
		}
		if from == sdk.SchemaText || from == sdk.SchemaRaw || from == sdk.SchemaJSON {
			if !utf8.Valid(payload) {
				return nil, fmt.Errorf("payload is not text (stream schema text): %w", errNotUTF8(payload))
			}
			return append(dst, payload...), nil
		}
	case sdk.SchemaRaw:
		if v != nil && from != sdk.SchemaProto && from != sdk.SchemaFlatBuffer {
			return AppendJSON(dst, v), nil
		}
		return append(dst, payload...), nil
	case sdk.SchemaProto:
		if v != nil {
			return appendAny(dst, v)
		}
		if from == sdk.SchemaProto {
			return append(dst, payload...), nil
		}
	case sdk.SchemaFlatBuffer:
		if v == nil && (from == sdk.SchemaFlatBuffer || from == sdk.SchemaRaw) {
			return append(dst, payload...), nil
		}
		if from == sdk.SchemaFlatBuffer {
			return append(dst, payload...), nil // transforms never change the bytes of a FlatBuffer
		}
	case sdk.SchemaAvro:
		return nil, errors.New("avro needs the stream's schema: use an Encoder")
	}
	return nil, fmt.Errorf("cannot convert a %s payload to the stream's schema %s", from, to)
}

// appendAny encodes a JSON object {"type_url": string, "value": base64 string} as a
// protobuf Any.
func appendAny(dst []byte, v *fastjson.Value) ([]byte, error) {
	if v.Type() != fastjson.TypeObject {
		return nil, errors.New("proto: want a JSON object {type_url, value}")
	}
	tv := v.Get("type_url")
	if tv == nil {
		return nil, errors.New(`proto: "type_url" missing`)
	}
	tu, err := tv.StringBytes()
	if err != nil {
		return nil, errors.New(`proto: "type_url" must be a string`)
	}
	var val []byte
	if vv := v.Get("value"); vv != nil {
		s, err := vv.StringBytes()
		if err != nil {
			return nil, errors.New(`proto: "value" must be a base64 string`)
		}
		if val, err = base64.StdEncoding.AppendDecode(nil, s); err != nil {
			return nil, fmt.Errorf(`proto: "value": %w`, err)
		}
	}
	if len(tu) > 0 {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, tu)
	}
	if len(val) > 0 {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendBytes(dst, val)
	}
	return dst, nil
}
