package connect

import (
	"fmt"
	"os"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/connect/transform"
	"github.com/ferryio/ferry/sdk"
)

// Stages a message can fail at before it reaches the sink (the ferry-stage header of its
// dead letter).
const (
	stageDecode    = "decode"
	stageTransform = "transform"
	stageConsume   = "consume" // the sink failed the batch or rejected the message
)

// payloadPipeline decodes the payloads of one topic consumer by its stream's schema, runs
// the connector's transforms and re-encodes them (docs/architecture.md, "The life of one
// message"). One per topic consumer, used by its consume goroutine only; the bytes it
// returns are valid until its next reset.
type payloadPipeline struct {
	dec   *schema.Decoder
	chain *transform.Chain
	arena fastjson.Arena
	buf   []byte // the re-encoded payloads of the current batch
}

// newPayloadPipeline returns the pipeline of a stream, or nil when payloads pass as they
// are: a raw stream without a format conversion (the field transforms only act on JSON
// objects, so they change nothing there).
// avroSchema is the stream's Avro schema (avroSchemaText).
func newPayloadPipeline(s sdk.Schema, avroSchema string, ts []config.Transform) (*payloadPipeline, error) {
	chain, err := buildChain(ts)
	if err != nil {
		return nil, err
	}
	if s == sdk.SchemaRaw && !chain.Converts() { // a format conversion acts on raw payloads too
		return nil, nil
	}
	dec, err := schema.NewDecoder(s, avroSchema)
	if err != nil {
		return nil, err
	}
	return &payloadPipeline{dec: dec, chain: chain}, nil
}

// avroSchemaText is a stream's Avro schema: avro_schema_json, else the file at
// avro_schema_path (read as given, relative to the working directory), else "".
func avroSchemaText(s sdk.Schema, inline, path string) (string, error) {
	if s != sdk.SchemaAvro {
		return "", nil
	}
	if inline != "" || path == "" {
		return inline, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("avro_schema_path: %w", err)
	}
	return string(b), nil
}

func buildChain(ts []config.Transform) (*transform.Chain, error) {
	specs := make([]transform.Spec, len(ts))
	for i, t := range ts {
		specs[i] = transform.Spec{Type: t.Type, Enabled: t.Enabled, Table: t.Config}
	}
	return transform.Build(specs)
}

// reset starts a batch: the previous batch's payloads are no longer used.
func (p *payloadPipeline) reset() { p.buf = p.buf[:0] }

// payload returns the bytes handed to the sink for in, or the stage that failed and why.
// A text payload is only checked (the bytes are the text); a JSON value is re-encoded as
// compact JSON after the transforms.
func (p *payloadPipeline) payload(in []byte) ([]byte, string, error) {
	p.arena.Reset() // the previous message's values are encoded already
	if p.chain.Len() == 0 {
		// Nothing would change the value: a payload already in AppendJSON's form is
		// checked and handed on as it is (the same bytes, without building its value).
		ok, err := p.dec.Verbatim(in)
		if err != nil {
			return nil, stageDecode, err
		}
		if ok {
			return in, "", nil
		}
	}
	v, err := p.dec.Decode(in)
	if err != nil {
		return nil, stageDecode, err
	}
	if p.chain.Converts() {
		return p.convert(v, in)
	}
	if v == nil {
		return in, "", nil
	}
	if p.chain.Len() > 0 {
		if v, err = p.chain.Apply(v, &p.arena); err != nil {
			return nil, stageTransform, err
		}
	}
	start := len(p.buf)
	p.buf = schema.AppendJSON(p.buf, v)
	return p.buf[start:len(p.buf):len(p.buf)], "", nil
}

// convert runs a chain with a format conversion on the decoded payload (upstream's Payload:
// JSON, or text or raw bytes) and hands the sink the bytes of what comes out: compact JSON
// for a JSON value, the bytes of any other format.
func (p *payloadPipeline) convert(v *fastjson.Value, in []byte) ([]byte, string, error) {
	pl := transform.Payload{Format: sdk.SchemaJSON, JSON: v}
	if v == nil {
		pl = transform.Payload{Format: p.dec.Schema(), Bytes: in}
	}
	pl, err := p.chain.ApplyPayload(pl, &p.arena)
	if err != nil {
		return nil, stageTransform, err
	}
	start := len(p.buf)
	if pl.Format == sdk.SchemaJSON {
		p.buf = schema.AppendJSON(p.buf, pl.JSON)
	} else {
		p.buf = append(p.buf, pl.Bytes...)
	}
	return p.buf[start:len(p.buf):len(p.buf)], "", nil
}

// poisoned is a message that failed decode or a transform: it never reaches the sink and
// is handled by on_failure alone (batchProcessor.deliver, failure.go).
type poisoned struct {
	msg   sdk.ConsumedMessage // as polled (payload and headers alias the poll buffer)
	stage string
	err   error
}

func (m poisoned) cause() error {
	return fmt.Errorf("offset %d: %s: %w", m.msg.Offset, m.stage, m.err)
}
