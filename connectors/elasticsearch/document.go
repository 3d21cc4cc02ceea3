package elasticsearch

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"strconv"

	"github.com/ferryio/ferry/sdk"
)

// document is one message as upstream's document shape: the payload as the document
// (JSON of a json, proto or flat_buffer stream, compacted onto one line; a raw or avro
// payload that parses as JSON likewise), {"text": …, "data_type": "text"} for a text
// stream, {"data": base64, "data_type": "raw"} for raw bytes that are not JSON; to an
// object it adds _iggy_offset, _iggy_stream, _iggy_topic, _iggy_partition,
// _iggy_timestamp (the message's timestamp, ms: the same document whenever it is indexed
// again) and _iggy_headers ({key: value}, when the message has headers). JSON that is not
// an object (an array, a number) is sent as it is, as upstream does: the cluster refuses
// it, and that message alone goes to on_failure.
func document(schema sdk.Schema, t sdk.TopicMetadata, part uint32, msg *sdk.ConsumedMessage) []byte {
	var b bytes.Buffer
	b.Grow(len(msg.Payload) + 160)
	switch {
	case schema == sdk.SchemaText:
		b.WriteString(`{"text":`)
		b.Write(jsonString(string(msg.Payload)))
		b.WriteString(`,"data_type":"text"}`)
	case json.Compact(&b, msg.Payload) != nil:
		b.Reset()
		b.WriteString(`{"data":"`)
		b.WriteString(base64.StdEncoding.EncodeToString(msg.Payload))
		b.WriteString(`","data_type":"raw"}`)
	}
	out := b.Bytes()
	if len(out) < 2 || out[0] != '{' {
		return out // not an object: nothing added
	}
	if bytes.Contains(out, []byte(`"_iggy_`)) {
		// The payload may name a metadata field itself: the metadata wins, as upstream,
		// and the document keeps one field of each name (the cluster refuses duplicates).
		if d, ok := dropMetadata(out); ok {
			out = d
		}
	}
	out = out[:len(out)-1] // the closing brace
	if len(out) > 1 {
		out = append(out, ',')
	}
	out = append(out, `"_iggy_offset":`...)
	out = strconv.AppendUint(out, msg.Offset, 10)
	out = append(out, `,"_iggy_stream":`...)
	out = append(out, jsonString(t.Stream)...)
	out = append(out, `,"_iggy_topic":`...)
	out = append(out, jsonString(t.Topic)...)
	out = append(out, `,"_iggy_partition":`...)
	out = strconv.AppendUint(out, uint64(part), 10)
	out = append(out, `,"_iggy_timestamp":`...)
	out = strconv.AppendUint(out, msg.Timestamp/1000, 10)
	if len(msg.Headers) > 0 {
		h := make(map[string]any, len(msg.Headers))
		for _, e := range msg.Headers {
			h[headerKey(e.Key)] = headerValue(e.Value)
		}
		if hj, err := json.Marshal(h); err == nil { // strings, finite numbers and booleans
			out = append(out, `,"_iggy_headers":`...)
			out = append(out, hj...)
		}
	}
	return append(out, '}')
}

// dropMetadata removes the object's own _iggy_* fields (compact JSON in, compact out).
func dropMetadata(obj []byte) ([]byte, bool) {
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	var m map[string]json.RawMessage
	if d.Decode(&m) != nil {
		return nil, false
	}
	for _, k := range []string{"_iggy_offset", "_iggy_stream", "_iggy_topic", "_iggy_partition", "_iggy_timestamp", "_iggy_headers"} {
		delete(m, k)
	}
	out, err := json.Marshal(m)
	return out, err == nil
}

func jsonString(s string) []byte {
	q, _ := json.Marshal(s)
	return q
}

// headerKey is a header key as a JSON object key: its text (a key of another kind, rare,
// as the text of its value).
func headerKey(f sdk.HeaderField) string {
	switch v := headerValue(f).(type) {
	case string:
		return v
	default:
		j, _ := json.Marshal(v)
		return string(j)
	}
}

// headerValue is a header value as JSON: a string, a number, a boolean; raw bytes as
// base64, 128-bit integers as decimal strings (beyond a JSON number's safe range).
func headerValue(f sdk.HeaderField) any {
	v := f.Value
	le := func(n int) (uint64, bool) {
		if len(v) != n {
			return 0, false
		}
		var b [8]byte
		copy(b[:], v)
		return binary.LittleEndian.Uint64(b[:]), true
	}
	switch f.Kind {
	case sdk.HeaderString:
		return string(v)
	case sdk.HeaderBool:
		if len(v) == 1 {
			return v[0] != 0
		}
	case sdk.HeaderInt8, sdk.HeaderInt16, sdk.HeaderInt32, sdk.HeaderInt64:
		n := map[sdk.HeaderKind]int{sdk.HeaderInt8: 1, sdk.HeaderInt16: 2, sdk.HeaderInt32: 4, sdk.HeaderInt64: 8}[f.Kind]
		if u, ok := le(n); ok {
			shift := uint(64 - 8*n)
			return int64(u<<shift) >> shift // sign-extended
		}
	case sdk.HeaderUint8, sdk.HeaderUint16, sdk.HeaderUint32, sdk.HeaderUint64:
		n := map[sdk.HeaderKind]int{sdk.HeaderUint8: 1, sdk.HeaderUint16: 2, sdk.HeaderUint32: 4, sdk.HeaderUint64: 8}[f.Kind]
		if u, ok := le(n); ok {
			return u
		}
	case sdk.HeaderFloat32:
		if u, ok := le(4); ok {
			return finite(float64(math.Float32frombits(uint32(u))))
		}
	case sdk.HeaderFloat64:
		if u, ok := le(8); ok {
			return finite(math.Float64frombits(u))
		}
	case sdk.HeaderInt128, sdk.HeaderUint128:
		if len(v) == 16 {
			be := make([]byte, 16)
			for i := range v {
				be[15-i] = v[i]
			}
			n := new(big.Int).SetBytes(be)
			if f.Kind == sdk.HeaderInt128 && v[15]&0x80 != 0 {
				n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 128))
			}
			return n.String()
		}
	}
	return base64.StdEncoding.EncodeToString(v) // raw, or a value of the wrong width
}

// finite is x, or its text when JSON has no number for it (NaN, ±Inf).
func finite(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return x
}
