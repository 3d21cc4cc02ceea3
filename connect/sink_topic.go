package connect

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/sdk"
	"go.opentelemetry.io/otel/trace"
)

// topicConsumer is one sink × stream × topic: one consumer-group member, its partition
// table, and three goroutines (docs/architecture.md, "The life of one message"):
//
//   - poll: Poll → (assignment changes go to the table, in band) → table.polled →
//     hand the batch, with its partition entry, to the consume goroutine over a channel
//     of depth 1, so the next poll overlaps the current Consume;
//   - consume: table.delivering → Consume (with retries and on_failure) → table.resolve
//     when the commit policy says the runtime marks the batch done; with max_in_flight
//     = n > 1, up to n batches of different partitions at once (dispatch.go);
//   - store: the table's store loop, the only writer of the group's offsets.
//
// A batch carries the entry it was polled for, so a batch queued while its partition was
// revoked and assigned again is never counted against the new assignment.
type topicConsumer struct {
	s      *sinkRunner
	topic  sdk.TopicMetadata
	schema sdk.Schema
	cons   memberConsumer
	group  string // the consumer group's name
	table  *partitionTable
	log    *slog.Logger
	// convs are the converters of the consume goroutines: one per batch that may be in
	// Consume at once (max_in_flight), each with its own reused buffers and pipeline.
	convs []*converter

	batches     chan polledBatch
	abandoned   atomic.Bool // a batch was cut short by the hard stop
	pollDone    chan struct{}
	consumeDone chan struct{}
	storesDone  chan struct{}
}

// polledBatch is a batch on its way from the poll goroutine to the consume goroutine.
type polledBatch struct {
	consumerBatch
	part  *partition
	trace *batchTrace // nil when traces are off
}

// name is the consumer's stream/topic, as the sink's configuration names them.
func (tc *topicConsumer) name() string { return tc.topic.Stream + "/" + tc.topic.Topic }

func newTopicConsumer(s *sinkRunner, topic sdk.TopicMetadata, schema sdk.Schema, log *slog.Logger) *topicConsumer {
	depth := 1 // the next poll overlaps the current Consume
	if s.inFlight > 1 {
		depth = 0 // consumeConcurrently holds the waiting batch itself
	}
	table := newPartitionTable(topic, s.policy, s.cfg.ShutdownTimeout, s.retryBackoff(), s.counters, log)
	if s.inFlight > 1 {
		table.pollAhead = 2
	}
	return &topicConsumer{s: s, topic: topic, schema: schema, log: log, table: table,
		batches: make(chan polledBatch, depth), pollDone: make(chan struct{}), consumeDone: make(chan struct{}),
		storesDone: make(chan struct{})}
}

// start launches the goroutines: polling ends at the soft stop, Consume and the stores
// at the hard stop; the stores also end once the table is closed and stored.
func (tc *topicConsumer) start(life *lifecycle) {
	go func() { defer close(tc.pollDone); tc.pollLoop(life.soft) }()
	go func() { defer close(tc.consumeDone); tc.consumeLoop(life.soft, life.hard) }()
	go func() { defer close(tc.storesDone); tc.table.runStores(life.hard, tc.cons.Store) }()
}

