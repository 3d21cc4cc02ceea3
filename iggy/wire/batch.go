package wire

// Message batches. One layout everywhere (send body, storage, poll reply): a 256-byte
// batch header, then frames; a frame is a 48-byte frame header, the payload, then the user
// headers block. Checksums are XXH3-64: a frame's over its bytes [8, end), the batch's over
// header bytes 0..40 and 48..52 followed by every frame's 8 checksum bytes.
//
// This file holds the layouts and the producer side (AppendBatch); batch_server.go the
// server side (ValidateBatch, StampBatch, SliceBatch); poll.go the consumer side.

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// Sizes of the message layouts.
const (
	BatchHeaderSize = 256
	FrameHeaderSize = 48
	// MaxPayloadSize is the client-side payload limit (the server's is the frame limit).
	MaxPayloadSize = 64_000_000
)

// Batch header offsets.
const (
	bhPartition = 0
	bhBaseOff   = 8
	bhBaseTime  = 16
	bhOrigin    = 24
	bhLength    = 32
	bhChecksum  = 40
	bhCount     = 48
	bhReserved  = 52
)

// Frame header offsets.
const (
	fhChecksum  = 0
	fhID        = 8
	fhOffDelta  = 24
	fhTimeDelta = 28
	fhHdrLen    = 32
	fhPayLen    = 36
	fhReserved  = 40
)

// BatchHeader is the 256-byte header of a batch; bytes 52..256 are reserved zero.
type BatchHeader struct {
	PartitionID     uint64 // stamped by the server; producer sends 0
	BaseOffset      uint64 // stamped by the server: offset of the first frame
	BaseTimestamp   uint64 // stamped by the server: append time, µs
	OriginTimestamp uint64 // producer: minimum origin timestamp of the messages, µs
	Length          uint64 // 256 + frames
	Checksum        uint64
	MessageCount    uint32
}

// AppendBatchHeader appends h as 256 bytes. It does not compute the checksum.
func AppendBatchHeader(dst []byte, h BatchHeader) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	putBatchHeader(dst[start:], h)
	return dst
}

func putBatchHeader(b []byte, h BatchHeader) {
	le := binary.LittleEndian
	le.PutUint64(b[bhPartition:], h.PartitionID)
	le.PutUint64(b[bhBaseOff:], h.BaseOffset)
	le.PutUint64(b[bhBaseTime:], h.BaseTimestamp)
	le.PutUint64(b[bhOrigin:], h.OriginTimestamp)
	le.PutUint64(b[bhLength:], h.Length)
	le.PutUint64(b[bhChecksum:], h.Checksum)
	le.PutUint32(b[bhCount:], h.MessageCount)
	clear(b[bhReserved:BatchHeaderSize])
}

// DecodeBatchHeader decodes the first 256 bytes of b (ErrTruncated if shorter). It does
// not check the reserved bytes; [ValidateBatch] does.
func DecodeBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: batch header has %d bytes", ErrTruncated, len(b))
	}
	return getBatchHeader(b), nil
}

func getBatchHeader(b []byte) BatchHeader {
	le := binary.LittleEndian
	return BatchHeader{
		PartitionID: le.Uint64(b[bhPartition:]), BaseOffset: le.Uint64(b[bhBaseOff:]),
		BaseTimestamp: le.Uint64(b[bhBaseTime:]), OriginTimestamp: le.Uint64(b[bhOrigin:]),
		Length: le.Uint64(b[bhLength:]), Checksum: le.Uint64(b[bhChecksum:]),
		MessageCount: le.Uint32(b[bhCount:]),
	}
}

// FrameHeader is the 48-byte header of one message frame; bytes 40..48 are
// reserved zero.
type FrameHeader struct {
	Checksum       uint64 // XXH3-64 over frame bytes [8, end)
	ID             Uint128
	OffsetDelta    uint32 // index in the producer's batch; offset = base_offset + delta
	TimestampDelta uint32 // µs after the batch origin_timestamp
	HeadersLength  uint32
	PayloadLength  uint32
}

// Size returns the frame's total size: header, payload and user headers.
func (f FrameHeader) Size() int {
	return FrameHeaderSize + int(f.PayloadLength) + int(f.HeadersLength)
}

// DecodeFrameHeader decodes the first 48 bytes of b (ErrTruncated if shorter).
func DecodeFrameHeader(b []byte) (FrameHeader, error) {
	if len(b) < FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: frame header has %d bytes", ErrTruncated, len(b))
	}
	return getFrameHeader(b), nil
}

func getFrameHeader(b []byte) FrameHeader {
	le := binary.LittleEndian
	return FrameHeader{
		Checksum: le.Uint64(b[fhChecksum:]), ID: getUint128(b[fhID:]),
		OffsetDelta: le.Uint32(b[fhOffDelta:]), TimestampDelta: le.Uint32(b[fhTimeDelta:]),
		HeadersLength: le.Uint32(b[fhHdrLen:]), PayloadLength: le.Uint32(b[fhPayLen:]),
	}
}

// AppendFrameHeader appends f as 48 bytes (it does not compute the checksum).
func AppendFrameHeader(dst []byte, f FrameHeader) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, f.Checksum)
	dst = AppendUint128(dst, f.ID)
	dst = le.AppendUint32(dst, f.OffsetDelta)
	dst = le.AppendUint32(dst, f.TimestampDelta)
	dst = le.AppendUint32(dst, f.HeadersLength)
	dst = le.AppendUint32(dst, f.PayloadLength)
	return le.AppendUint64(dst, 0)
}

