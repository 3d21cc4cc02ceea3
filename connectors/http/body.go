package http

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/ferryio/ferry/sdk"
)

// Bodies, as upstream's http_sink shapes them. With include_metadata each message is
//
//	{"metadata":{"iggy_id":"<32 hex>","iggy_offset":N,"iggy_timestamp":µs,"iggy_stream":"…",
//	 "iggy_topic":"…","iggy_partition_id":N[,"iggy_checksum":N][,"iggy_origin_timestamp":µs]
//	 [,"iggy_headers":{…}]},"payload":…}
//
// and without it the payload alone. A JSON payload is embedded as JSON, a text one as a
// string, anything else as {"data":"<base64>","iggy_payload_encoding":"base64"}.

// appendMessage appends msg's JSON form.
func (s *Sink) appendMessage(b []byte, t sdk.TopicMetadata, m sdk.MessagesMetadata, msg *sdk.ConsumedMessage) []byte {
	if !s.cfg.IncludeMetadata {
		return appendPayload(b, m.Schema, msg.Payload)
	}
	b = append(b, `{"metadata":{"iggy_id":"`...)
	b = append(b, msg.ID.String()...)
	b = append(b, `","iggy_offset":`...)
	b = strconv.AppendUint(b, msg.Offset, 10)
	b = append(b, `,"iggy_timestamp":`...)
	b = strconv.AppendUint(b, msg.Timestamp, 10)
	b = append(b, `,"iggy_stream":`...)
	b = appendString(b, t.Stream)
	b = append(b, `,"iggy_topic":`...)
	b = appendString(b, t.Topic)
	b = append(b, `,"iggy_partition_id":`...)
	b = strconv.AppendUint(b, uint64(m.Partition.PartitionID), 10)
	if s.cfg.IncludeChecksum {
		b = append(b, `,"iggy_checksum":`...)
		b = strconv.AppendUint(b, msg.Checksum, 10)
	}
	if s.cfg.IncludeOriginTimestamp {
		b = append(b, `,"iggy_origin_timestamp":`...)
		b = strconv.AppendUint(b, msg.OriginTimestamp, 10)
	}
	if len(msg.Headers) > 0 {
		b = append(b, `,"iggy_headers":{`...)
		for i, h := range msg.Headers {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, headerText(h.Key))
			b = append(b, ':')
			if h.Value.Kind == sdk.HeaderRaw {
				b = append(b, `{"data":"`...)
				b = base64.StdEncoding.AppendEncode(b, h.Value.Value)
				b = append(b, `","iggy_header_encoding":"base64"}`...)
			} else {
				b = appendString(b, headerText(h.Value))
			}
		}
		b = append(b, '}')
	}
	b = append(b, `},"payload":`...)
	b = appendPayload(b, m.Schema, msg.Payload)
	return append(b, '}')
}

// appendPayload appends a payload as the envelope holds it.
func appendPayload(b []byte, schema sdk.Schema, p []byte) []byte {
	switch {
	case schema == sdk.SchemaJSON && json.Valid(p):
		return append(b, p...)
	case schema == sdk.SchemaText && utf8.Valid(p):
		return appendString(b, string(p))
	}
	b = append(b, `{"data":"`...)
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, `","iggy_payload_encoding":"base64"}`...)
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// headerText is a header key's or value's text: a string as is, numbers in decimal, a
// bool as true or false, raw bytes as they are.
func headerText(f sdk.HeaderField) string {
	v := f.Value
	le := func(n int) uint64 {
		var x [8]byte
		copy(x[:], v[:min(len(v), n)])
		return binary.LittleEndian.Uint64(x[:])
	}
	switch f.Kind {
	case sdk.HeaderBool:
		return strconv.FormatBool(len(v) > 0 && v[0] != 0)
	case sdk.HeaderInt8:
		return strconv.FormatInt(int64(int8(le(1))), 10)
	case sdk.HeaderInt16:
		return strconv.FormatInt(int64(int16(le(2))), 10)
	case sdk.HeaderInt32:
		return strconv.FormatInt(int64(int32(le(4))), 10)
	case sdk.HeaderInt64:
		return strconv.FormatInt(int64(le(8)), 10)
	case sdk.HeaderUint8, sdk.HeaderUint16, sdk.HeaderUint32, sdk.HeaderUint64:
		return strconv.FormatUint(le(len(v)), 10)
	case sdk.HeaderFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(le(4)))), 'g', -1, 32)
	case sdk.HeaderFloat64:
		return strconv.FormatFloat(math.Float64frombits(le(8)), 'g', -1, 64)
	case sdk.HeaderInt128, sdk.HeaderUint128:
		be := make([]byte, len(v))
		for i := range v {
			be[len(v)-1-i] = v[i]
		}
		n := new(big.Int).SetBytes(be)
		if f.Kind == sdk.HeaderInt128 && len(v) == 16 && v[15]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 128))
		}
		return n.String()
	}
	return string(v)
}
