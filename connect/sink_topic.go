package connect

import (
	"context"
	"log/slog"
	"sync"
	"time"

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
// batch of a revoked partition has finished when its drain begins.
//
// Revocation (see handleAssignment): a revoked partition is no longer polled; the batches
// of it already polled (at most the queued one and the one the poll goroutine holds) are
// still delivered, and its commit entry stays open — a drain goroutine per partition —
// until everything polled is stored or shutdown_timeout passes; then it is released.
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
	drains      sync.WaitGroup // drain goroutines

	mu         sync.Mutex
	parts      map[uint32]*tracker
	draining   map[uint32]*drainingPart
	revokedGen map[uint32]uint64
}

// drainingPart is a revoked partition whose commit entry is still open.
type drainingPart struct {
	t       *tracker
	settled <-chan struct{}    // closed when everything polled is stored
	cancel  context.CancelFunc // ends the drain early (shutdown, re-assignment)
}

func newTopicRunner(s *sinkRunner, topic sdk.TopicMetadata, schema sdk.Schema, cons memberConsumer, log *slog.Logger) *topicRunner {
	r := &topicRunner{s: s, topic: topic, schema: schema, cons: cons, log: log,
		batches: make(chan consumerBatch, 1), pollDone: make(chan struct{}),
		consumeDone: make(chan struct{}), loopDone: make(chan struct{}),
		parts: map[uint32]*tracker{}, draining: map[uint32]*drainingPart{}, revokedGen: map[uint32]uint64{}}
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
// A batch polled under a generation at or before the partition's revocation gets the
// draining tracker (it was polled while the partition was ours: the server keeps the
// partition for us until it is committed), or nil once the drain has ended.
func (r *topicRunner) trackerFor(partition uint32, gen uint64, create bool) *tracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rg, ok := r.revokedGen[partition]; ok && gen <= rg {
		if d := r.draining[partition]; d != nil {
			return d.t
		}
		return nil
	}
	if t := r.parts[partition]; t != nil || !create {
		return t
	}
	if d := r.draining[partition]; d != nil {
		// Re-assigned before its drain ended (after a reconnect or the server's rebalancing
		// timeout): release the old entry now; what it had not stored is redelivered.
		delete(r.draining, partition)
		d.cancel()
		r.loop.untrack(partition)
		r.s.reg.remove(d.t.key)
		r.cons.Resume(partition)
		r.log.Warn("revoked partition re-assigned while draining; its unstored commits are dropped (redelivered)",
			"partition", partition, "state", d.t.state())
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
			r.handleAssignment(ev)
			continue
		default:
		}
		select {
		case ev := <-events:
			r.handleAssignment(ev)
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

// handleAssignment handles revocations (assignments need nothing: a tracker is created on
// a partition's first batch). It runs on the consume goroutine between batches, so the
// in-flight batch of a revoked partition has finished. A revoked partition is no longer
// polled (the consumer dropped it); its tracker moves from parts to draining, keeping its
// registry entry and its place in the commit loop, and drain releases it. after_polling
// has nothing to commit: its partitions are released at once.
func (r *topicRunner) handleAssignment(ev assignmentEvent) {
	if len(ev.Revoked) == 0 {
		return
	}
	keep := r.s.cfg.OffsetCommit != config.CommitAfterPolling
	revoked := map[uint32]*tracker{}
	started := map[uint32]*drainingPart{}
	r.mu.Lock()
	for _, p := range ev.Revoked {
		r.revokedGen[p] = max(r.revokedGen[p], ev.Generation)
		t := r.parts[p]
		if t == nil {
			continue
		}
		delete(r.parts, p)
		if !keep {
			revoked[p] = t
			continue
		}
		ctx, cancel := context.WithTimeout(r.s.abandonCtx, r.drainTimeout())
		d := &drainingPart{t: t, settled: t.beginDrain(), cancel: cancel}
		r.draining[p] = d
		started[p] = d
		r.drains.Add(1)
		go r.drain(ctx, p, d)
	}
	r.mu.Unlock()
	for p, t := range revoked {
		r.loop.untrack(p)
		r.s.reg.remove(t.key)
		r.cons.Resume(p) // a later re-assignment starts unpaused
	}
	if len(started) > 0 {
		r.loop.wake() // store what is already pending now: draining partitions are urgent
	}
	r.log.Info("partitions revoked", "partitions", ev.Revoked, "generation", ev.Generation, "draining", len(started))
}

// drainTimeout bounds how long a revoked partition's commit entry stays open:
// shutdown_timeout, the time a sink is already given to finish and commit its in-flight
// work at stop.
func (r *topicRunner) drainTimeout() time.Duration { return r.s.cfg.ShutdownTimeout }

// drainFinalFlush bounds the last store attempt of a drain that hit its deadline.
const drainFinalFlush = time.Second

// drain keeps a revoked partition's commit entry open until everything polled from it is
// stored (the sink committed everything it was given and the store succeeded) or ctx ends
// (drain deadline, hard stop, or cancel by shutdown or re-assignment), then releases it:
// the registry entry is removed (later commits get ErrCommitUnknownPartition) and the
// partition leaves the commit loop. Meanwhile every accepted commit is stored at once:
// the server still accepts commits from a member whose partition is pending revocation,
// and hands the partition over as soon as the stored offset covers what the group polled.
func (r *topicRunner) drain(ctx context.Context, p uint32, d *drainingPart) {
	defer r.drains.Done()
	defer d.cancel()
	start := time.Now()
	select {
	case <-d.settled:
	case <-ctx.Done():
	}
	r.mu.Lock()
	mine := r.draining[p] == d
	if mine {
		delete(r.draining, p)
	}
	r.mu.Unlock()
	if !mine { // released by release (shutdown) or trackerFor (re-assignment)
		return
	}
	r.loop.untrack(p)
	r.s.reg.remove(d.t.key)
	st := d.t.state()
	if st.Pending >= 0 { // the deadline passed with a commit accepted but not yet stored
		fctx, cancel := context.WithTimeout(r.s.abandonCtx, drainFinalFlush)
		if err := r.loop.flushFinal(fctx, map[uint32]*tracker{p: d.t}); err != nil {
			r.log.Warn("last commit of a revoked partition not written; it will be redelivered", "partition", p, "error", err)
		}
		cancel()
		st = d.t.state()
	}
	r.cons.Resume(p) // a later re-assignment starts unpaused
	if st.Committed < st.Polled {
		r.log.Warn("revoked partition released before everything polled was committed; the rest goes to its next owner",
			"partition", p, "drain_timeout", r.drainTimeout(), "polled", st.Polled, "delivered", st.Delivered, "committed", st.Committed)
		return
	}
	r.log.Info("revoked partition released", "partition", p, "committed", st.Committed, "drained_in", time.Since(start))
}

// release closes every registry entry of this topic (draining ones included) and writes
// what is pending, then leaves the group. Called after the sink was closed.
func (r *topicRunner) release(ctx context.Context) error {
	r.mu.Lock()
	parts := r.parts
	r.parts = map[uint32]*tracker{}
	drains := r.draining
	r.draining = map[uint32]*drainingPart{}
	r.mu.Unlock()
	for p, d := range drains { // still open for the sink's Close; written below with the rest
		d.cancel()
		parts[p] = d.t
	}
	r.drains.Wait()
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
