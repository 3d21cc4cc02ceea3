package iggy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// ProducerConfig configures a Producer.
type ProducerConfig struct {
	Stream, Topic Identifier
	// Partitioning: wire.Balanced() (default; round-robin per batch over the topic's
	// partitions, chosen client-side), wire.ToPartition(n), or wire.ByKey(k)
	// (XXH32(k) % partitions, client-side).
	Partitioning Partitioning
	// KeyFunc, if set, partitions each message by its own key (XXH32 % partitions),
	// overriding Partitioning.
	KeyFunc func(Message) []byte
	// BatchCount caps the messages of one send. Default 1000.
	BatchCount int
	// BatchBytes caps the encoded bytes of one send. Default 1 MiB (at most the frame
	// limit).
	BatchBytes int
	// Linger is how long Produce waits for more messages before sending. Default 5ms.
	Linger time.Duration
}

// maxQueued is how many cut batches Produce may queue before it blocks.
const maxQueued = 4

// Producer sends messages to one topic in batches. Safe for concurrent use. Send is
// synchronous; Produce/Flush are asynchronous with linger. Ordering holds within one
// partition for one caller of Send, and for Produce calls in order; Send and Produce
// are not ordered with each other.
type Producer struct {
	c     *Client
	cfg   ProducerConfig
	parts []uint32 // the topic's partition ids
	rr    atomic.Uint32

	mu       sync.Mutex
	closed   bool
	buf      []Message
	bufBytes int
	timer    *time.Timer
	ready    [][]Message
	kick     chan struct{}
	drained  chan struct{} // closed and replaced whenever a queued batch finished
	queued   uint64        // batches cut so far
	finished uint64        // batches sent (or failed) so far
	err      error         // first async error since the last Flush
	stop     context.CancelFunc
	ctx      context.Context
	loopDone chan struct{}
}

// NewProducer reads the topic's partitions (wire.ErrNotFound if it does not exist)
// and starts the sender. ctx bounds only the setup.
func (c *Client) NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	where := res(&cfg.Stream, &cfg.Topic, -1)
	if cfg.Partitioning.Kind == 0 {
		cfg.Partitioning = wire.Balanced()
	}
	if cfg.BatchCount <= 0 {
		cfg.BatchCount = 1000
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 1 << 20
	}
	cfg.BatchBytes = min(cfg.BatchBytes, c.cfg.maxFrame-sendOverhead)
	if cfg.Linger <= 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	t, err := c.GetTopic(ctx, cfg.Stream, cfg.Topic)
	if err != nil {
		return nil, opErr("new producer", where, err)
	}
	p := &Producer{c: c, cfg: cfg, kick: make(chan struct{}, 1), drained: make(chan struct{}), loopDone: make(chan struct{})}
	for _, pr := range t.Partitions {
		p.parts = append(p.parts, pr.ID)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, opErr("new producer", where, ErrClosed)
	}
	c.producers[p] = struct{}{}
	p.ctx, p.stop = context.WithCancel(c.life)
	c.mu.Unlock()
	c.wg.Add(1)
	go p.loop()
	return p, nil
}

// check refuses a message that can never be sent.
func (p *Producer) check(i int, m *Message) error {
	if len(m.Payload) == 0 || len(m.Payload) > wire.MaxPayloadSize {
		return fmt.Errorf("message %d: %d payload bytes: %w", i, len(m.Payload), wire.ErrPayloadSize)
	}
	if n := m.size(); n+sendOverhead > p.c.cfg.maxFrame {
		return fmt.Errorf("message %d of %d bytes: %w (%d bytes)", i, n, ErrTooLarge, p.c.cfg.maxFrame)
	}
	return nil
}

// Send sends msgs and returns once the server confirmed all of them (split into
// batches by BatchCount/BatchBytes, and by partition; the partitions' sends run at once,
// each partition's in order). Every message is checked before
// anything is sent. On ErrOutcomeUnknown some batches may have been stored: retrying may
// duplicate messages (at-least-once).
func (p *Producer) Send(ctx context.Context, msgs []Message) error {
	for i := range msgs {
		if err := p.check(i, &msgs[i]); err != nil {
			return opErr("send", res(&p.cfg.Stream, &p.cfg.Topic, -1), err)
		}
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return opErr("send", res(&p.cfg.Stream, &p.cfg.Topic, -1), ErrClosed)
	}
	return p.sendAll(ctx, msgs)
}

