package iggy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Stream, Topic Identifier
	// Group is the consumer group's name; it is created if missing, then joined.
	Group string
	// BatchSize is the poll count. Default 1000.
	BatchSize uint32
	// PollInterval is the minimum spacing between polls of one partition after it
	// returned nothing. Default 5ms.
	PollInterval time.Duration
	// AutoCommit makes the server store the offset as part of each poll
	// (after_polling, at-most-once). Default false: commit with Commit.
	AutoCommit bool
}

// Batch is what Consumer.Poll returns: messages of one partition, in offset order.
type Batch struct {
	Partition     uint32
	CurrentOffset uint64 // the partition's last offset, from the poll reply
	// Generation is the assignment generation the poll was sent under: never above the
	// Generation of an AssignmentEvent reported after the batch (see Consumer.Events).
	Generation uint64
	// Messages is never empty and never mixes partitions. Payloads and headers are
	// views into a reply buffer that stays valid until Release.
	Messages []wire.Message
	buf      *pollBuf
	c        *Client
}

// Release returns the batch's buffer for reuse. Call it once, when done with Messages;
// the Batch must not be used afterwards. Safe to call from any goroutine.
func (b *Batch) Release() {
	if b.buf != nil {
		buf, c := b.buf, b.c
		b.buf = nil
		c.putBuf(buf)
	}
}

// LastOffset returns the offset of the last message.
func (b *Batch) LastOffset() uint64 { return b.Messages[len(b.Messages)-1].Offset }

// AssignmentEvent reports a change of the partitions a Consumer owns. Revoked
// partitions are no longer polled; batches of them that Poll returned before the event
// (Batch.Generation < Generation) were polled while they were owned and should still be
// handled and committed (see Consumer.Events). Assigned ones start from the group's
// stored offset.
type AssignmentEvent struct {
	Generation        uint64
	Assigned, Revoked []uint32
}

// Consumer is one member of a consumer group on its own connection. See NewConsumer.
// Poll must not be called concurrently with itself; every other method is safe for
// concurrent use (including with Poll).
type Consumer struct {
	c       *Client
	cfg     ConsumerConfig
	group   wire.Identifier
	link    *link
	events  chan AssignmentEvent
	wake    chan struct{}
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	hbDone  chan struct{}
	closeMu sync.Mutex
	// op is held across one poll or sync round trip (and the handling of its reply), so
	// the member connection never has both in flight and an assignment never changes
	// while a poll reply is being handled.
	op chan struct{}

	pollHook func(partition uint32) // test hook: a poll reply with messages arrived

	mu        sync.Mutex
	closed    bool
	gen       uint64
	assigned  []uint32 // sorted
	parts     map[uint32]*partState
	paused    map[uint32]bool
	syncEpoch uint64
	needSync  bool
	lastSync  time.Time // last successful sync
	rr        int
	// outside is set while the caller holds the batch Poll returned last (of partition
	// held) and has not called Poll again; an event revoking held waits in deferred
	// (with every later event, in order) until the next Poll.
	outside  bool
	held     uint32
	deferred []AssignmentEvent
	// task is the poll in flight (nil if none); kept is a batch it returned that no Poll
	// has delivered yet (its Poll call had returned on ctx's end). While kept is set,
	// every event waits in deferred: it must be reported after the batch.
	task     *pollTask
	kept     *pollBuf
	outlived int // polls that outlived their Poll call (for tests)
}

// idleSyncGap is the minimum spacing of the syncs a Poll with nothing to poll makes at once.
const idleSyncGap = 100 * time.Millisecond

type partState struct {
	next       uint64
	hasPos     bool
	emptyUntil time.Time
	seeks      uint64 // Seek calls: a poll started before one does not move next
}

