package postcard

import (
	"unsafe"

	"github.com/ferryio/ferry/sdk"
)

// ProducedMessages layout: schema, Vec<ProducedMessage>, state: Option<ConnectorState>.
// ProducedMessage: id Option<u128>, checksum Option<u64>, timestamp Option<u64>,
// origin_timestamp Option<u64>, headers Option<header map> (inline, not a blob), payload
// Vec<u8>.

// OptU64 is an Option<u64>.
type OptU64 struct {
	Value uint64
	Valid bool
}

// ProducedMessage is one message as a source plugin encodes it. Upstream uses only ID,
// Headers and Payload; an absent or zero ID gets a random id when sent.
type ProducedMessage struct {
	ID              sdk.MessageID
	HasID           bool
	Checksum        OptU64
	Timestamp       OptU64
	OriginTimestamp OptU64
	Headers         []sdk.Header
	HasHeaders      bool // Some(map), possibly empty
	Payload         []byte
}

// ProducedMessages is the buffer a source plugin hands to the send callback.
type ProducedMessages struct {
	Schema   sdk.Schema
	Messages []ProducedMessage
	State    []byte
	HasState bool // Some(ConnectorState), possibly empty
}

// minProducedLen: five None tags + an empty payload.
const minProducedLen = 6

func appendOptU64(dst []byte, o OptU64) []byte {
	if !o.Valid {
		return append(dst, 0)
	}
	return AppendUvarint(append(dst, 1), o.Value)
}

// AppendProducedMessages appends p.
func (e *Encoder) AppendProducedMessages(dst []byte, p ProducedMessages) ([]byte, error) {
	si, err := SchemaIndex(p.Schema)
	if err != nil {
		return dst, err
	}
	for i := range p.Messages {
		if err := validHeaders(p.Messages[i].Headers); err != nil {
			return dst, err
		}
	}
	dst = AppendUvarint(dst, uint64(si))
	dst = AppendUvarint(dst, uint64(len(p.Messages)))
	for i := range p.Messages {
		m := &p.Messages[i]
		dst = AppendOption(dst, m.HasID)
		if m.HasID {
			lo, hi := m.ID.Halves()
			dst = AppendU128(dst, lo, hi)
		}
		dst = appendOptU64(dst, m.Checksum)
		dst = appendOptU64(dst, m.Timestamp)
		dst = appendOptU64(dst, m.OriginTimestamp)
		dst = AppendOption(dst, m.HasHeaders)
		if m.HasHeaders {
			dst = e.appendHeaderMap(dst, m.Headers)
		}
		dst = AppendBytes(dst, m.Payload)
	}
	dst = AppendOption(dst, p.HasState)
	if p.HasState {
		dst = AppendConnectorState(dst, p.State)
	}
	return dst, nil
}

func (r *Reader) optU64() OptU64 {
	if !r.Option() {
		return OptU64{}
	}
	return OptU64{Value: r.U64(), Valid: r.err == nil}
}

// DecodeProducedMessages decodes a ProducedMessages buffer, copying every byte it keeps (the
// plugin frees its buffer when the callback returns). Trailing bytes are ignored.
func DecodeProducedMessages(b []byte) (ProducedMessages, error) {
	r := NewReader(b)
	var p ProducedMessages
	p.Schema = r.Schema()
	n := r.length(minProducedLen, "produced messages")
	if r.Err() != nil {
		return ProducedMessages{}, r.Err()
	}
	p.Messages = make([]ProducedMessage, 0, r.capHint(n, int(unsafe.Sizeof(ProducedMessage{}))))
	for i := 0; i < n; i++ {
		var m ProducedMessage
		if r.Option() {
			lo, hi := r.U128()
			m.ID, m.HasID = messageID(lo, hi), true
		}
		m.Checksum = r.optU64()
		m.Timestamp = r.optU64()
		m.OriginTimestamp = r.optU64()
		if r.Option() {
			m.Headers = r.HeaderMap()
			m.HasHeaders = true
		}
		m.Payload = r.Bytes()
		if r.Err() != nil {
			return ProducedMessages{}, r.Err()
		}
		p.Messages = append(p.Messages, m)
	}
	if r.Option() {
		p.State = r.Bytes()
		p.HasState = true
	}
	if r.Err() != nil {
		return ProducedMessages{}, r.Err()
	}
	return p, nil
}
