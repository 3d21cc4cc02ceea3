package connect

import (
	"errors"
	"fmt"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// Iggy refuses some messages in whatever batch they are sent: a payload that is empty or
// over wire.MaxPayloadSize (64,000,000 bytes, upstream's limit on one message), or user
// headers over wire.MaxUserHeadersBytes. The client checks this before sending and then
// refuses the whole send, without saying which message of it was at fault (and the
// runtime's send holds every message of a batch, and with max_in_flight several batches).
// So the source runner takes such a message out of its batch before sending, as it does a
// payload that fails encode: on_failure handles that message alone and the rest of the
// batch is sent. Messages that fit each limit always fit in one frame (wire.MaxFrameSize,
// which the runtime's client keeps).

// errEmptyPayload is the refusal of a message without payload.
var errEmptyPayload = errors.New("empty payload: Iggy stores no message without one")

// unsendable reports why Iggy can never accept m, or nil.
func unsendable(m *sdk.ProducedMessage) error {
	if len(m.Payload) == 0 {
		return errEmptyPayload
	}
	if len(m.Payload) > wire.MaxPayloadSize {
		return fmt.Errorf("payload of %d bytes, over Iggy's limit of %d bytes per message", len(m.Payload), wire.MaxPayloadSize)
	}
	for _, name := range [2]string{m.Stream, m.Topic} {
		if name != "" && wire.CheckName(name) != nil {
			return fmt.Errorf("target %q/%q: an Iggy stream or topic name is 1 to 255 bytes of UTF-8", m.Stream, m.Topic)
		}
	}
	if n := headersSize(m.Headers); n > wire.MaxUserHeadersBytes {
		return fmt.Errorf("%d headers of %d bytes, over Iggy's limit of %d bytes per message", len(m.Headers), n, wire.MaxUserHeadersBytes)
	}
	return nil
}

// headerWireSize is what one header costs on the wire besides its key and value: a kind
// byte and a 4-byte length each (wire.KVsSize).
const headerWireSize = 10

// headersSize is the size of hs on the wire.
func headersSize(hs []sdk.Header) int {
	n := 0
	for _, h := range hs {
		n += headerWireSize + len(h.Key.Value) + len(h.Value.Value)
	}
	return n
}

// takeUnsendable returns msgs without the messages Iggy can never accept, and those as
// rejected at the send stage. msgs itself is not modified (it may be the source's own
// batch): a new slice is made when any is taken out.
func takeUnsendable(msgs []sdk.ProducedMessage) ([]sdk.ProducedMessage, []rejectedMessage) {
	var out []sdk.ProducedMessage
	var bad []rejectedMessage
	for i := range msgs {
		err := unsendable(&msgs[i])
		if err == nil {
			if bad != nil {
				out = append(out, msgs[i])
			}
			continue
		}
		if bad == nil {
			out = append(make([]sdk.ProducedMessage, 0, len(msgs)-1), msgs[:i]...)
		}
		bad = append(bad, rejectedMessage{msgs[i], "send", err})
	}
	if bad == nil {
		return msgs, nil
	}
	return out, bad
}