// NewConsumer joins cfg.Group (creating it if missing) on a dedicated connection and
// syncs its assignment. A goroutine re-syncs the assignment every WithAssignmentSync
// interval (1 s by default; at least every WithHeartbeat), even while the caller is
// busy, so the member learns moved partitions promptly and never looks stale; a sync
// never overlaps a poll of this Consumer. The member reconnects, logs in, rejoins and
// resyncs transparently (membership is new after a reconnect; positions of partitions
// still owned are kept). ctx bounds only the setup.
// Errors: unknown stream or topic (wire.ErrNotFound), login and connection errors.
func (c *Client) NewConsumer(ctx context.Context, cfg ConsumerConfig) (*Consumer, error) {
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 1000
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	where := res(&cfg.Stream, &cfg.Topic, -1) + " group " + Name(cfg.Group).String()
	if err := wire.CheckName(cfg.Group); err != nil {
		return nil, opErr("new consumer", where, fmt.Errorf("group name: %w", err))
	}
	cn := &Consumer{
		c: c, cfg: cfg, group: Name(cfg.Group),
		events: make(chan AssignmentEvent, 256),
		wake:   make(chan struct{}, 1),
		hbDone: make(chan struct{}),
		op:     make(chan struct{}, 1),
		parts:  map[uint32]*partState{},
		paused: map[uint32]bool{},
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, opErr("new consumer", where, ErrClosed)
	}
	c.consumers[cn] = struct{}{}
	cn.ctx, cn.cancel = context.WithCancel(c.life)
	c.mu.Unlock()
	cn.link = newLink(c, "consumer "+cfg.Group)
	cn.link.onConnect = cn.join
	if _, err := cn.link.get(ctx); err != nil {
		cn.abandon()
		return nil, opErr("new consumer", where, err)
	}
	if err := cn.sync(ctx); err != nil {
		cn.abandon()
		return nil, opErr("new consumer", where, err)
	}
	c.wg.Add(1)
	go cn.member()
	return cn, nil
}

// abandon undoes a failed NewConsumer.
func (cn *Consumer) abandon() {
	cn.cancel()
	cn.link.close()
	cn.c.mu.Lock()
	delete(cn.c.consumers, cn)
	cn.c.mu.Unlock()
	close(cn.hbDone)
	cn.mu.Lock()
	cn.closed = true
	close(cn.events)
	cn.mu.Unlock()
}

// Poll returns the next batch from an owned, unpaused partition (round-robin over the
// partitions), blocking until one is available or ctx ends. Positions are local: the
// first poll of a partition (or after it was re-assigned) uses Next (the group's stored
// offset + 1, or 0); later polls continue from the offset after the last delivered
// message, whatever was committed. Connection failures are handled inside (reconnect,
// rejoin, resync); Poll returns ctx's error, ErrClosed, or errors that retrying will not
// fix (e.g. the topic was deleted).
//
// Cancellation: ctx ending never costs the membership or a batch. A poll request already
// sent is not abandoned: Poll returns ctx's error at once, the request completes in the
// background (bounded by WithRequestTimeout) on the member connection, and a batch it
// returns is kept and returned first by the next Poll call, even one whose ctx has
// already ended; nothing is skipped or delivered twice. (Abandoning the reply instead
// would lose the batch although the server counts it as polled — with AutoCommit it
// would even be committed — and a revoked partition would stay pending revocation for
// the rebalancing timeout.) Other member requests cancelled mid-flight (an assignment
// sync, Commit) have their late replies discarded by the connection, which stays
// open: a caller-side timeout never drops the member. Seek of the kept batch's
// partition discards it (the caller chose a new position).
//
// Rebalance: a batch the server returned is never thrown away, even when the partition
// is revoked meanwhile or the assignment generation changed (the server counts its
// messages as polled by the group and keeps a revoked partition pending revocation with
// this member until the group's stored offset covers them, or for its rebalancing
// timeout, 30 s by default). Assignment syncs never overlap a poll, so a batch is always
// polled under an assignment that owns its partition; Batch.Generation is that
// assignment's generation. The caller hands it on as usual and commits it after a
// revocation too (the server accepts commits of a partition pending revocation from its
// previous owner) — DESIGN.md's "stop delivering it, let the in-flight batch finish,
// commit what is done, then release it". An event revoking the partition of the batch
// Poll returned last is reported only once Poll is called again (see Events); events
// that follow a kept batch are reported after it.
func (cn *Consumer) Poll(ctx context.Context) (*Batch, error) {
	if b, err := cn.resume(ctx); b != nil || err != nil {
		return b, err
	}
	failures, prompted := 0, false
	for {
		if err := ctx.Err(); err != nil {
			return nil, cn.pollErr(-1, err)
		}
		if err := cn.acquire(ctx); err != nil {
			return nil, cn.pollErr(-1, err)
		}
		t, wait, err := cn.step(ctx, &prompted)
		if t == nil {
			cn.releaseOp()
		} else {
			var b *Batch
			b, wait, err = cn.collect(ctx, t)
			if b != nil {
				return b, nil
			}
		}
		switch {
		case err != nil:
			if ctx.Err() != nil || errors.Is(err, ErrClosed) || !Retriable(err) {
				return nil, err
			}
			failures++
			if err := cn.pause(ctx, failures); err != nil {
				return nil, cn.pollErr(-1, err)
			}
		case wait >= 0:
			failures = 0
			if err := cn.waitFor(ctx, wait); err != nil {
				return nil, cn.pollErr(-1, err)
			}
		default:
			failures = 0
		}
	}
}

