package s3

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"time"
	"unsafe"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connectors/internal/parquetrows"
	"github.com/ferryio/ferry/sdk"
)

// buffer holds one partition's messages not yet uploaded, already in the object's shape:
// the formatted entries for the JSON and raw formats, rows for parquet. Payloads are
// copied (the runtime reuses its buffers after Consume returns).
type buffer struct {
	data    []byte // json_lines, json_array (without the closing bracket), raw
	rows    []row  // parquet
	count   uint64
	size    uint64 // bytes held, counted for max_buffered_bytes (a streamed object's unsent part)
	total   uint64 // the object's bytes counted for rotation, held or already sent
	first   uint64
	last    uint64
	firstTS uint64
	lastTS  uint64 // the timestamp of the message at last
	schema  sdk.Schema
	scratch bytes.Buffer
	enc     *json.Encoder
	// The stream and topic as JSON strings, quoted once (names and their quoted forms).
	stream, topic   string
	qStream, qTopic []byte
	arena           arena // parquet: the rows' payloads and ids
}

// arena holds many rows' bytes in few allocations: one per arenaChunk bytes instead of two
// per row. A slice it returns is never written again and lives while any row uses it.
type arena struct{ chunk []byte }

const arenaChunk = 1 << 20

// copy returns a copy of b inside the arena.
func (a *arena) copy(b []byte) []byte {
	if len(b) > arenaChunk/4 {
		return bytes.Clone(b)
	}
	if cap(a.chunk)-len(a.chunk) < len(b) {
		a.chunk = make([]byte, 0, arenaChunk)
	}
	n := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[n:len(a.chunk):len(a.chunk)]
}

