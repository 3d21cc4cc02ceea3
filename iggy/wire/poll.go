package wire

// PollMessages (code 100, operation 2).
// Request: [Consumer][stream Id][topic Id][opt partition][strategy kind u8 + value u64]
// [count u32][auto_commit u8]; trailing bytes are ignored; auto_commit is any non-zero.
// Reply (not result-framed, ≥ 16 bytes when status is 0): [partition_id u32]
// [current_offset u64][messages_count u32] then stored batches in offset order, each
// walked by its batch_length. A group poll that fails the ownership fence answers an empty
// poll with partition_id ResyncPartition: the client must SyncConsumerGroup and retry.

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// ResyncPartition is the poll reply partition_id telling a group member to re-sync.
const ResyncPartition uint32 = 0xFFFFFFFF

// PollReplyHeaderSize is the size of the poll reply head (and of an empty poll).
const PollReplyHeaderSize = 16

// PollMessagesRequest is code 100.
type PollMessagesRequest struct {
	Consumer      Consumer
	Stream, Topic Identifier
	Partition     OptionalPartition
	Strategy      PollingStrategy
	Count         uint32
	AutoCommit    bool
}

// Code returns CodePollMessages.
func (PollMessagesRequest) Code() Code { return CodePollMessages }

// Append appends the encoding of the PollMessagesRequest to dst.
func (q PollMessagesRequest) Append(dst []byte) []byte {
	dst = appendOffsetTarget(dst, q.Consumer, q.Stream, q.Topic, q.Partition)
	dst = AppendPollingStrategy(dst, q.Strategy)
	dst = binary.LittleEndian.AppendUint32(dst, q.Count)
	return append(dst, b2u(q.AutoCommit))
}

// DecodePollMessagesRequest decodes code 100. Upstream answers an undecodable poll with
// an empty poll for partition 0, not an error status.
func DecodePollMessagesRequest(body []byte) (PollMessagesRequest, error) {
	r := NewReader(body)
	q := PollMessagesRequest{Consumer: r.Consumer(), Stream: r.Identifier(), Topic: r.Identifier(),
		Partition: r.OptionalPartition(), Strategy: r.PollingStrategy(), Count: r.U32(), AutoCommit: r.U8() != 0}
	return q, finishLenient(&r, "PollMessages")
}

// PollReply is the 16-byte head of a poll reply.
type PollReply struct {
	PartitionID   uint32
	CurrentOffset uint64 // the partition's last offset, 0 when empty
	MessagesCount uint32 // sum of message_count over the batches that follow
}

// Append appends the 16-byte head; a server appends the batches after it.
func (p PollReply) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, p.PartitionID)
	dst = binary.LittleEndian.AppendUint64(dst, p.CurrentOffset)
	return binary.LittleEndian.AppendUint32(dst, p.MessagesCount)
}

// Message is one polled message. Payload and RawHeaders alias the poll reply body.
type Message struct {
	ID              Uint128
	Offset          uint64 // base_offset + offset_delta
	Timestamp       uint64 // the batch's base_timestamp (append time), µs
	OriginTimestamp uint64 // the batch's origin_timestamp + timestamp_delta, µs
	Checksum        uint64 // the frame checksum
	Payload         []byte
	RawHeaders      []byte // encoded user-header block; see Headers
}

// Headers decodes m.RawHeaders, appending to dst (reuse it to avoid allocating). The
// entries alias the poll reply body.
func (m Message) Headers(dst []KV) ([]KV, error) { return DecodeKVs(m.RawHeaders, dst) }

// DecodePollReply decodes a poll reply body, appending its messages to msgs[:0] and
// returning the grown slice; it allocates nothing when msgs has capacity for them. It
// checks the layout the SDKs check (batch_length ≥ 256 and within the body, zero reserved
// bytes, frames tiling each batch, frame count = message_count, and the sum of counts =
// messages_count) but no checksums (see [VerifyPollChecksums]).
func DecodePollReply(body []byte, msgs []Message) (PollReply, []Message, error) {
	msgs = msgs[:0]
	if len(body) < PollReplyHeaderSize {
		return PollReply{}, msgs, fmt.Errorf("wire: poll reply: %w: %d bytes", ErrTruncated, len(body))
	}
	le := binary.LittleEndian
	pr := PollReply{PartitionID: le.Uint32(body), CurrentOffset: le.Uint64(body[4:]), MessagesCount: le.Uint32(body[12:])}
	if want := min(int(pr.MessagesCount), (len(body)-PollReplyHeaderSize)/FrameHeaderSize); cap(msgs) < want {
		msgs = slices.Grow(msgs, want)
	}
	total := uint64(0)
	for p := PollReplyHeaderSize; p < len(body); {
		rest := body[p:]
		if len(rest) < BatchHeaderSize {
			return pr, msgs, fmt.Errorf("wire: poll reply: batch at byte %d: %w: %d bytes left", p, ErrTruncated, len(rest))
		}
		bl := le.Uint64(rest[bhLength:])
		if bl < BatchHeaderSize || bl > uint64(len(rest)) {
			return pr, msgs, fmt.Errorf("wire: poll reply: batch at byte %d: %w: batch_length %d, %d bytes left", p, ErrBatchLength, bl, len(rest))
		}
		b := rest[:bl]
		h, err := checkLayout(b, false)
		if err != nil {
			return pr, msgs, fmt.Errorf("wire: poll reply: batch at byte %d: %w", p, err)
		}
		for q := BatchHeaderSize; q < len(b); {
			f := getFrameHeader(b[q:])
			pay := q + FrameHeaderSize
			hdr := pay + int(f.PayloadLength)
			end := hdr + int(f.HeadersLength)
			msgs = append(msgs, Message{
				ID: f.ID, Offset: h.BaseOffset + uint64(f.OffsetDelta), Timestamp: h.BaseTimestamp,
				OriginTimestamp: h.OriginTimestamp + uint64(f.TimestampDelta), Checksum: f.Checksum,
				Payload: b[pay:hdr:hdr], RawHeaders: b[hdr:end:end],
			})
			q = end
		}
		total += uint64(h.MessageCount)
		p += int(bl)
	}
	if total != uint64(pr.MessagesCount) {
		return pr, msgs, fmt.Errorf("wire: poll reply: %w: messages_count %d, batches hold %d", ErrBatchCount, pr.MessagesCount, total)
	}
	return pr, msgs, nil
}

// VerifyPollChecksums verifies the frame and batch checksums of every batch of a poll
// reply body whose layout DecodePollReply accepted.
func VerifyPollChecksums(body []byte) error {
	if len(body) < PollReplyHeaderSize {
		return fmt.Errorf("wire: poll reply: %w", ErrTruncated)
	}
	for p := PollReplyHeaderSize; p < len(body); {
		rest := body[p:]
		if len(rest) < BatchHeaderSize {
			return fmt.Errorf("wire: poll reply: batch at byte %d: %w", p, ErrTruncated)
		}
		bl := binary.LittleEndian.Uint64(rest[bhLength:])
		if bl < BatchHeaderSize || bl > uint64(len(rest)) {
			return fmt.Errorf("wire: poll reply: batch at byte %d: %w", p, ErrBatchLength)
		}
		if _, err := ValidateBatch(rest[:bl]); err != nil {
			return fmt.Errorf("wire: poll reply: batch at byte %d: %w", p, err)
		}
		p += int(bl)
	}
	return nil
}
