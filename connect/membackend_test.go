package connect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// memBackend is an in-memory stand-in for Iggy used by the pipeline tests of this package
// while the real client and embedded server are being written; the connect_test
// integration tests run the same scenarios over real TCP. It keeps per-partition logs,
// group offsets, Next/local-position semantics, AutoCommit on poll, pause/resume and
// revocation events.
type memBackend struct {
	mu         sync.Mutex
	logs       map[string][][][]byte // "stream/topic" → partition → messages
	stored     map[string]uint64     // "group/stream/topic/partition" → stored offset
	storeFails int                   // fail the next n Commit calls
	dlq        [][]sdk.ProducedMessage
	consumers  []*memConsumer
	polls      int
}

func newMemBackend() *memBackend {
	return &memBackend{logs: map[string][][][]byte{}, stored: map[string]uint64{}}
}

func (b *memBackend) addTopic(stream, topic string, partitions int, msgsPer int) {
	b.addTopicPayload(stream, topic, partitions, msgsPer, nil)
}

// addTopicPayload fills partitions with msgsPer messages; payload nil = "p<P>-m<I>".
func (b *memBackend) addTopicPayload(stream, topic string, partitions int, msgsPer int, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := make([][][]byte, partitions)
	for p := range ps {
		ps[p] = make([][]byte, 0, msgsPer)
		for i := 0; i < msgsPer; i++ {
			if payload != nil {
				ps[p] = append(ps[p], payload)
				continue
			}
			ps[p] = append(ps[p], []byte(fmt.Sprintf("p%d-m%d", p, i)))
		}
	}
	b.logs[stream+"/"+topic] = ps
}

func (b *memBackend) storedOffset(group, stream, topic string, p uint32) (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.stored[fmt.Sprintf("%s/%s/%s/%d", group, stream, topic, p)]
	return v, ok
}

func (b *memBackend) topicMetadata(_ context.Context, stream, topic string) (sdk.TopicMetadata, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.logs[stream+"/"+topic]; !ok {
		return sdk.TopicMetadata{}, fmt.Errorf("topic %s/%s: %w", stream, topic, wire.ErrNotFound)
	}
	return sdk.TopicMetadata{Stream: stream, Topic: topic, StreamID: 1, TopicID: 1}, nil
}

func (b *memBackend) newConsumer(_ context.Context, cfg consumerConfig) (memberConsumer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	parts := b.logs[cfg.Stream+"/"+cfg.Topic]
	c := &memConsumer{b: b, cfg: cfg, events: make(chan assignmentEvent, 4), gen: 1,
		assigned: map[uint32]bool{}, paused: map[uint32]bool{}, next: map[uint32]uint64{}}
	for p := range parts {
		c.assigned[uint32(p)] = true
	}
	b.consumers = append(b.consumers, c)
	return c, nil
}

func (b *memBackend) newDeadLetterProducer(context.Context, string, string) (deadLetterProducer, error) {
	return memDLQ{b}, nil
}

type memDLQ struct{ b *memBackend }

func (d memDLQ) sendDeadLetters(_ context.Context, msgs []sdk.ProducedMessage) error {
	d.b.mu.Lock()
	d.b.dlq = append(d.b.dlq, msgs)
	d.b.mu.Unlock()
	return nil
}
func (memDLQ) Close(context.Context) error { return nil }

type memConsumer struct {
	b        *memBackend
	cfg      consumerConfig
	events   chan assignmentEvent
	gen      uint64
	assigned map[uint32]bool
	paused   map[uint32]bool
	next     map[uint32]uint64
	rr       uint32
	closed   bool
}

func (c *memConsumer) key(p uint32) string {
	return fmt.Sprintf("%s/%s/%s/%d", c.cfg.Group, c.cfg.Stream, c.cfg.Topic, p)
}

func (c *memConsumer) Poll(ctx context.Context) (consumerBatch, error) {
	for {
		if b, ok := c.tryPoll(); ok {
			return b, nil
		}
		if !sleep(ctx, time.Millisecond) {
			return consumerBatch{}, ctx.Err()
		}
	}
}

func (c *memConsumer) tryPoll() (consumerBatch, bool) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	parts := c.b.logs[c.cfg.Stream+"/"+c.cfg.Topic]
	for i := 0; i < len(parts); i++ {
		p := (c.rr + uint32(i)) % uint32(len(parts))
		if !c.assigned[p] || c.paused[p] {
			continue
		}
		next, ok := c.next[p]
		if !ok { // Next: stored+1, or 0
			if s, ok := c.b.stored[c.key(p)]; ok {
				next = s + 1
			}
		}
		if next >= uint64(len(parts[p])) {
			continue
		}
		end := min(uint64(len(parts[p])), next+uint64(c.cfg.BatchSize))
		msgs := make([]wire.Message, 0, end-next)
		for o := next; o < end; o++ {
			msgs = append(msgs, wire.Message{Offset: o, Payload: parts[p][o]})
		}
		c.next[p] = end
		c.rr = p + 1
		c.b.polls++
		if c.cfg.AutoCommit {
			c.b.stored[c.key(p)] = end - 1
		}
		return consumerBatch{Partition: p, CurrentOffset: uint64(len(parts[p]) - 1), Generation: c.gen,
			Messages: msgs, Release: func() {}}, true
	}
	return consumerBatch{}, false
}

func (c *memConsumer) Commit(_ context.Context, p uint32, off uint64) error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.b.storeFails > 0 {
		c.b.storeFails--
		return errors.New("injected store failure")
	}
	c.b.stored[c.key(p)] = off
	return nil
}

func (c *memConsumer) Pause(p uint32)                 { c.b.mu.Lock(); c.paused[p] = true; c.b.mu.Unlock() }
func (c *memConsumer) Resume(p uint32)                { c.b.mu.Lock(); delete(c.paused, p); c.b.mu.Unlock() }
func (c *memConsumer) Events() <-chan assignmentEvent { return c.events }
func (c *memConsumer) Close(context.Context) error {
	c.b.mu.Lock()
	c.closed = true
	c.b.mu.Unlock()
	return nil
}

// revoke takes p away from the member, as a rebalance does.
func (c *memConsumer) revoke(p uint32) {
	c.b.mu.Lock()
	c.gen++
	delete(c.assigned, p)
	delete(c.next, p)
	ev := assignmentEvent{Generation: c.gen, Revoked: []uint32{p}}
	c.b.mu.Unlock()
	c.events <- ev
}
