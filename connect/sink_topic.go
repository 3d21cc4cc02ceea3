package connect

import (
	"context"
	"log/slog"
	"sync"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// topicRunner is one sink × stream × topic: one consumer-group member, a poll goroutine, a
// consume goroutine and a commit loop.
//
// The poll goroutine hands batches to the consume goroutine over a channel of depth 1, so
// the next poll overlaps the current Consume. Polled offsets are registered (backpressure)
// by the poll goroutine; delivered offsets by the consume goroutine just before Consume.
// Assignment events are handled by the consume goroutine between batches, so the in-flight
// batch of a revoked partition has finished when its commits are flushed.
type topicRunner struct {
	s      *sinkRunner
	topic  sdk.TopicMetadata
	schema sdk.Schema
	cons   memberConsumer
	loop   *commitLoop
	log    *slog.Logger

	batches     chan consumerBatch
	pollDone    chan struct{}
	consumeDone chan struct{}
	loopDone    chan struct{}
	cancelLoop  context.CancelFunc
	conv        converter

	mu         sync.Mutex
	parts      map[uint32]*tracker
	revokedGen map[uint32]uint64
}

func newTopicRunner(s *sinkRunner, topic sdk.TopicMetadata, schema sdk.Schema, cons memberConsumer, log *slog.Logger) *topicRunner {
	r := &topicRunner{s: s, topic: topic, schema: schema, cons: cons, log: log,
		batches: make(chan consumerBatch, 1), pollDone: make(chan struct{}),
		consumeDone: make(chan struct{}), loopDone: make(chan struct{}),
		parts: map[uint32]*tracker{}, revokedGen: map[uint32]uint64{}}
	r.loop = newCommitLoop(cons.Commit, s.cfg.Commit.Interval, s.storeBackoff(), &s.counters, log, cons.Resume)
	return r
}

// start launches the goroutines. pollCtx ends polling (graceful stop); hardCtx abandons the
// in-flight batch.
func (r *topicRunner) start(pollCtx, hardCtx context.Context) {
	loopCtx, cancel := context.WithCancel(context.Background())
	r.cancelLoop = cancel
	go func() { defer close(r.loopDone); r.loop.run(loopCtx) }()
	go func() { defer close(r.pollDone); r.pollLoop(pollCtx) }()
	go func() { defer close(r.consumeDone); r.consumeLoop(pollCtx, hardCtx) }()
}

// trackerFor returns the partition's tracker, creating and registering it on first sight.
// It returns nil for a batch polled under a generation at or before the partition's
// revocation.
func (r *topicRunner) trackerFor(partition uint32, gen uint64, create bool) *tracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rg, ok := r.revokedGen[partition]; ok && gen <= rg {
		return nil
	}
	if t := r.parts[partition]; t != nil || !create {
		return t
	}
	key := partitionKey{r.s.instance, sdk.Partition{StreamID: r.topic.StreamID, TopicID: r.topic.TopicID, PartitionID: partition}}
	var maxU uint64
	if r.s.cfg.OffsetCommit != config.CommitAfterPolling {
		maxU = r.s.cfg.Commit.MaxUncommitted
	}
	t := newTracker(key, &r.s.counters, maxU, r.loop.wake)
	t.flushEach = r.s.cfg.OffsetCommit == config.CommitAfterConsuming
	if err := r.s.reg.add(t); err != nil {
		r.log.Error("commit registry", "error", err)
		return nil
	}
	r.parts[partition] = t
	r.loop.track(partition, t)
	return t
}

