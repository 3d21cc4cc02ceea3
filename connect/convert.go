package connect

import (
	"encoding/binary"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// converter turns polled wire messages into the sdk messages of one Consume call, reusing
// its slices from batch to batch (one converter per topic consumer, used by one goroutine).
// The results alias the poll buffer: valid until the batch is released.
type converter struct {
	msgs []sdk.ConsumedMessage
	hdrs []sdk.Header
	kvs  []wire.KV
}

// convert decodes ms. A message whose user headers do not decode is delivered without
// headers and counted in HeaderErrors (never dropped: dropping would commit past it).
func (c *converter) convert(ms []wire.Message, counters *Counters) []sdk.ConsumedMessage {
	c.msgs = c.msgs[:0]
	c.hdrs = c.hdrs[:0]
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
		c.msgs = append(c.msgs, sdk.ConsumedMessage{
			ID:              messageID(m.ID),
			Offset:          m.Offset,
			Checksum:        m.Checksum,
			Timestamp:       m.Timestamp,
			OriginTimestamp: m.OriginTimestamp,
			Headers:         hs,
			Payload:         m.Payload,
		})
	}
	return c.msgs
}

func messageID(u wire.Uint128) sdk.MessageID {
	var id sdk.MessageID
	binary.LittleEndian.PutUint64(id[:8], u.Lo)
	binary.LittleEndian.PutUint64(id[8:], u.Hi)
	return id
}
