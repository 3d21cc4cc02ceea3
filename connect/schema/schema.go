// Package schema decodes message payloads by their stream's schema into the value that
// transforms see, and encodes values back to bytes, as Iggy's runtime does
// (docs/architecture.md, "The life of one message"; the rules are Iggy's decoders and
// encoders per schema). It is pure: no I/O, no clock, no goroutines.
//
// json, proto, flat_buffer and avro payloads decode to a JSON value (*fastjson.Value); raw and
// text payloads have no JSON value and pass as bytes. A Decoder and an Encoder reuse
// their buffers: each is used by one goroutine, and what they return is valid until
// their next call.
package schema

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ferryio/ferry/sdk"
)

// ErrNoAvroSchema is wrapped by the error of every avro payload of a stream that has no
// avro_schema_json or avro_schema_path (as upstream: every such message fails).
var ErrNoAvroSchema = errors.New("avro: the stream has no avro_schema_json or avro_schema_path")

// Decoder decodes the payloads of one stream schema.
type Decoder struct {
	schema sdk.Schema
	avro   *avroCodec // avro with a schema
	p      fastjson.Parser
	buf    []byte
}

// NewDecoder returns the decoder of schema s. avroSchema is the Avro schema (JSON text) of
// an avro stream, "" when it has none; an invalid one is an error.
func NewDecoder(s sdk.Schema, avroSchema string) (*Decoder, error) {
	switch s {
	case sdk.SchemaJSON, sdk.SchemaRaw, sdk.SchemaText, sdk.SchemaProto, sdk.SchemaFlatBuffer:
		return &Decoder{schema: s}, nil
	case sdk.SchemaAvro:
		d := &Decoder{schema: s}
		if avroSchema != "" {
			c, err := newAvroCodec(avroSchema)
			if err != nil {
				return nil, fmt.Errorf("avro schema: %w", err)
			}
			d.avro = c
		}
		return d, nil
	}
	return nil, fmt.Errorf("unknown schema %q", s)
}

// Schema is the schema d decodes.
func (d *Decoder) Schema() sdk.Schema { return d.schema }

// JSON reports whether d's payloads decode to a JSON value (json, proto, flat_buffer, avro).
func (d *Decoder) JSON() bool { return d.schema != sdk.SchemaRaw && d.schema != sdk.SchemaText }

// Decode decodes payload. It returns the JSON value for json, proto and flat_buffer (valid
// until the next Decode), and nil for raw and text, whose payload is the value. The error
// says what is wrong and where.
//
//   - json: strict JSON (valid UTF-8 included);
//   - raw: anything;
//   - text: valid UTF-8;
//   - proto: a protobuf Any, as {"type_url":…,"value":"<base64>"} (empty payload refused);
//   - flat_buffer: a summary {"buffer_size":n,"has_root_table":b,"raw_data_base64":…}
//     (fewer than 4 bytes refused);
//   - avro: one datum of the stream's Avro schema (trailing bytes refused), as Avro's JSON
//     encoding (record fields in schema order; a non-null union value wrapped as
//     {"type name": value}, bytes and fixed as strings of code points 0-255).
func (d *Decoder) Decode(payload []byte) (*fastjson.Value, error) {
	switch d.schema {
	case sdk.SchemaJSON:
		v, err := parseJSON(&d.p, payload)
		if err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		return v, nil
	case sdk.SchemaText:
		if !utf8.Valid(payload) {
			return nil, fmt.Errorf("text: %w", errNotUTF8(payload))
		}
		return nil, nil
	case sdk.SchemaProto:
		buf, err := appendAnyJSON(d.buf[:0], payload)
		if err != nil {
			return nil, fmt.Errorf("proto: %w", err)
		}
		d.buf = buf
		return d.p.ParseBytes(d.buf)
	case sdk.SchemaFlatBuffer:
		buf, err := appendFlatBufferJSON(d.buf[:0], payload)
		if err != nil {
			return nil, fmt.Errorf("flat_buffer: %w", err)
		}
		d.buf = buf
		return d.p.ParseBytes(d.buf)
	case sdk.SchemaAvro:
		if d.avro == nil {
			return nil, ErrNoAvroSchema
		}
		buf, err := d.avro.decode(d.buf[:0], payload)
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		d.buf = buf
		return parseJSON(&d.p, d.buf)
	}
	return nil, nil // raw
}

