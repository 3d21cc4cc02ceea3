package postcard

import (
	"encoding/binary"
	"unsafe"

	"github.com/ferryio/ferry/sdk"
)

// RawMessages layout: schema, Vec<RawMessage>. RawMessage: id u128, offset u64, checksum u64,
// timestamp u64, origin_timestamp u64, headers Vec<u8> (empty = no headers, otherwise a
// complete nested header map), payload Vec<u8>.

// minRawMessageLen: 5 one-byte varints + two empty vectors.
const minRawMessageLen = 7

// AppendRawMessages appends RawMessages{schema, msgs}. A message with no headers gets an
// empty headers blob (the plugin sees None). Encoding into a buffer with enough capacity does
// not allocate once the Encoder's scratch has grown.
func (e *Encoder) AppendRawMessages(dst []byte, schema sdk.Schema, msgs []sdk.ConsumedMessage) ([]byte, error) {
	si, err := SchemaIndex(schema)
	if err != nil {
		return dst, err
	}
	for i := range msgs {
		if err := validHeaders(msgs[i].Headers); err != nil {
			return dst, err
		}
	}
	dst = AppendUvarint(dst, uint64(si))
	dst = AppendUvarint(dst, uint64(len(msgs)))
	for i := range msgs {
		m := &msgs[i]
		lo, hi := m.ID.Halves()
		dst = AppendU128(dst, lo, hi)
		dst = AppendUvarint(dst, m.Offset)
		dst = AppendUvarint(dst, m.Checksum)
		dst = AppendUvarint(dst, m.Timestamp)
		dst = AppendUvarint(dst, m.OriginTimestamp)
		if len(m.Headers) == 0 {
			dst = append(dst, 0)
		} else {
			dst = AppendUvarint(dst, uint64(e.headerMapLen(m.Headers)))
			dst = e.appendHeaderMap(dst, m.Headers)
		}
		dst = AppendBytes(dst, m.Payload)
	}
	return dst, nil
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