// hexID returns id as 32 hex digits (big-endian, as sdk.MessageID.String) inside the arena.
func (a *arena) hexID(id sdk.MessageID) string {
	var be [16]byte
	for i := range id {
		be[15-i] = id[i]
	}
	var h [32]byte
	hex.Encode(h[:], be[:])
	b := a.copy(h[:])
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// row is one parquet row; payload is written as a string column unless the stream is raw.
type row struct {
	stream, topic   string
	partition       uint32
	offset          uint64
	id              string
	timestamp       int64
	originTimestamp int64
	headers         map[string]string
	payload         []byte
	extra           []any // pointers to the typed columns' values (nil: null), in plugin_config order
}

// text is the payload as a string without a copy: the row's payload is never written
// after it is buffered.
func (r *row) text() string { return unsafe.String(unsafe.SliceData(r.payload), len(r.payload)) }

// bytes is what a row counts for in the buffer: its payload and headers, and 64 bytes of
// metadata.
func (r *row) bytes() int {
	n := len(r.payload) + 64
	for k, v := range r.headers {
		n += len(k) + len(v)
	}
	return n
}

func (b *buffer) empty() bool { return b.count == 0 }

func (b *buffer) reset() {
	clear(b.rows) // dropped (an uploaded object took its rows along): the slice is reused
	b.data, b.rows = b.data[:0], b.rows[:0]
	b.arena = arena{} // the rows uploaded may still be read by an encoder: never reused
	b.count, b.size, b.total, b.first, b.last, b.firstTS, b.lastTS = 0, 0, 0, 0, 0, 0, 0
}

// add appends one message; it returns the bytes the buffer grew by. It refuses a message
// whose typed columns cannot be filled (nothing is appended then).
func (b *buffer) add(s *config, topic sdk.TopicMetadata, p sdk.Partition, schema sdk.Schema, m *sdk.ConsumedMessage) (uint64, error) {
	var extra []any
	if len(s.Columns) > 0 {
		var err error
		if extra, err = parquetrows.Extract(s.Columns, m.Payload); err != nil {
			return 0, err
		}
	}
	if b.count == 0 {
		b.first, b.firstTS, b.schema = m.Offset, m.Timestamp, schema
	}
	b.last, b.lastTS = m.Offset, m.Timestamp
	b.count++
	var grew uint64
	switch s.Format {
	case formatParquet:
		r := row{
			stream: topic.Stream, topic: topic.Topic, partition: p.PartitionID, offset: m.Offset,
			id: b.arena.hexID(m.ID), timestamp: int64(m.Timestamp), originTimestamp: int64(m.OriginTimestamp),
			payload: b.arena.copy(m.Payload), extra: extra,
		}
		if len(m.Headers) > 0 {
			r.headers = make(map[string]string, len(m.Headers))
			for _, h := range m.Headers {
				r.headers[headerKey(h.Key)] = headerText(h.Value)
				grew += uint64(len(h.Key.Value) + len(h.Value.Value))
			}
		}
		b.rows = append(b.rows, r)
		grew += uint64(len(m.Payload)) + 64
	case formatRaw:
		b.data = append(b.data, m.Payload...)
		grew = uint64(len(m.Payload))
	default:
		before := len(b.data)
		if s.Format == formatJSONArray {
			if b.count == 1 {
				b.data = append(b.data, '[')
			} else {
				b.data = append(b.data, ',')
			}
		}
		b.data = b.appendRecord(b.data, s, topic, p, schema, m)
		if s.Format == formatJSONLines {
			b.data = append(b.data, '\n')
		}
		grew = uint64(len(b.data) - before)
	}
	b.size += grew
	b.total += grew
	return grew, nil
}

// appendRecord appends m as upstream's JSON object, its fields in upstream's order.
func (b *buffer) appendRecord(dst []byte, s *config, topic sdk.TopicMetadata, p sdk.Partition, schema sdk.Schema, m *sdk.ConsumedMessage) []byte {
	dst = append(dst, '{')
	if s.IncludeMetadata {
		dst = append(dst, `"offset":`...)
		dst = strconv.AppendUint(dst, m.Offset, 10)
		dst = append(dst, `,"timestamp":"`...)
		dst = time.UnixMicro(int64(m.Timestamp)).UTC().AppendFormat(dst, time.RFC3339)
		if b.qStream == nil || b.stream != topic.Stream || b.topic != topic.Topic {
			b.stream, b.topic = topic.Stream, topic.Topic
			b.qStream, b.qTopic = b.appendString(nil, topic.Stream), b.appendString(nil, topic.Topic)
		}
		dst = append(dst, `","stream":`...)
		dst = append(dst, b.qStream...)
		dst = append(dst, `,"topic":`...)
		dst = append(dst, b.qTopic...)
		dst = append(dst, `,"partition_id":`...)
		dst = strconv.AppendUint(dst, uint64(p.PartitionID), 10)
		dst = append(dst, ',')
	}
	if s.IncludeHeaders && len(m.Headers) > 0 {
		h := make(map[string]any, len(m.Headers))
		for _, e := range m.Headers {
			h[headerKey(e.Key)] = headerJSON(e.Value)
		}
		dst = append(dst, `"headers":`...)
		dst = b.appendJSON(dst, h)
		dst = append(dst, ',')
	}
	dst = append(dst, `"payload":`...)
	// fastjson's validator: encoding/json's was an eighth of the sink's time.
	if schema != sdk.SchemaText && fastjson.ValidateBytes(m.Payload) == nil {
		dst = append(dst, m.Payload...)
	} else if schema == sdk.SchemaText {
		dst = b.appendString(dst, string(m.Payload))
	} else {
		dst = b.appendString(dst, base64.StdEncoding.EncodeToString(m.Payload))
	}
	return append(dst, '}')
}

// appendString appends v as a JSON string (no HTML escaping).
func (b *buffer) appendString(dst []byte, v string) []byte { return b.appendJSON(dst, v) }

// appendJSON appends v encoded as JSON without HTML escaping; v is plain data (strings,
// bools, json.Number, maps of them), which always encodes.
func (b *buffer) appendJSON(dst []byte, v any) []byte {
	if b.enc == nil {
		b.enc = json.NewEncoder(&b.scratch)
		b.enc.SetEscapeHTML(false)
	}
	b.scratch.Reset()
	_ = b.enc.Encode(v)
	return append(dst, bytes.TrimSuffix(b.scratch.Bytes(), []byte("\n"))...)
}

// finish returns the object's bytes for the JSON and raw formats; the buffer is unchanged
// (the closing bracket of json_array goes past its length), so a failed upload can be
// retried and more messages appended.
func (b *buffer) finish(s *config) []byte {
	if s.Format == formatJSONArray {
		return append(b.data, ']')
	}
	return b.data
}

// headerKey is a header key as text: a string key as is, any other kind as headerText.
func headerKey(f sdk.HeaderField) string { return headerText(f) }

// headerJSON is a header value as upstream writes it: strings and numbers as themselves,
// bools as bools, raw bytes in base64, 128-bit integers as decimal strings.
func headerJSON(f sdk.HeaderField) any {
	switch f.Kind {
	case sdk.HeaderString:
		return string(f.Value)
	case sdk.HeaderBool:
		return len(f.Value) > 0 && f.Value[0] != 0
	case sdk.HeaderInt8, sdk.HeaderInt16, sdk.HeaderInt32, sdk.HeaderInt64,
		sdk.HeaderUint8, sdk.HeaderUint16, sdk.HeaderUint32, sdk.HeaderUint64,
		sdk.HeaderFloat32, sdk.HeaderFloat64:
		t := headerText(f)
		if v, err := strconv.ParseFloat(t, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return json.Number(t)
		}
		return t // malformed (base64), NaN or infinite: JSON has no number for it
	}
	return headerText(f)
}

// headerText is a header value as text: strings as is, numbers in decimal, bools as
// true/false, raw bytes (and anything malformed) in base64.
func headerText(f sdk.HeaderField) string {
	v := f.Value
	le := binary.LittleEndian
	switch {
	case f.Kind == sdk.HeaderString:
		return string(v)
	case f.Kind == sdk.HeaderBool && len(v) == 1:
		return strconv.FormatBool(v[0] != 0)
	case f.Kind == sdk.HeaderInt8 && len(v) == 1:
		return strconv.FormatInt(int64(int8(v[0])), 10)
	case f.Kind == sdk.HeaderInt16 && len(v) == 2:
		return strconv.FormatInt(int64(int16(le.Uint16(v))), 10)
	case f.Kind == sdk.HeaderInt32 && len(v) == 4:
		return strconv.FormatInt(int64(int32(le.Uint32(v))), 10)
	case f.Kind == sdk.HeaderInt64 && len(v) == 8:
		return strconv.FormatInt(int64(le.Uint64(v)), 10)
	case f.Kind == sdk.HeaderUint8 && len(v) == 1:
		return strconv.FormatUint(uint64(v[0]), 10)
	case f.Kind == sdk.HeaderUint16 && len(v) == 2:
		return strconv.FormatUint(uint64(le.Uint16(v)), 10)
	case f.Kind == sdk.HeaderUint32 && len(v) == 4:
		return strconv.FormatUint(uint64(le.Uint32(v)), 10)
	case f.Kind == sdk.HeaderUint64 && len(v) == 8:
		return strconv.FormatUint(le.Uint64(v), 10)
	case (f.Kind == sdk.HeaderInt128 || f.Kind == sdk.HeaderUint128) && len(v) == 16:
		be := make([]byte, 16)
		for i := range v {
			be[15-i] = v[i]
		}
		n := new(big.Int).SetBytes(be)
		if f.Kind == sdk.HeaderInt128 && v[15]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 128))
		}
		return n.String()
	case f.Kind == sdk.HeaderFloat32 && len(v) == 4:
		return strconv.FormatFloat(float64(math.Float32frombits(le.Uint32(v))), 'g', -1, 32)
	case f.Kind == sdk.HeaderFloat64 && len(v) == 8:
		return strconv.FormatFloat(math.Float64frombits(le.Uint64(v)), 'g', -1, 64)
	}
	return base64.StdEncoding.EncodeToString(v)
}