// Verbatim reports whether a payload of d's schema can be handed on as it is where it
// would otherwise be decoded and re-encoded with AppendJSON and nothing in between: a json
// payload that is valid (the error is Decode's) and already in AppendJSON's form. That
// skips building its value; false (nil error) means Decode it.
func (d *Decoder) Verbatim(payload []byte) (bool, error) {
	if d.schema != sdk.SchemaJSON {
		return false, nil
	}
	if quickCompact(payload) {
		return true, nil
	}
	if !compactJSON(payload) {
		return false, nil
	}
	if !utf8.Valid(payload) {
		return false, fmt.Errorf("json: %w", errNotUTF8(payload))
	}
	if err := fastjson.ValidateBytes(payload); err != nil {
		return false, fmt.Errorf("json: %w", err)
	}
	return true, nil
}

// compactJSON reports whether JSON text p, if valid, is what AppendJSON writes for its
// value: no whitespace outside strings and no escape sequence at all (AppendJSON keeps
// keys in order, number literals as written and string bytes without an escape as they
// are, and valid JSON has no raw control character inside a string).
func compactJSON(p []byte) bool {
	if bytes.IndexByte(p, '\\') >= 0 {
		return false
	}
	// Without any whitespace byte at all (IndexByte is vectorised) it is compact; with
	// some, it is compact if all of it sits inside strings.
	if bytes.IndexByte(p, ' ') < 0 && bytes.IndexByte(p, '\n') < 0 && bytes.IndexByte(p, '\t') < 0 && bytes.IndexByte(p, '\r') < 0 {
		return true
	}
	in := false // inside a string: without escapes, the next '"' ends it
	for _, c := range p {
		switch c {
		case '\\':
			return false
		case '"':
			in = !in
		case ' ', '\t', '\n', '\r':
			if !in {
				return false
			}
		}
	}
	return true
}

func errNotUTF8(p []byte) error {
	i := 0
	for i < len(p) {
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	return fmt.Errorf("invalid UTF-8 at byte %d", i)
}

// appendAnyJSON decodes a protobuf google.protobuf.Any (type_url = field 1, value = field
// 2; unknown fields skipped, as prost does) and appends its JSON form.
func appendAnyJSON(dst, p []byte) ([]byte, error) {
	if len(p) == 0 {
		return nil, errors.New("empty payload")
	}
	var typeURL, value []byte
	for off := 0; off < len(p); {
		num, typ, n := protowire.ConsumeTag(p[off:])
		if n < 0 {
			return nil, fmt.Errorf("byte %d: bad tag: %w", off, protowire.ParseError(n))
		}
		off += n
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			b, m := protowire.ConsumeBytes(p[off:])
			if m < 0 {
				return nil, fmt.Errorf("byte %d: field %d: %w", off, num, protowire.ParseError(m))
			}
			if num == 1 {
				typeURL = b
			} else {
				value = b
			}
			off += m
			continue
		}
		if num == 1 || num == 2 {
			return nil, fmt.Errorf("byte %d: field %d has wire type %d, want 2 (bytes)", off-n, num, typ)
		}
		m := protowire.ConsumeFieldValue(num, typ, p[off:])
		if m < 0 {
			return nil, fmt.Errorf("byte %d: field %d: %w", off, num, protowire.ParseError(m))
		}
		off += m
	}
	if !utf8.Valid(typeURL) {
		return nil, fmt.Errorf("type_url: %w", errNotUTF8(typeURL))
	}
	dst = append(dst, `{"type_url":`...)
	dst = AppendString(dst, typeURL)
	dst = append(dst, `,"value":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, value)
	return append(dst, `"}`...), nil
}

// appendFlatBufferJSON appends the summary of a FlatBuffer: its size, whether its root
// offset (the first little-endian uint32) points inside the buffer, and its bytes.
func appendFlatBufferJSON(dst, p []byte) ([]byte, error) {
	if len(p) < 4 {
		return nil, fmt.Errorf("%d bytes, a FlatBuffer has at least 4", len(p))
	}
	root := binary.LittleEndian.Uint32(p)
	hasRoot := root >= 4 && uint64(root)+4 <= uint64(len(p))
	dst = append(dst, `{"buffer_size":`...)
	dst = fmt.Appendf(dst, "%d", len(p))
	dst = append(dst, `,"has_root_table":`...)
	dst = fmt.Appendf(dst, "%t", hasRoot)
	dst = append(dst, `,"raw_data_base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, p)
	return append(dst, `"}`...), nil
}