func (cn *Consumer) pollErr(partition int64, err error) error {
	return opErr("poll", res(&cn.cfg.Stream, &cn.cfg.Topic, partition)+" group "+cn.group.String(), err)
}

// step is one turn of Poll, holding cn.op: resync if needed, pick a partition and start
// polling it. It returns the started poll (which now holds cn.op), or how long to wait
// before the next turn (-1: go on at once; 0: until woken), or an error (already
// wrapped); without a poll the caller still holds cn.op.
func (cn *Consumer) step(ctx context.Context, prompted *bool) (*pollTask, time.Duration, error) {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil, 0, cn.pollErr(-1, ErrClosed)
	}
	resync := cn.needSync
	if cur := cn.link.current(); cur == nil || cur.epoch != cn.syncEpoch {
		resync = true
	}
	cn.mu.Unlock()
	if resync {
		if err := cn.sync(ctx); err != nil {
			return nil, 0, cn.pollErr(-1, err)
		}
	}
	pk := cn.pick()
	if pk.st == nil && pk.none && !*prompted && cn.sinceSync() >= min(idleSyncGap, cn.c.cfg.syncEvery()) {
		// Nothing to poll: a partition may have been handed over since the last sync.
		*prompted = true
		if err := cn.sync(ctx); err != nil {
			return nil, 0, cn.pollErr(-1, err)
		}
		pk = cn.pick()
	}
	if pk.st == nil {
		return nil, pk.wait, nil
	}
	t, err := cn.launch(pk)
	return t, 0, err
}

// picked is pick's answer.
type picked struct {
	p        uint32
	st       *partState // nil: nothing ready
	strategy wire.PollingStrategy
	gen      uint64
	seeks    uint64        // st.seeks when picked
	wait     time.Duration // with st nil: how long until one is ready (0 = until woken)
	none     bool          // with st nil: no partition owned and unpaused
}

// pick chooses the next partition to poll, round-robin, and where to start.
func (cn *Consumer) pick() picked {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	now := time.Now()
	out := picked{none: true}
	n := len(cn.assigned)
	for i := range n {
		idx := (cn.rr + i) % n
		p := cn.assigned[idx]
		if cn.paused[p] {
			continue
		}
		out.none = false
		st := cn.parts[p]
		if d := st.emptyUntil.Sub(now); d > 0 {
			if out.wait == 0 || d < out.wait {
				out.wait = d
			}
			continue
		}
		cn.rr = idx + 1
		out.p, out.st, out.gen, out.seeks, out.strategy = p, st, cn.gen, st.seeks, wire.PollNext()
		if st.hasPos {
			out.strategy = wire.PollOffset(st.next)
		}
		return out
	}
	return out
}

// waitFor sleeps d (0 = until an assignment change, Resume, Seek or the heartbeat).
func (cn *Consumer) waitFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		d = cn.c.cfg.heartbeat
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cn.wake:
	case <-cn.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// pause backs off after the n-th consecutive failure.
func (cn *Consumer) pause(ctx context.Context, n int) error {
	d := cn.c.cfg.reconnInitial << min(n, 6)
	return cn.waitFor(ctx, min(d, cn.c.cfg.reconnMax))
}