func (tc *topicConsumer) pollLoop(ctx context.Context) {
	defer close(tc.batches)
	for {
		var b consumerBatch
		err := retry(ctx, tc.s.retryBackoff(), func(int) (err error) {
			b, err = tc.cons.Poll(ctx)
			return err
		}, func(attempt int, err error, wait time.Duration) {
			tc.s.counters.PollErrors.Add(1)
			tc.s.status.degrade(tc.name(), fmt.Errorf("poll %s: %w", tc.name(), err))
			tc.log.Warn("poll failed; retrying", "error", err, "attempt", attempt, "backoff", wait)
		})
		if err != nil {
			return // the soft stop: polls are retried until then
		}
		tc.s.status.recovered(tc.name())
		msgs := b.Messages
		if tc.table.isHeld() {
			// Polled while (or just as) the operator paused the sink: give the batch back
			// undelivered, so nothing polled after Pause returned reaches the sink. The
			// next poll of the partition, after Resume, starts at its first offset again.
			tc.cons.Seek(b.Partition, msgs[0].Offset, 0)
			b.Release()
			continue
		}
		part, pause := tc.table.polled(b.Partition, msgs[0].Offset, msgs[len(msgs)-1].Offset, b.CurrentOffset)
		if part == nil { // released (its store was refused): the next owner gets it
			b.Release()
			continue
		}
		tc.s.counters.Polled.Add(uint64(len(msgs)))
		var bt *batchTrace
		if tc.s.tracer != nil {
			bt = tc.startBatchTrace(&b)
			if tc.s.policy.serverStores {
				bt.storedWithPoll()
			} else {
				tc.table.traceBatch(part, bt)
			}
		}
		if pause {
			tc.log.Debug("partition paused at max_uncommitted", "partition", b.Partition, "max_uncommitted", tc.s.policy.maxUncommitted)
		}
		if tc.s.policy.serverStores {
			// The server stored this batch's offsets with the poll: dropping it at the stop
			// would lose it, so it is handed over even then (the consume goroutine drains
			// the channel until it is closed, and delivers such batches until the hard stop).
			tc.batches <- polledBatch{b, part, bt}
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case tc.batches <- polledBatch{b, part, bt}:
		case <-ctx.Done():
			polledBatch{b, part, bt}.release()
			return
		}
	}
}

// consumeLoop delivers batches until the poll goroutine is done; once the soft stop
// began it starts no new batch (what is queued is redelivered), except under after_polling
// (see below).
func (tc *topicConsumer) consumeLoop(soft, hard context.Context) {
	if len(tc.convs) > 1 {
		tc.consumeConcurrently(soft, hard)
		return
	}
	for b := range tc.batches {
		if tc.deliverable(soft, hard) {
			tc.deliver(hard, b, tc.convs[0])
		}
		b.release()
	}
}

// deliverable says whether a batch taken from the channel now may still be delivered.
// After the soft stop a queued batch is redelivered later in the modes that store after
// delivery; under after_polling the server already stored it, so it is delivered now,
// within the hard stop, rather than lost.
func (tc *topicConsumer) deliverable(soft, hard context.Context) bool {
	return soft.Err() == nil || (tc.s.policy.serverStores && hard.Err() == nil)
}

// deliver converts and delivers one batch with conv, then applies its settlement to the
// partition table. Safe to run for different partitions at once.
func (tc *topicConsumer) deliver(ctx context.Context, b polledBatch, conv *converter) {
	first, last := b.Messages[0].Offset, b.Messages[len(b.Messages)-1].Offset
	if !tc.table.delivering(b.part, last) {
		return // released while queued: not delivered, not committed
	}
	defer tc.table.consumed(b.part)
	var consumeSpan trace.Span
	if b.trace != nil {
		ctx, consumeSpan = b.trace.startConsume(ctx)
	}
	start := time.Now()
	msgs := conv.convert(b.Messages, tc.s.counters)
	prepared := tc.s.counters.PrepareTime.since(start)
	defer tc.s.counters.BatchTime.since(start)
	meta := sdk.MessagesMetadata{
		Partition:     sdk.Partition{StreamID: tc.topic.StreamID, TopicID: tc.topic.TopicID, PartitionID: b.Partition},
		CurrentOffset: b.CurrentOffset,
		Schema:        tc.schema,
	}
	st := tc.s.proc.deliver(ctx, tc.topic, meta, span{first, last}, msgs, conv.poison)
	if consumeSpan != nil {
		endConsume(consumeSpan, st.result, st.err)
	}
	for _, r := range st.resolve {
		tc.table.resolve(b.part, r.first, r.last)
	}
	if tc.s.bench != nil {
		processed := 0
		if st.result == batchDelivered {
			processed = len(msgs)
		}
		tc.s.bench.sink(sinkBatch{key: tc.s.cfg.Key, stream: tc.topic.Stream, topic: tc.topic.Topic,
			partition: b.Partition, currentOffset: b.CurrentOffset, size: len(b.Messages), processed: processed,
			start: start, prepared: prepared, done: time.Now()})
	}
	switch st.result {
	case batchAbandoned:
		tc.abandoned.Store(true)
	case batchStop:
		tc.s.fail(st.err)
	}
}
