package iggy

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Message is one message to send.
type Message struct {
	// ID is the message id; all zero ⇒ a random id is assigned before hashing.
	ID [16]byte
	// Headers are typed user headers (keys and values 1..255 bytes).
	Headers []wire.KV
	// Payload is 1..wire.MaxPayloadSize bytes.
	Payload []byte
	// OriginTimestamp is the producer's time in µs since the epoch; 0 ⇒ now.
	OriginTimestamp uint64
	// Key, when not empty, picks the partition a Producer sends the message to
	// (XXH32(Key) % partitions, client-side), before KeyFunc and Partitioning. It is not
	// sent.
	Key []byte
	// Partition, when not nil, picks the partition a Producer sends the message to by its
	// index in Producer.Partitions (modulo their count), before Key, KeyFunc and
	// Partitioning. It is not sent.
	Partition *uint32
}

// size is the message's encoded frame size.
func (m *Message) size() int {
	return wire.FrameHeaderSize + len(m.Payload) + wire.KVsSize(m.Headers)
}

// Partitioning says where SendMessages puts a batch: wire.Balanced(),
// wire.ToPartition(n), wire.ByKey(b).
type Partitioning = wire.Partitioning

// SendResult is the server's confirmation of one SendMessages: the partition the batch
// went to, the offset of its first message, and the number of messages.
type SendResult struct {
	Partition  uint32
	BaseOffset uint64
	Count      int
}

// sendOverhead bounds the header, metadata and batch header of a SendMessages frame.
const sendOverhead = wire.HeaderSize + 4 + 2*257 + 257 + 4 + wire.BatchHeaderSize

// sendScratch holds the per-call buffers of SendMessages.
type sendScratch struct {
	frame []byte
	body  []byte
	msgs  []wire.SendMessage
	hdrs  []byte
}

var sendPool = sync.Pool{New: func() any { return &sendScratch{} }}

func newMessageID() wire.Uint128 {
	for {
		id := wire.Uint128{Lo: rand.Uint64(), Hi: rand.Uint64()}
		if !id.IsZero() {
			return id
		}
	}
}

// SendMessages appends msgs to a topic as one batch and returns after the server
// confirmed it. Balanced and key partitioning are resolved by the server (the Producer
// resolves them client-side). Checked before sending: payload sizes (wire.ErrPayloadSize),
// header sizes, and the frame limit (ErrTooLarge). Not retried when the outcome is
// unknown (ErrOutcomeUnknown): sending again may duplicate the batch. Safe for concurrent
// use; msgs is not modified.
func (c *Client) SendMessages(ctx context.Context, stream, topic Identifier, p Partitioning, msgs []Message) (SendResult, error) {
	part := int64(-1)
	if p.Kind == wire.PartitioningPartitionID {
		part = int64(p.PartitionID)
	}
	r, err := c.send(ctx, nil, stream, topic, p, msgs)
	if err != nil {
		return SendResult{}, opErr("send", res(&stream, &topic, part), err)
	}
	return r, nil
}

func (c *Client) send(ctx context.Context, l *link, stream, topic Identifier, p Partitioning, msgs []Message) (SendResult, error) {
	if c.isClosed() {
		return SendResult{}, ErrClosed
	}
	if len(msgs) == 0 {
		return SendResult{}, wire.ErrNoMessages
	}
	total, hdrBytes := sendOverhead, 0
	for i := range msgs {
		hs := wire.KVsSize(msgs[i].Headers)
		if n := sendOverhead + wire.FrameHeaderSize + len(msgs[i].Payload) + hs; n > c.cfg.maxFrame {
			return SendResult{}, fmt.Errorf("message %d of %d bytes: %w (%d bytes)", i, n-sendOverhead, ErrTooLarge, c.cfg.maxFrame)
		}
		total += wire.FrameHeaderSize + len(msgs[i].Payload) + hs
		hdrBytes += hs
	}
	if total > c.cfg.maxFrame {
		return SendResult{}, fmt.Errorf("batch of %d messages, %d bytes: %w (%d bytes)", len(msgs), total, ErrTooLarge, c.cfg.maxFrame)
	}
	s := sendPool.Get().(*sendScratch)
	defer sendPool.Put(s)
	if cap(s.hdrs) < hdrBytes {
		s.hdrs = make([]byte, 0, hdrBytes)
	}
	s.hdrs = s.hdrs[:0]
	s.msgs = s.msgs[:0]
	now := uint64(time.Now().UnixMicro())
	for i := range msgs {
		m := &msgs[i]
		sm := wire.SendMessage{
			ID:              wire.Uint128{Lo: binary.LittleEndian.Uint64(m.ID[:8]), Hi: binary.LittleEndian.Uint64(m.ID[8:])},
			OriginTimestamp: m.OriginTimestamp,
			Payload:         m.Payload,
		}
		if sm.OriginTimestamp == 0 {
			sm.OriginTimestamp = now
		}
		if len(m.Headers) > 0 {
			start := len(s.hdrs)
			s.hdrs = wire.AppendKVs(s.hdrs, m.Headers)
			sm.Headers = s.hdrs[start:len(s.hdrs):len(s.hdrs)]
		}
		s.msgs = append(s.msgs, sm)
	}
	frame, err := wire.AppendSendMessages(append(s.frame[:0], zeroHeader[:]...), stream, topic, p, s.msgs, newMessageID)
	clear(s.msgs) // drop references to the caller's payloads
	if err != nil {
		return SendResult{}, err
	}
	s.frame = frame
	if l == nil {
		l = c.pick()
	}
	r := l.roundTrip(ctx, wire.CodeSendMessages, frame, s.body, false)
	s.body = r.body[:0]
	if r.abandoned {
		s.frame = nil // the conn kept it
	}
	if r.err != nil {
		return SendResult{}, r.err
	}
	rep, err := wire.DecodeSendMessagesReply(r.payload)
	if err != nil {
		return SendResult{}, decodeErr(err)
	}
	out := SendResult{Count: len(msgs), Partition: p.PartitionID}
	if len(rep.Confirmations) > 0 {
		out.Partition, out.BaseOffset = rep.Confirmations[0].PartitionID, rep.Confirmations[0].BaseOffset
	}
	return out, nil
}