func (r *topicRunner) pollLoop(ctx context.Context) {
	defer close(r.batches)
	for n := 1; ; {
		b, err := r.cons.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d := r.s.storeBackoff().Delay(n)
			r.log.Warn("poll failed; retrying", "error", err, "backoff", d)
			n++
			if !sleep(ctx, d) {
				return
			}
			continue
		}
		n = 1
		msgs := b.Messages
		t := r.trackerFor(b.Partition, b.Generation, true)
		if t == nil || len(msgs) == 0 {
			b.Release()
			continue
		}
		r.s.counters.Polled.Add(uint64(len(msgs)))
		if r.s.cfg.OffsetCommit == config.CommitAfterPolling {
			r.s.counters.Committed.Add(uint64(len(msgs))) // stored by the server with the poll
		}
		if t.polledBatch(msgs[0].Offset, msgs[len(msgs)-1].Offset) {
			r.cons.Pause(b.Partition)
			r.log.Debug("partition paused at max_uncommitted", "partition", b.Partition, "max_uncommitted", r.s.cfg.Commit.MaxUncommitted)
		}
		select {
		case r.batches <- b:
		case <-ctx.Done():
			b.Release()
			return
		}
	}
}

func (r *topicRunner) consumeLoop(pollCtx, hardCtx context.Context) {
	events := r.cons.Events()
	for {
		// Revocations first: they must not wait behind a queued batch.
		select {
		case ev := <-events:
			r.handleAssignment(hardCtx, ev)
			continue
		default:
		}
		select {
		case ev := <-events:
			r.handleAssignment(hardCtx, ev)
		case b, ok := <-r.batches:
			if !ok {
				return
			}
			if pollCtx.Err() != nil { // stopping: start no new batch; it is redelivered
				b.Release()
				continue
			}
			r.handleBatch(hardCtx, b)
		}
	}
}

func (r *topicRunner) handleBatch(ctx context.Context, b consumerBatch) {
	defer b.Release()
	t := r.trackerFor(b.Partition, b.Generation, false)
	if t == nil { // revoked while queued: not delivered, not committed
		return
	}
	msgs := r.conv.convert(b.Messages, &r.s.counters)
	meta := sdk.MessagesMetadata{
		Partition:     sdk.Partition{StreamID: r.topic.StreamID, TopicID: r.topic.TopicID, PartitionID: b.Partition},
		CurrentOffset: b.CurrentOffset,
		Schema:        r.schema,
	}
	res, err := r.s.proc.process(ctx, r.topic, meta, msgs, t)
	if res == batchStop {
		r.s.fail(err)
	}
}

// handleAssignment stops delivering revoked partitions, writes their pending commits
// (bounded by shutdown_timeout) and removes their registry entries. The in-flight batch has
// finished: this runs on the consume goroutine between batches.
func (r *topicRunner) handleAssignment(ctx context.Context, ev assignmentEvent) {
	if len(ev.Revoked) == 0 {
		return
	}
	revoked := map[uint32]*tracker{}
	r.mu.Lock()
	for _, p := range ev.Revoked {
		r.revokedGen[p] = max(r.revokedGen[p], ev.Generation)
		if t := r.parts[p]; t != nil {
			revoked[p] = t
			delete(r.parts, p)
		}
	}
	r.mu.Unlock()
	for p, t := range revoked {
		r.loop.untrack(p)
		r.s.reg.remove(t.key)
	}
	if len(revoked) == 0 {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, r.s.cfg.ShutdownTimeout)
	defer cancel()
	if err := r.loop.flushFinal(fctx, revoked); err != nil {
		r.log.Warn("commits of revoked partitions not written; they will be redelivered", "partitions", ev.Revoked, "error", err)
	}
	for p := range revoked {
		r.cons.Resume(p) // a later re-assignment starts unpaused
	}
	r.log.Info("partitions revoked", "partitions", ev.Revoked, "generation", ev.Generation)
}

// release closes every registry entry of this topic and writes what is pending, then
// leaves the group. Called after the sink was closed.
func (r *topicRunner) release(ctx context.Context) error {
	r.mu.Lock()
	parts := r.parts
	r.parts = map[uint32]*tracker{}
	r.mu.Unlock()
	for p, t := range parts {
		r.loop.untrack(p)
		r.s.reg.remove(t.key)
	}
	r.cancelLoop()
	<-r.loopDone
	var ferr error
	if r.s.cfg.OffsetCommit != config.CommitAfterPolling && len(parts) > 0 {
		ferr = r.loop.flushFinal(ctx, parts)
	}
	cerr := r.cons.Close(ctx)
	if ferr != nil {
		return ferr
	}
	return cerr
}
