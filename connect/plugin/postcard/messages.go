package postcard

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/ferryio/ferry/sdk"
)

// RawMessages layout: schema, Vec<RawMessage>. RawMessage: id u128, offset u64, checksum u64,
// timestamp u64, origin_timestamp u64, headers Vec<u8> (empty = no headers, otherwise a
// complete nested header map), payload Vec<u8>.

// minRawMessageLen: 5 one-byte varints + two empty vectors.
const minRawMessageLen = 7

// AppendRawMessages appends RawMessages{schema, msgs}. A message with no headers gets an
// empty headers blob (the plugin sees None). It bounds the encoded size first, grows dst once
// and writes in place, so encoding into a buffer with enough capacity does not allocate once
// the Encoder's scratch has grown. On error dst is returned unchanged.
func (e *Encoder) AppendRawMessages(dst []byte, schema sdk.Schema, msgs []sdk.ConsumedMessage) ([]byte, error) {
	si, err := SchemaIndex(schema)
	if err != nil {
		return dst, err
	}
	size := 2*maxU64Len + putSlack // schema, count
	for i := range msgs {
		m := &msgs[i]
		// id, offset, checksum, timestamp, origin_timestamp, payload length, payload
		size += maxU128Len + 5*maxU64Len + len(m.Payload)
		if len(m.Headers) == 0 {
			size++
			continue
		}
		if err := validHeaders(m.Headers); err != nil {
			return dst, err
		}
		size += headerBlobBound(m.Headers)
	}
	b := slices.Grow(dst, size)
	b = b[:cap(b)]
	j := putUvarint(b, len(dst), uint64(si))
	j = putUvarint(b, j, uint64(len(msgs)))
	for i := range msgs {
		m := &msgs[i]
		lo, hi := m.ID.Halves()
		j = putU128(b, j, lo, hi)
		j = putUvarint(b, j, m.Offset)
		j = putUvarint(b, j, m.Checksum)
		j = putUvarint(b, j, m.Timestamp)
		j = putUvarint(b, j, m.OriginTimestamp)
		if len(m.Headers) == 0 {
			b[j] = 0
			j++
		} else {
			// Fits in the room sized above; were it ever not to, append reallocates and
			// copies (a later put would then panic on bounds, never write out of place).
			hb := e.appendHeaderBlob(b[:j], m.Headers)
			b, j = hb[:cap(hb)], len(hb)
		}
		j = putUvarint(b, j, uint64(len(m.Payload)))
		j += copy(b[j:], m.Payload)
	}
	return b[:j], nil
}

func messageID(lo, hi uint64) sdk.MessageID {
	var id sdk.MessageID
	binary.LittleEndian.PutUint64(id[:8], lo)
	binary.LittleEndian.PutUint64(id[8:], hi)
	return id
}

// DecodeRawMessages decodes a RawMessages buffer. A non-empty headers blob is decoded as a
// header map (bytes after the map inside the blob are ignored); an empty blob gives nil
// Headers, an encoded empty map a non-nil empty slice. Payloads are copies.
func DecodeRawMessages(b []byte) (sdk.Schema, []sdk.ConsumedMessage, error) {
	r := NewReader(b)
	schema := r.Schema()
	n := r.length(minRawMessageLen, "raw messages")
	if r.Err() != nil {
		return "", nil, r.Err()
	}
	msgs := make([]sdk.ConsumedMessage, 0, r.capHint(n, int(unsafe.Sizeof(sdk.ConsumedMessage{}))))
	for i := 0; i < n; i++ {
		var m sdk.ConsumedMessage
		lo, hi := r.U128()
		m.ID = messageID(lo, hi)
		m.Offset = r.U64()
		m.Checksum = r.U64()
		m.Timestamp = r.U64()
		m.OriginTimestamp = r.U64()
		blob := r.rawBytes("headers blob")
		if r.Err() == nil && len(blob) > 0 {
			hr := NewReader(blob)
			m.Headers = hr.HeaderMap()
			if hr.Err() != nil {
				r.fail(hr.Err(), "headers blob")
			}
		}
		m.Payload = r.Bytes()
		if r.Err() != nil {
			return "", nil, r.Err()
		}
		msgs = append(msgs, m)
	}
	return schema, msgs, nil
}
