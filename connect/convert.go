package connect

import (
	"encoding/binary"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// converter turns polled wire messages into the sdk messages of one Consume call, reusing
// its slices from batch to batch (one converter per topic consumer, used by one goroutine).
// The results alias the poll buffer: valid until the batch is released. With a pipeline
// (every schema but raw) payloads are decoded, transformed and re-encoded, and a message
// that fails goes to poison instead of the result; without one (raw) the payloads are the
// poll buffer's bytes, untouched.
type converter struct {
	pipe   *payloadPipeline
	msgs   []sdk.ConsumedMessage
	hdrs   []sdk.Header
	kvs    []wire.KV
	poison []poisoned // of the last convert
}

// convert decodes ms. A message whose user headers do not decode is delivered without
// headers and counted in HeaderErrors (never dropped: dropping would commit past it).
// Messages that fail decode or a transform are left out and listed in c.poison.
func (c *converter) convert(ms []wire.Message, counters *Counters) []sdk.ConsumedMessage {
	if cap(c.msgs) < len(ms) {
		c.msgs = make([]sdk.ConsumedMessage, len(ms))
	}
	c.msgs = c.msgs[:len(ms)]
	c.hdrs = c.hdrs[:0]
	c.poison = c.poison[:0]
	if c.pipe != nil {
		c.pipe.reset()
	}
	n := 0
	for i := range ms {
		m := &ms[i]
		var hs []sdk.Header
		if len(m.RawHeaders) > 0 {
			kvs, err := m.Headers(c.kvs[:0])
			c.kvs = kvs
			if err != nil {
				counters.HeaderErrors.Add(1)
			} else {
				start := len(c.hdrs)
				for _, kv := range kvs {
					c.hdrs = append(c.hdrs, sdk.Header{
						Key:   sdk.HeaderField{Kind: sdk.HeaderKind(kv.Key.Kind), Value: kv.Key.Raw},
						Value: sdk.HeaderField{Kind: sdk.HeaderKind(kv.Value.Kind), Value: kv.Value.Raw},
					})
				}
				hs = c.hdrs[start:len(c.hdrs):len(c.hdrs)]
			}
		}
		// Field by field into the reused element: a whole-struct copy would go through
		// the GC's bulk write barrier for every message.
		out := &c.msgs[n]
		out.ID = messageID(m.ID)
		out.Offset = m.Offset
		out.Checksum = m.Checksum
		out.Timestamp = m.Timestamp
		out.OriginTimestamp = m.OriginTimestamp
		out.Headers = hs
		out.Payload = m.Payload
		if c.pipe != nil {
			p, stage, err := c.pipe.payload(m.Payload)
			if err != nil {
				if stage == stageDecode {
					counters.DecodeErrors.Add(1)
				} else {
					counters.Decoded.Add(1)
					counters.TransformErrors.Add(1)
				}
				c.poison = append(c.poison, poisoned{msg: *out, stage: stage, err: err})
				continue
			}
			counters.Decoded.Add(1)
			out.Payload = p
		}
		n++
	}
	c.msgs = c.msgs[:n]
	return c.msgs
}

func messageID(u wire.Uint128) sdk.MessageID {
	var id sdk.MessageID
	binary.LittleEndian.PutUint64(id[:8], u.Lo)
	binary.LittleEndian.PutUint64(id[8:], u.Hi)
	return id
}
