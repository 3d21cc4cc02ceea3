package connect

import (
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/connect/transform"
	"github.com/ferryio/ferry/sdk"
)

// sourcePipeline encodes what a source produced to its stream's schema (schema.Encoder),
// running the connector's transforms on JSON payloads first. Used by the source's one
// goroutine only.
type sourcePipeline struct {
	to    sdk.Schema
	avro  string // the stream's Avro schema
	enc   *schema.Encoder
	chain *transform.Chain
	decs  map[sdk.Schema]*schema.Decoder // by the schema the source produced in
	arena fastjson.Arena
	// checked: the source guarantees its payloads are valid in the schema it names
	// (sdk.CheckedPayloads), so they are not checked again.
	checked bool
}

func newSourcePipeline(to sdk.Schema, avroSchema string, chain *transform.Chain) (*sourcePipeline, error) {
	enc, err := schema.NewEncoder(to, avroSchema)
	if err != nil {
		return nil, err
	}
	return &sourcePipeline{to: to, avro: avroSchema, enc: enc, chain: chain, decs: map[sdk.Schema]*schema.Decoder{}}, nil
}

// passThrough reports whether a batch produced in schema from goes to Iggy as it is,
// unchecked: to a raw stream, or in the stream's own schema when that takes any bytes
// (json and text payloads are checked, as upstream decodes them, unless the source
// guarantees them).
func (p *sourcePipeline) passThrough(from sdk.Schema) bool {
	if p.chain.Len() > 0 {
		return false
	}
	same := from == "" || from == p.to
	return p.to == sdk.SchemaRaw || (same && (p.checked || (p.to != sdk.SchemaJSON && p.to != sdk.SchemaText)))
}

// rejectedMessage is a produced message that could not be encoded or transformed: on_failure
// handles it alone.
type rejectedMessage struct {
	msg   sdk.ProducedMessage
	stage string // encode or transform
	err   error
}

// encode returns the messages of b to send, and those that failed. Without transforms a
// payload is decoded only to be checked (json must parse, text be UTF-8); with them a
// JSON payload is decoded, transformed and re-encoded.
func (p *sourcePipeline) encode(b sdk.SourceBatch) ([]sdk.ProducedMessage, []rejectedMessage) {
	if p.passThrough(b.Schema) {
		return b.Messages, nil
	}
	from := b.Schema
	if from == "" {
		from = p.to
	}
	var dec *schema.Decoder
	if p.chain.Len() > 0 {
		if dec = p.decs[from]; dec == nil {
			var err error
			if dec, err = schema.NewDecoder(from, p.avro); err != nil {
				bad := make([]rejectedMessage, len(b.Messages))
				for i, m := range b.Messages {
					bad[i] = rejectedMessage{m, "encode", err}
				}
				return nil, bad
			}
			p.decs[from] = dec
		}
	}
	// out stays nil while every message goes as produced (checked, unchanged): then the
	// batch's own slice is returned, not a copy.
	var out []sdk.ProducedMessage
	var bad []rejectedMessage
	for i, m := range b.Messages {
		pl, stage, err := p.payload(dec, from, m.Payload)
		same := err == nil && len(pl) == len(m.Payload) && (len(pl) == 0 || &pl[0] == &m.Payload[0])
		if out == nil && !same {
			out = append(make([]sdk.ProducedMessage, 0, len(b.Messages)), b.Messages[:i]...)
		}
		if err != nil {
			bad = append(bad, rejectedMessage{m, stage, fmt.Errorf("message %d: %s: %w", i, stage, err)})
			continue
		}
		if out != nil {
			m.Payload = pl
			out = append(out, m)
		}
	}
	if out == nil {
		return b.Messages, bad
	}
	return out, bad
}

func (p *sourcePipeline) payload(dec *schema.Decoder, from sdk.Schema, in []byte) ([]byte, string, error) {
	if p.chain.Converts() {
		return p.convert(dec, from, in)
	}
	var v *fastjson.Value
	if dec != nil && dec.JSON() {
		p.arena.Reset()
		var err error
		v, err = dec.Decode(in)
		switch {
		case err != nil && from == sdk.SchemaProto:
			v = nil // not an Any: passed on as raw bytes, as upstream
		case err != nil:
			return nil, "encode", err
		default:
			if v, err = p.chain.Apply(v, &p.arena); err != nil {
				return nil, "transform", err
			}
		}
	}
	if v == nil && from == p.to && p.to != sdk.SchemaAvro { // checked, sent as produced (no copy)
		if err := schema.Check(from, in); err != nil {
			return nil, "encode", err
		}
		return in, "", nil
	}
	out, err := p.enc.Encode(nil, from, v, in)
	if err != nil {
		return nil, "encode", err
	}
	return out, "", nil
}

// convert runs a chain with a format conversion on what the source produced, read as
// upstream reads it (Schema::try_into_payload): json parsed, a proto Any as its JSON form
// (else raw bytes), text checked, raw, flat_buffer and avro as their bytes. What comes out
// is encoded to the stream's schema as a payload produced in its format.
func (p *sourcePipeline) convert(dec *schema.Decoder, from sdk.Schema, in []byte) ([]byte, string, error) {
	p.arena.Reset()
	pl := transform.Payload{Format: from, Bytes: in}
	switch from {
	case sdk.SchemaJSON, sdk.SchemaProto:
		v, err := dec.Decode(in)
		switch {
		case err != nil && from == sdk.SchemaProto:
			pl.Format = sdk.SchemaRaw // not an Any: raw bytes, as upstream
		case err != nil:
			return nil, "encode", err
		default:
			pl = transform.Payload{Format: sdk.SchemaJSON, JSON: v}
		}
	case sdk.SchemaText:
		if err := schema.Check(from, in); err != nil {
			return nil, "encode", err
		}
	}
	pl, err := p.chain.ApplyPayload(pl, &p.arena)
	if err != nil {
		return nil, "transform", err
	}
	out, err := p.enc.Encode(nil, pl.Format, pl.JSON, pl.Bytes)
	if err != nil {
		return nil, "encode", err
	}
	return out, "", nil
}