// PollRequest is one PollMessages call.
type PollRequest struct {
	// Consumer is wire.Consumer{Kind: wire.ConsumerSingle, ID: …} or a group
	// (wire.ConsumerGroup; then Partition must be set and owned by this Client).
	Consumer      wire.Consumer
	Stream, Topic Identifier
	Partition     *uint32 // nil = absent (the server picks 0 for a single consumer)
	// Strategy: wire.PollOffset(n), PollFirst(), PollLast(), PollNext(), PollTimestamp(µs).
	Strategy   wire.PollingStrategy
	Count      uint32
	AutoCommit bool // store the last returned offset as the consumer's offset
}

// PollResult is a poll reply. Messages (payloads, headers) are views into a reply
// buffer the result owns; Release returns it for reuse (optional: without Release the
// garbage collector frees it).
type PollResult struct {
	PartitionID   uint32
	CurrentOffset uint64
	Messages      []wire.Message
	buf           *pollBuf
	c             *Client
}

// Release gives the reply buffer back; Messages must not be used afterwards.
func (r *PollResult) Release() {
	if r.buf != nil {
		r.c.putBuf(r.buf)
		r.buf, r.Messages = nil, nil
	}
}

// pollBuf is a reusable poll reply: request frame, reply body, decoded messages, and
// the Batch that hands them out.
type pollBuf struct {
	frame []byte
	body  []byte
	msgs  []wire.Message
	batch Batch
}

func (c *Client) getBuf() *pollBuf {
	select {
	case b := <-c.bufs:
		return b
	default:
		return &pollBuf{}
	}
}

func (c *Client) putBuf(b *pollBuf) {
	clear(b.msgs) // drop views into the body
	b.batch = Batch{}
	select {
	case c.bufs <- b:
	default:
	}
}

// PollMessages polls one partition. A poll beyond the end returns no messages, not an
// error. Errors: wire.ErrStreamIDNotFound, wire.ErrTopicIDNotFound,
// wire.ErrPartitionNotFound (single consumers), and the usual connection errors.
// Polls are retried transparently after a connection failure (with AutoCommit such a
// retry may skip what the lost reply carried: at-most-once).
func (c *Client) PollMessages(ctx context.Context, req PollRequest) (*PollResult, error) {
	q := wire.PollMessagesRequest{Consumer: req.Consumer, Stream: req.Stream, Topic: req.Topic,
		Strategy: req.Strategy, Count: req.Count, AutoCommit: req.AutoCommit}
	part := int64(-1)
	if req.Partition != nil {
		q.Partition, part = wire.PartitionID(*req.Partition), int64(*req.Partition)
	}
	b, head, _, err := c.poll(ctx, c.linkFor(req.Consumer), &q)
	if err != nil {
		return nil, opErr("poll", res(&req.Stream, &req.Topic, part), err)
	}
	return &PollResult{PartitionID: head.PartitionID, CurrentOffset: head.CurrentOffset, Messages: b.msgs, buf: b, c: c}, nil
}

// poll runs one poll on l (nil = pool) into a pooled buffer.
func (c *Client) poll(ctx context.Context, l *link, q *wire.PollMessagesRequest) (*pollBuf, wire.PollReply, uint64, error) {
	if c.isClosed() {
		return nil, wire.PollReply{}, 0, ErrClosed
	}
	if l == nil {
		l = c.pick()
	}
	b := c.getBuf()
	b.frame = q.Append(append(b.frame[:0], zeroHeader[:]...))
	r := l.roundTrip(ctx, wire.CodePollMessages, b.frame, b.body, true)
	b.body = r.body
	if r.abandoned {
		b.frame = nil // the conn kept it
	}
	if r.err != nil {
		c.putBuf(b)
		return nil, wire.PollReply{}, r.epoch, r.err
	}
	head, msgs, err := wire.DecodePollReply(r.payload, b.msgs)
	b.msgs = msgs
	if err != nil {
		c.putBuf(b)
		return nil, wire.PollReply{}, r.epoch, decodeErr(err)
	}
	return b, head, r.epoch, nil
}
