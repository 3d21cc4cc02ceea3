package wire

// SendMessages (code 101, operation 160, not result-framed).
// Body: [metadata_length u32][stream Id][topic Id][Partitioning][messages_count u32]
// [batch] where metadata_length covers the four fields after it and the batch runs to the
// end of the body. The server decodes the metadata (undecodable ⇒ S:20 upstream), then
// validates the batch (upstream drops a bad batch silently; ours answers a status).
// Reply: [count u32] + count × [stream u32][topic u32][partition u32][base_offset u64];
// a server must send at least the count.

import (
	"encoding/binary"
	"fmt"
)

// SendMessagesRequest is a decoded SendMessages body. Batch aliases the body (it is not
// copied): copy it before reusing the body buffer.
type SendMessagesRequest struct {
	Stream, Topic Identifier
	Partitioning  Partitioning
	MessagesCount uint32
	Batch         []byte // 256-byte batch header + frames, see AppendBatch
}

// Code returns CodeSendMessages.
func (SendMessagesRequest) Code() Code { return CodeSendMessages }

// Append appends the body with q.Batch as the batch (copied). A producer that builds the
// batch in place uses [AppendSendMessages] instead.
func (q SendMessagesRequest) Append(dst []byte) []byte {
	dst = appendSendMetadata(dst, q.Stream, q.Topic, q.Partitioning, q.MessagesCount)
	return append(dst, q.Batch...)
}

func appendSendMetadata(dst []byte, stream, topic Identifier, p Partitioning, count uint32) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendIdentifier(dst, stream)
	dst = AppendIdentifier(dst, topic)
	dst = AppendPartitioning(dst, p)
	dst = binary.LittleEndian.AppendUint32(dst, count)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// AppendSendMessages appends a whole SendMessages body: metadata, then the batch built by
// [AppendBatch] from msgs (same errors and id rule; dst is unchanged on error). With a dst
// of enough capacity it does not allocate.
func AppendSendMessages(dst []byte, stream, topic Identifier, p Partitioning, msgs []SendMessage, newID func() Uint128) ([]byte, error) {
	start := len(dst)
	dst = appendSendMetadata(dst, stream, topic, p, uint32(len(msgs)))
	out, err := AppendBatch(dst, msgs, newID)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

// DecodeSendMessagesRequest decodes the metadata section of a SendMessages body and
// returns the rest as Batch, unvalidated: call [SendMessagesRequest.Validate]. The
// metadata must decode to exactly metadata_length bytes.
func DecodeSendMessagesRequest(body []byte) (SendMessagesRequest, error) {
	r := NewReader(body)
	mlen := r.U32()
	start := r.Offset()
	q := SendMessagesRequest{Stream: r.Identifier(), Topic: r.Identifier(), Partitioning: r.Partitioning(), MessagesCount: r.U32()}
	if r.Err() == nil && uint64(r.Offset()-start) != uint64(mlen) {
		r.Failf("metadata_length %d, metadata decoded from %d bytes", mlen, r.Offset()-start)
	}
	q.Batch = r.Rest()
	if err := r.Err(); err != nil {
		return SendMessagesRequest{}, fmt.Errorf("wire: SendMessages metadata: %w", err)
	}
	return q, nil
}

// Validate applies the server's batch admission (ValidateBatch) and checks that the
// batch's message_count equals the metadata's messages_count (ErrBatchCount).
func (q SendMessagesRequest) Validate() (BatchHeader, error) {
	h, err := ValidateBatch(q.Batch)
	if err != nil {
		return h, err
	}
	if h.MessageCount != q.MessagesCount {
		return h, fmt.Errorf("%w: batch holds %d messages, metadata says %d", ErrBatchCount, h.MessageCount, q.MessagesCount)
	}
	return h, nil
}

// SendConfirmation is one entry of the SendMessages reply.
type SendConfirmation struct {
	StreamID, TopicID, PartitionID uint32
	BaseOffset                     uint64
}

// SendMessagesReply is the SendMessages reply payload.
type SendMessagesReply struct {
	Confirmations []SendConfirmation
}

// Append appends the encoding of the SendMessagesReply to dst.
func (s SendMessagesReply) Append(dst []byte) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(len(s.Confirmations)))
	for _, c := range s.Confirmations {
		dst = le.AppendUint32(dst, c.StreamID)
		dst = le.AppendUint32(dst, c.TopicID)
		dst = le.AppendUint32(dst, c.PartitionID)
		dst = le.AppendUint64(dst, c.BaseOffset)
	}
	return dst
}

// DecodeSendMessagesReply decodes a SendMessages reply payload. It accepts count 0 and,
// leniently, an empty payload (no confirmations).
func DecodeSendMessagesReply(p []byte) (SendMessagesReply, error) {
	if len(p) == 0 {
		return SendMessagesReply{}, nil
	}
	r := NewReader(p)
	var s SendMessagesReply
	if n := r.boundCount(r.U32(), 20); n > 0 {
		s.Confirmations = make([]SendConfirmation, n)
		for i := range s.Confirmations {
			s.Confirmations[i] = SendConfirmation{r.U32(), r.U32(), r.U32(), r.U64()}
		}
	}
	return s, finish(&r, "SendMessages reply")
}
