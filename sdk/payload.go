package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// Payload is a message's payload decoded by its stream's schema, as Iggy's SDK hands it
// to a Rust sink. Exactly one of its value fields is set, as Kind says; Raw always holds
// the bytes.
type Payload struct {
	Kind Schema // json (also proto and flat_buffer, which reach a sink as JSON), text or raw
	Raw  []byte // the payload's bytes, as Ferry handed them to the sink
	// JSON is the decoded JSON value (json, proto, flat_buffer): map[string]any,
	// []any, string, json.Number, bool or nil. Numbers keep their literal.
	JSON any
	Text string // text
}

// Value decodes m's payload for a stream of schema s (MessagesMetadata.Schema). Ferry has
// checked and re-encoded it before Consume (a message that failed never reaches a sink),
// so an error means the payload did not come through Ferry's runtime. For raw and avro
// payloads Kind is raw and only Raw is set. It allocates the decoded value: a sink that
// only forwards bytes should use Payload.
func (m *ConsumedMessage) Value(s Schema) (Payload, error) {
	p := Payload{Kind: SchemaRaw, Raw: m.Payload}
	switch s {
	case SchemaJSON, SchemaProto, SchemaFlatBuffer:
		d := json.NewDecoder(bytes.NewReader(m.Payload))
		d.UseNumber()
		if err := d.Decode(&p.JSON); err != nil {
			return Payload{}, fmt.Errorf("offset %d: %s payload is not JSON: %w", m.Offset, s, err)
		}
		if _, err := d.Token(); err != io.EOF {
			return Payload{}, fmt.Errorf("offset %d: %s payload has data after its JSON value", m.Offset, s)
		}
		p.Kind = SchemaJSON
	case SchemaText:
		if !utf8.Valid(m.Payload) {
			return Payload{}, fmt.Errorf("offset %d: text payload is not valid UTF-8", m.Offset)
		}
		p.Kind, p.Text = SchemaText, string(m.Payload)
	}
	return p, nil
}