// SendMessage is one message for [AppendBatch].
type SendMessage struct {
	// ID is the message id; 0 means "generate one" (see AppendBatch).
	ID Uint128
	// OriginTimestamp is the producer's timestamp in µs (SDKs use the send time).
	OriginTimestamp uint64
	// Payload must be 1..MaxPayloadSize bytes.
	Payload []byte
	// Headers is an encoded user-header block ([AppendKVs]), or nil.
	Headers []byte
}

// Producer-side errors of AppendBatch.
var (
	// ErrNoMessages: a batch must hold at least one message.
	ErrNoMessages = fmt.Errorf("wire: batch without messages: %w", ErrInvalidCommand)
	// ErrPayloadSize: a payload is empty or larger than MaxPayloadSize.
	ErrPayloadSize = fmt.Errorf("wire: message payload size: %w", ErrInvalidCommand)
	// ErrHeadersSize: a user-header block is larger than MaxUserHeadersBytes.
	ErrHeadersSize = fmt.Errorf("wire: user headers size: %w", ErrInvalidCommand)
	// ErrZeroMessageID: a message has ID 0 and AppendBatch was given no id generator.
	ErrZeroMessageID = fmt.Errorf("wire: message id is 0: %w", ErrInvalidCommand)
)

// AppendBatch appends a producer batch of msgs to dst: a header with partition_id,
// base_offset and base_timestamp 0, origin_timestamp the minimum of the messages' origin
// timestamps, then one frame per message with offset_delta 0..n-1, every checksum set.
//
// A message whose ID is 0 gets newID() (which must not return 0) before hashing, and the
// id is written back to msgs[i].ID so the caller knows it; with newID nil such a message
// is an error (ErrZeroMessageID). The caller owns randomness: the package holds no RNG.
//
// Errors (dst is then returned unchanged): ErrNoMessages, ErrPayloadSize, ErrHeadersSize,
// ErrZeroMessageID, and ErrInvalidMessageTimestampDelta (4038) when a message's origin
// timestamp is more than 2^32-1 µs after the minimum. With a dst of enough capacity it
// does not allocate.
func AppendBatch(dst []byte, msgs []SendMessage, newID func() Uint128) ([]byte, error) {
	if len(msgs) == 0 {
		return dst, ErrNoMessages
	}
	origin := msgs[0].OriginTimestamp
	size := BatchHeaderSize
	for i := range msgs {
		m := &msgs[i]
		origin = min(origin, m.OriginTimestamp)
		if len(m.Payload) == 0 || len(m.Payload) > MaxPayloadSize {
			return dst, fmt.Errorf("message %d: %d bytes: %w", i, len(m.Payload), ErrPayloadSize)
		}
		if len(m.Headers) > MaxUserHeadersBytes {
			return dst, fmt.Errorf("message %d: %d bytes: %w", i, len(m.Headers), ErrHeadersSize)
		}
		size += FrameHeaderSize + len(m.Payload) + len(m.Headers)
	}
	for i := range msgs {
		if d := msgs[i].OriginTimestamp - origin; d > 0xFFFFFFFF {
			return dst, fmt.Errorf("wire: message %d origin timestamp %d µs after the batch's: %w",
				i, d, ErrInvalidMessageTimestampDelta)
		}
		if msgs[i].ID.IsZero() {
			if newID == nil {
				return dst, fmt.Errorf("message %d: %w", i, ErrZeroMessageID)
			}
			if msgs[i].ID = newID(); msgs[i].ID.IsZero() {
				return dst, fmt.Errorf("message %d: generator returned 0: %w", i, ErrZeroMessageID)
			}
		}
	}
	start := len(dst)
	dst = append(dst, make([]byte, size)...) // does not allocate when cap suffices
	b := dst[start:]
	putBatchHeader(b, BatchHeader{OriginTimestamp: origin, Length: uint64(size), MessageCount: uint32(len(msgs))})
	le := binary.LittleEndian
	p := BatchHeaderSize
	for i := range msgs {
		m := &msgs[i]
		f := b[p : p+FrameHeaderSize+len(m.Payload)+len(m.Headers)]
		putUint128(f[fhID:], m.ID)
		le.PutUint32(f[fhOffDelta:], uint32(i))
		le.PutUint32(f[fhTimeDelta:], uint32(m.OriginTimestamp-origin))
		le.PutUint32(f[fhHdrLen:], uint32(len(m.Headers)))
		le.PutUint32(f[fhPayLen:], uint32(len(m.Payload)))
		le.PutUint64(f[fhReserved:], 0)
		copy(f[FrameHeaderSize:], m.Payload)
		copy(f[FrameHeaderSize+len(m.Payload):], m.Headers)
		le.PutUint64(f[fhChecksum:], xxh3.Hash(f[8:]))
		p += len(f)
	}
	le.PutUint64(b[bhChecksum:], batchChecksum(b))
	return dst, nil
}

// batchChecksum computes the batch checksum of a batch whose frames tile b exactly (the
// caller has checked the layout).
func batchChecksum(b []byte) uint64 {
	var h xxh3.Hasher
	_, _ = h.Write(b[:bhChecksum])
	_, _ = h.Write(b[bhCount:bhReserved])
	le := binary.LittleEndian
	for p := BatchHeaderSize; p+FrameHeaderSize <= len(b); {
		_, _ = h.Write(b[p : p+8])
		p += FrameHeaderSize + int(le.Uint32(b[p+fhPayLen:])) + int(le.Uint32(b[p+fhHdrLen:]))
	}
	return h.Sum64()
}