// Commit stores offset as the group's offset of partition (StoreConsumerOffset on the
// member connection). Errors: wire.ErrNotFound (ResourceNotFound) if the member does not
// own the partition; wire.ErrInvalidOffset beyond the partition's end; ErrClosed.
func (cn *Consumer) Commit(ctx context.Context, partition uint32, offset uint64) error {
	if cn.isClosed() {
		return opErr("commit", res(&cn.cfg.Stream, &cn.cfg.Topic, int64(partition)), ErrClosed)
	}
	req := wire.StoreConsumerOffsetRequest{Consumer: wire.Consumer{Kind: wire.ConsumerGroup, ID: cn.group},
		Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Partition: wire.PartitionID(partition), Offset: offset, Ack: wire.AckQuorum}
	if err := cn.c.simple(ctx, cn.link, req, true, nil); err != nil {
		return opErr("commit", res(&cn.cfg.Stream, &cn.cfg.Topic, int64(partition))+" group "+cn.group.String(), err)
	}
	return nil
}

func (cn *Consumer) isClosed() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.closed
}

// Pause stops polling partition until Resume (backpressure). It survives re-assignment.
func (cn *Consumer) Pause(partition uint32) {
	cn.mu.Lock()
	cn.paused[partition] = true
	cn.mu.Unlock()
}

// Resume undoes Pause.
func (cn *Consumer) Resume(partition uint32) {
	cn.mu.Lock()
	delete(cn.paused, partition)
	cn.mu.Unlock()
	cn.signal()
}

// Seek sets the local next offset of an owned partition (e.g. to redeliver after a
// failed batch); the next poll of it starts there. A batch of it kept by a cancelled
// Poll, or still being polled, is discarded. No effect on partitions not owned.
func (cn *Consumer) Seek(partition uint32, next uint64) {
	cn.mu.Lock()
	if st := cn.parts[partition]; st != nil {
		st.next, st.hasPos, st.emptyUntil = next, true, time.Time{}
		st.seeks++
		if cn.kept != nil && cn.kept.batch.Partition == partition {
			cn.c.putBuf(cn.kept)
			cn.kept = nil
		}
	}
	cn.mu.Unlock()
	cn.signal()
}

// Assignment returns the current generation and the owned partitions (sorted).
func (cn *Consumer) Assignment() (generation uint64, partitions []uint32) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.gen, slices.Clone(cn.assigned)
}

// Events returns assignment changes (buffered, 256; an event that does not fit is
// dropped and logged, so also check Batch.Generation). Closed by Close.
//
// Order: an event is reported after every batch polled before it (those have a lower
// Batch.Generation) and before any batch polled under it. An event that revokes the
// partition of the batch Poll returned last is held back until Poll is called again (a
// caller that records each batch before its next Poll therefore never sees the
// revocation before the batch it has in hand; later events queue behind it);
// Assignment reflects it at once. Batches of a revoked partition polled before its
// revocation are still to be handled and committed: the server keeps the partition
// pending revocation with this member until the group's stored offset covers them.
func (cn *Consumer) Events() <-chan AssignmentEvent { return cn.events }

// Close leaves the group (bounded by ctx; skipped if ctx has already ended), closes the
// connection and ends the heartbeat. Idempotent; Poll then returns ErrClosed.
func (cn *Consumer) Close(ctx context.Context) error {
	cn.closeMu.Lock()
	defer cn.closeMu.Unlock()
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil
	}
	cn.closed = true
	cn.cancel()
	cn.mu.Unlock()
	<-cn.hbDone
	var err error
	if ctx.Err() == nil && cn.link.current() != nil {
		req := wire.LeaveConsumerGroupRequest{Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Group: cn.group}
		if e := cn.c.call(ctx, cn.link, req, false, nil); e != nil && !errors.Is(e, wire.ErrConsumerGroupMemberNotFound) && !errors.Is(e, ErrClosed) {
			err = opErr("leave consumer group", res(&cn.cfg.Stream, &cn.cfg.Topic, -1)+" group "+cn.group.String(), e)
		}
	}
	cn.link.close()
	cn.mu.Lock()
	close(cn.events)
	if cn.kept != nil {
		cn.c.putBuf(cn.kept)
		cn.kept = nil
	}
	cn.mu.Unlock()
	cn.c.mu.Lock()
	delete(cn.c.consumers, cn)
	cn.c.mu.Unlock()
	return err
}