// sendAll splits msgs into batches and sends them in order.
func (p *Producer) sendAll(ctx context.Context, msgs []Message) error {
	if p.cfg.KeyFunc != nil || hasKeys(msgs) {
		return p.sendByKey(ctx, msgs)
	}
	for len(msgs) > 0 {
		n, bytes := 0, 0
		for n < len(msgs) && n < p.cfg.BatchCount {
			sz := msgs[n].size()
			if n > 0 && bytes+sz > p.cfg.BatchBytes {
				break
			}
			bytes += sz
			n++
		}
		if err := p.sendBatch(ctx, p.partitionFor(), msgs[:n]); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

func (p *Producer) sendByKey(ctx context.Context, msgs []Message) error {
	if len(p.parts) == 0 {
		return opErr("send", res(&p.cfg.Stream, &p.cfg.Topic, -1), wire.ErrPartitionNotFound)
	}
	// Two passes: each message's partition index, then the messages laid out partition by
	// partition in one slice (in their order within each), so grouping allocates twice.
	n := uint32(len(p.parts))
	idx := make([]uint32, len(msgs))
	start := make([]int, n+1)
	for i := range msgs {
		if to := msgs[i].Partition; to != nil {
			idx[i] = *to % n
			start[idx[i]+1]++
			continue
		}
		key := msgs[i].Key
		if len(key) == 0 && p.cfg.KeyFunc != nil {
			key = p.cfg.KeyFunc(msgs[i])
		}
		if len(key) > 0 {
			idx[i] = wire.PartitionForKey(key, n)
		}
		start[idx[i]+1]++
	}
	for i := range n {
		start[i+1] += start[i]
	}
	grouped := make([]Message, len(msgs))
	next := append([]int(nil), start[:n]...)
	for i := range msgs {
		grouped[next[idx[i]]] = msgs[i]
		next[idx[i]]++
	}
	var order []uint32 // partition indexes with messages
	for i := range n {
		if start[i+1] > start[i] {
			order = append(order, i)
		}
	}
	group := func(i uint32) []Message { return grouped[start[i]:start[i+1]] }
	if len(order) == 1 {
		return p.sendPartition(ctx, p.parts[order[0]], group(order[0]))
	}
	// Partitions are independent logs: their sends go out at once (over the client's pool),
	// each partition's batches still one after another, in order.
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for j, i := range order {
		wg.Go(func() { errs[j] = p.sendPartition(ctx, p.parts[i], group(i)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sendPartition sends g to partition part, split by BatchCount and BatchBytes, in order;
// it stops at the first failure.
func (p *Producer) sendPartition(ctx context.Context, part uint32, g []Message) error {
	for len(g) > 0 {
		n, bytes := 0, 0
		for n < len(g) && n < p.cfg.BatchCount {
			sz := g[n].size()
			if n > 0 && bytes+sz > p.cfg.BatchBytes {
				break
			}
			bytes += sz
			n++
		}
		if err := p.sendBatch(ctx, wire.ToPartition(part), g[:n]); err != nil {
			return err
		}
		g = g[n:]
	}
	return nil
}

// hasKeys reports whether a message of msgs names its own partition key or partition.
func hasKeys(msgs []Message) bool {
	for i := range msgs {
		if len(msgs[i].Key) > 0 || msgs[i].Partition != nil {
			return true
		}
	}
	return false
}

// Partitions returns the ids of the topic's partitions, in the order key partitioning
// indexes them (wire.PartitionForKey), as read when the producer was created.
func (p *Producer) Partitions() []uint32 { return append([]uint32(nil), p.parts...) }

// partitionFor resolves the configured partitioning client-side, as the SDKs do.
func (p *Producer) partitionFor() Partitioning {
	switch p.cfg.Partitioning.Kind {
	case wire.PartitioningBalanced:
		if len(p.parts) == 0 {
			return p.cfg.Partitioning
		}
		return wire.ToPartition(p.parts[(p.rr.Add(1)-1)%uint32(len(p.parts))])
	case wire.PartitioningMessagesKey:
		if len(p.parts) == 0 {
			return p.cfg.Partitioning
		}
		return wire.ToPartition(p.parts[wire.PartitionForKey(p.cfg.Partitioning.Key, uint32(len(p.parts)))])
	}
	return p.cfg.Partitioning
}

func (p *Producer) sendBatch(ctx context.Context, part Partitioning, msgs []Message) error {
	_, err := p.c.SendMessages(ctx, p.cfg.Stream, p.cfg.Topic, part, msgs)
	return err
}

// Produce queues m; batches go out when BatchCount or BatchBytes is reached or Linger
// has passed since the first queued message. It blocks (bounded by ctx) when several
// batches are already waiting. The message's slices must not change until Flush
// returns. Errors of the asynchronous sends are reported by Flush.
func (p *Producer) Produce(ctx context.Context, m Message) error {
	if err := p.check(0, &m); err != nil {
		return opErr("produce", res(&p.cfg.Stream, &p.cfg.Topic, -1), err)
	}
	sz := m.size()
	p.mu.Lock()
	for len(p.ready) >= maxQueued && !p.closed {
		ch := p.drained
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return opErr("produce", res(&p.cfg.Stream, &p.cfg.Topic, -1), &notSentError{ctx.Err()})
		}
		p.mu.Lock()
	}
	if p.closed {
		p.mu.Unlock()
		return opErr("produce", res(&p.cfg.Stream, &p.cfg.Topic, -1), ErrClosed)
	}
	if len(p.buf) > 0 && p.bufBytes+sz > p.cfg.BatchBytes {
		p.cutLocked()
	}
	p.buf = append(p.buf, m)
	p.bufBytes += sz
	if len(p.buf) >= p.cfg.BatchCount || p.bufBytes >= p.cfg.BatchBytes {
		p.cutLocked()
	} else if p.timer == nil {
		p.timer = time.AfterFunc(p.cfg.Linger, p.linger)
	}
	p.mu.Unlock()
	return nil
}

func (p *Producer) linger() {
	p.mu.Lock()
	p.timer = nil
	if !p.closed {
		p.cutLocked()
	}
	p.mu.Unlock()
}

// cutLocked moves the buffered messages to the send queue.
func (p *Producer) cutLocked() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if len(p.buf) == 0 {
		return
	}
	p.ready = append(p.ready, p.buf)
	p.buf, p.bufBytes = nil, 0
	p.queued++
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// loop sends queued batches in order until the producer is closed.
func (p *Producer) loop() {
	defer p.c.wg.Done()
	defer close(p.loopDone)
	for {
		p.mu.Lock()
		for len(p.ready) == 0 {
			p.mu.Unlock()
			select {
			case <-p.kick:
			case <-p.ctx.Done():
				return
			}
			p.mu.Lock()
		}
		b := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		err := p.sendAll(p.ctx, b)
		p.mu.Lock()
		p.finished++
		if err != nil && p.err == nil {
			p.err = err
		}
		close(p.drained)
		p.drained = make(chan struct{})
		p.mu.Unlock()
	}
}

// Flush sends everything Produce queued and waits for it (bounded by ctx). It returns
// the first error of an asynchronous send since the previous Flush.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.cutLocked()
	target := p.queued
	for p.finished < target {
		ch := p.drained
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return opErr("flush", res(&p.cfg.Stream, &p.cfg.Topic, -1), ctx.Err())
		case <-p.loopDone:
			return opErr("flush", res(&p.cfg.Stream, &p.cfg.Topic, -1), ErrClosed)
		}
		p.mu.Lock()
	}
	err := p.err
	p.err = nil
	p.mu.Unlock()
	return err
}

// Close flushes (bounded by ctx; an ended ctx abandons what is queued), stops the
// sender and refuses further messages. Idempotent.
func (p *Producer) Close(ctx context.Context) error {
	var err error
	if ctx.Err() == nil {
		err = p.Flush(ctx)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
	p.stop()
	<-p.loopDone
	p.c.mu.Lock()
	delete(p.c.producers, p)
	p.c.mu.Unlock()
	return err
}
