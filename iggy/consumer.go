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
	// (after_polling, at-most-once). Default false: store with StoreOffset.
	AutoCommit bool
	// OnAssignmentChange, when set, is told every change of the partitions the member
	// owns, in band: Poll calls it on the caller's goroutine, before it polls anything
	// under the new assignment and never while the caller holds a batch Poll returned
	// (so the first call, with every partition assigned, comes from the first Poll).
	// Nothing is dropped or reordered: changes that happened while the caller was not
	// polling are reported together at its next Poll. It must not block or call the
	// Consumer's Poll; other methods (StoreOffset, Pause, Assignment) are allowed.
	OnAssignmentChange func(AssignmentChange)
}

// AssignmentChange is one report of OnAssignmentChange; handle Revoked before Assigned.
//
// Revoked partitions are no longer polled. Batches of them that Poll returned before the
// report were polled while they were owned: hand them on and store their offsets as
// usual (the server keeps a revoked partition pending revocation with its previous owner
// until the group's stored offset covers what the group polled, or for its rebalancing
// timeout, 30 s by default, and accepts that owner's stores meanwhile).
//
// Assigned partitions are polled from the group's stored offset + 1 (or 0).
//
// A partition in both lists was lost and regained since the last report: another member
// owned it in between (the member noticed because the group's stored offset changed
// under it), so whatever the caller still holds of its earlier assignment is void, and
// StoreOffset refuses offsets below what the other member stored (ErrOffsetBehind).
//
// Replaced is set when the topic was deleted and created again since the last report
// (see TopicReplacement): then Revoked lists every partition of the old topic and
// Assigned the new assignment, each polled from the new group's stored offset (0 for a
// new group). Nothing the caller holds of the old topic may be stored: its offsets do not
// describe the new topic's messages (StoreOffsetIn refuses them with ErrTopicReplaced).
// Incarnation is the Consumer's incarnation of the topic the Assigned partitions belong
// to (see Consumer.Topic), for StoreOffsetIn.
//
// Rewound lists the partitions found gone back to an earlier offset since the last report
// (purged: see PartitionRewind); each is also in Revoked and Assigned, and its new
// assignment starts at offset 0. Nothing the caller holds of its earlier assignment may
// be stored (StoreOffsetIn refuses it with ErrPartitionRewound).
type AssignmentChange struct {
	Revoked, Assigned []uint32 // sorted
	Replaced          *TopicReplacement
	Rewound           []PartitionRewind
	Incarnation       uint64
}

// Batch is what Consumer.Poll returns: messages of one partition, in offset order.
type Batch struct {
	Partition     uint32
	CurrentOffset uint64 // the partition's last offset, from the poll reply
	// Sent is when the poll request that returned the batch was sent (a trace's poll
	// span starts there, not at the Poll call, which may have waited idle for long).
	Sent time.Time
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

// Consumer is one member of a consumer group on its own connection. See NewConsumer.
// Poll must not be called concurrently with itself; every other method is safe for
// concurrent use (including with Poll).
type Consumer struct {
	c       *Client
	cfg     ConsumerConfig
	group   wire.Identifier
	link    *link
	wake    chan struct{}
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	hbDone  chan struct{}
	closeMu sync.Mutex
	// op is held across one poll, assignment sync or offset store round trip (and the
	// handling of its reply), so the member connection never has two in flight, an
	// assignment never changes while a poll reply is being handled, and a store never
	// races with the sync that learns its partition moved.
	op chan struct{}

	pollHook func(partition uint32) // test hook: a poll reply with messages arrived

	mu        sync.Mutex
	closed    bool
	gen       uint64 // local generation: +1 on every change of parts
	serverGen uint64 // the group generation of the last sync
	assigned  []uint32
	parts     map[uint32]*partState // owned now; a new *partState per assignment
	former    map[uint32]*partState // revoked from this member, for StoreOffset's floor
	reported  map[uint32]*partState // what OnAssignmentChange last reported
	dirty     bool                  // parts changed since the last report
	paused    map[uint32]bool
	syncEpoch uint64
	needSync  bool
	// The consumed topic as the last join read it, how many times it was found
	// replaced, and the replacement not reported yet (replaced.go).
	topic       TopicIdentity
	topicKnown  bool
	incarnation uint64
	replaced    *TopicReplacement
	// incarnation also grows when a partition is found rewound (rewind.go): topicLife is
	// its value at the last replacement, rewoundAt[p] at p's last rewind (offsets of an
	// earlier life are not stored), rewinds the rewinds not reported yet.
	topicLife uint64
	rewoundAt map[uint32]uint64
	rewinds   []PartitionRewind
	lastSync  time.Time // last successful sync
	rr        int
	// task is the poll in flight (nil if none); kept is a batch it returned that no Poll
	// has delivered yet (its Poll call had returned on ctx's end).
	task     *pollTask
	kept     *pollBuf
	outlived int // polls that outlived their Poll call (for tests)
}

// idleSyncGap is the minimum spacing of the syncs a Poll with nothing to poll makes at once.
const idleSyncGap = 100 * time.Millisecond

// partState is one assignment of one partition to this member: a new value each time the
// partition is assigned, so its identity tells assignments apart.
type partState struct {
	next       uint64
	hasPos     bool
	emptyUntil time.Time
	seeks      uint64 // Seek calls: a poll started before one does not move next
	// The group's stored offset as this member knows it: read when the partition was
	// assigned, then what the member stored itself (StoreOffset, or an AutoCommit poll).
	// StoreOffset never goes below it.
	stored      uint64
	storedKnown bool
	// unsure is a store whose outcome is unknown (its ctx ended mid-request): the
	// server may hold it instead of stored.
	unsure    uint64
	unsureSet bool
	// mark is the message expected at next−1 (the last one handed out, or the one a
	// checked Seek named): polls start there, one message early, to notice a partition
	// that went back (rewind.go).
	mark msgMark
	prev msgMark // the mark before the last batch, for a Seek back to its first offset
	// streaming: the last poll brought new messages, so the next one carries the overlap
	// message itself; after an empty poll the next starts at next and, only if it brings
	// messages, checks mark with a poll of one message (idle polls stay empty replies).
	streaming bool
	checkDue  time.Time // an idle partition's poll carries the overlap again from then on
}

// storedRead is the group's stored offset of a partition as a sync read it.
type storedRead struct {
	offset uint64
	found  bool
}

// matches reports whether the group's stored offset r is what this member knows: if
// not, someone else stored it while the member was not looking.
func (st *partState) matches(r storedRead) bool {
	if !r.found {
		return !st.storedKnown
	}
	return (st.storedKnown && r.offset == st.stored) || (st.unsureSet && r.offset == st.unsure)
}

// NewConsumer joins cfg.Group (creating it if missing) on a dedicated connection and
// syncs its assignment. A goroutine re-syncs the assignment every WithAssignmentSync
// interval (1 s by default; at least every WithHeartbeat), even while the caller is
// busy, so the member learns moved partitions promptly and never looks stale; a sync
// never overlaps a poll or store of this Consumer. The member reconnects, logs in,
// rejoins and resyncs transparently (membership is new after a reconnect; positions of
// partitions still owned are kept). ctx bounds only the setup.
//
// A sync reads the group's stored offset of every partition newly assigned and, when
// the group's generation changed, of every partition kept: a kept partition whose
// stored offset is not what this member knows was owned by another member in between,
// and is reported revoked and assigned again (see AssignmentChange).
//
// Every join reads the topic's id and creation time: a topic deleted and created again
// under the same name (its group, membership and offsets went with the old one, so the
// member rejoins) is a new topic, polled from the new group's stored offset (see
// AssignmentChange.Replaced and StoreOffsetIn). A partition that went back to an earlier
// offset (purged) is noticed by its polls, which check that the message before the
// position is still the one handed out, and starts afresh at 0 (see
// AssignmentChange.Rewound).
//
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
		wake:     make(chan struct{}, 1),
		hbDone:   make(chan struct{}),
		op:       make(chan struct{}, 1),
		parts:    map[uint32]*partState{},
		former:   map[uint32]*partState{},
		reported: map[uint32]*partState{},
		paused:   map[uint32]bool{},
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
	cn.mu.Unlock()
}

// Poll returns the next batch from an owned, unpaused partition (round-robin over the
// partitions), blocking until one is available or ctx ends. Positions are local: the
// first poll of a partition (or after it was re-assigned) uses Next (the group's stored
// offset + 1, or 0); later polls continue from the offset after the last delivered
// message, whatever was stored. Connection failures are handled inside (reconnect,
// rejoin, resync); Poll returns ctx's error, ErrClosed, or errors that retrying will not
// fix (e.g. the topic was deleted).
//
// Assignment changes are reported in band through ConsumerConfig.OnAssignmentChange,
// which Poll calls before it polls under the new assignment: a batch Poll returns was
// always polled under an assignment already reported, and changes made after its poll
// are reported by the next Poll call, after the caller is done with the batch.
//
// Cancellation: ctx ending never costs the membership or a batch. A poll request already
// sent is not abandoned: Poll returns ctx's error at once, the request completes in the
// background (bounded by WithRequestTimeout) on the member connection, and a batch it
// returns is kept and returned first by the next Poll call, even one whose ctx has
// already ended; nothing is skipped or delivered twice. (Abandoning the reply instead
// would lose the batch although the server counts it as polled — with AutoCommit it
// would even be stored — and a revoked partition would stay pending revocation for the
// rebalancing timeout.) Other member requests cancelled mid-flight (an assignment sync,
// StoreOffset) have their late replies discarded by the connection, which stays open: a
// caller-side timeout never drops the member. Seek of the kept batch's partition
// discards it (the caller chose a new position).
//
// Rebalance: a batch the server returned is never thrown away, even when the partition
// is revoked meanwhile (the server counts its messages as polled by the group and keeps
// a revoked partition pending revocation with this member until the group's stored
// offset covers them, or for its rebalancing timeout). The caller hands it on as usual
// and stores its offset after the revocation too.
func (cn *Consumer) Poll(ctx context.Context) (*Batch, error) {
	if b, err := cn.resume(ctx); b != nil || err != nil {
		return b, err
	}
	failures, prompted := 0, false
	for {
		cn.report()
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
// before the next turn (-1: go on at once, e.g. to report a change first; 0: until
// woken), or an error (already wrapped); without a poll the caller still holds cn.op.
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
	if pk.st == nil && pk.none && !pk.unreported && !*prompted && cn.sinceSync() >= min(idleSyncGap, cn.c.cfg.syncEvery()) {
		// Nothing to poll: a partition may have been handed over since the last sync.
		*prompted = true
		if err := cn.sync(ctx); err != nil {
			return nil, 0, cn.pollErr(-1, err)
		}
		pk = cn.pick()
	}
	if pk.unreported {
		return nil, -1, nil // report the change before polling under it
	}
	if pk.st == nil {
		return nil, pk.wait, nil
	}
	t, err := cn.launch(pk)
	return t, 0, err
}

// picked is pick's answer.
type picked struct {
	p          uint32
	st         *partState // nil: nothing ready
	strategy   wire.PollingStrategy
	seeks      uint64        // st.seeks when picked
	life       uint64        // cn.incarnation when picked
	mark       msgMark       // set: the poll checks mark (rewind.go)
	inline     bool          // with mark: the poll starts at mark.offset, one message of overlap
	wait       time.Duration // with st nil: how long until one is ready (0 = until woken)
	none       bool          // with st nil: no partition owned and unpaused
	unreported bool          // with st nil: the assignment changed since the last report
}

// pick chooses the next partition to poll, round-robin, and where to start. It picks
// nothing while a change is unreported: a poll is only ever launched under the
// assignment the caller was told of.
func (cn *Consumer) pick() picked {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.dirty && cn.cfg.OnAssignmentChange != nil {
		return picked{unreported: true}
	}
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
		out.p, out.st, out.seeks, out.life, out.strategy = p, st, st.seeks, cn.incarnation, wire.PollNext()
		switch {
		case st.hasPos && st.mark.set && st.mark.offset+1 == st.next && (st.streaming || !now.Before(st.checkDue)):
			out.strategy, out.mark, out.inline = wire.PollOffset(st.mark.offset), st.mark, true
		case st.hasPos && st.mark.set && st.mark.offset+1 == st.next:
			out.strategy, out.mark = wire.PollOffset(st.next), st.mark
		case st.hasPos:
			out.strategy = wire.PollOffset(st.next)
		}
		return out
	}
	return out
}

// report calls OnAssignmentChange with what changed since the last report, if anything.
// Poll's goroutine only; no lock is held while the hook runs.
func (cn *Consumer) report() {
	cn.mu.Lock()
	if !cn.dirty {
		cn.mu.Unlock()
		return
	}
	cn.dirty = false
	ch := AssignmentChange{Replaced: cn.replaced, Rewound: cn.rewinds, Incarnation: cn.incarnation}
	cn.replaced, cn.rewinds = nil, nil
	for p, st := range cn.reported {
		if cn.parts[p] != st {
			ch.Revoked = append(ch.Revoked, p)
			delete(cn.reported, p)
		}
	}
	for p, st := range cn.parts {
		if cn.reported[p] != st {
			ch.Assigned = append(ch.Assigned, p)
			cn.reported[p] = st
		}
	}
	cn.mu.Unlock()
	if (len(ch.Revoked)+len(ch.Assigned) == 0 && ch.Replaced == nil) || cn.cfg.OnAssignmentChange == nil {
		return
	}
	slices.Sort(ch.Revoked)
	slices.Sort(ch.Assigned)
	cn.cfg.OnAssignmentChange(ch)
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

// Pause stops polling partition until Resume (backpressure), or until the partition is
// revoked (a later assignment of it starts unpaused).
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
// Poll, or still being polled, is discarded. No effect on partitions not owned, nor on an
// assignment not reported yet (the caller's position belongs to the one it knows of).
func (cn *Consumer) Seek(partition uint32, next uint64) {
	cn.seek(partition, next, msgMark{})
}

// SeekChecked is Seek to next for a caller that knows the server timestamp (µs) of the
// message at next−1 (a sink that keeps its positions in its target, with the timestamp
// of the last message it wrote): the next poll starts at next−1 and checks that this
// message is still there, so a partition purged since is found rewound (see
// AssignmentChange.Rewound) instead of resumed past new messages. With next 0 or
// timestamp 0 it is Seek.
func (cn *Consumer) SeekChecked(partition uint32, next, timestamp uint64) {
	var m msgMark
	if next > 0 && timestamp != 0 {
		m = msgMark{set: true, offset: next - 1, timestamp: timestamp}
	}
	cn.seek(partition, next, m)
}

// seek moves an owned partition to next, expecting mark at next−1 (unset: the mark of
// the position, if the member knows it: the last batch's or the one before it).
func (cn *Consumer) seek(partition uint32, next uint64, mark msgMark) {
	cn.mu.Lock()
	if st := cn.parts[partition]; st != nil && (cn.cfg.OnAssignmentChange == nil || cn.reported[partition] == st) {
		if !mark.set {
			for _, k := range []msgMark{st.mark, st.prev} {
				if k.set && k.offset+1 == next {
					mark = k
					break
				}
			}
		}
		st.next, st.hasPos, st.emptyUntil, st.mark, st.prev = next, true, time.Time{}, mark, msgMark{}
		st.seeks++
		if cn.kept != nil && cn.kept.batch.Partition == partition {
			cn.c.putBuf(cn.kept)
			cn.kept = nil
		}
	}
	cn.mu.Unlock()
	cn.signal()
}

// Resync syncs the assignment now, as the background sync does every
// WithAssignmentSync, lock-step with this member's polls and stores; the next Poll
// reports what changed. Errors: connection errors, ErrClosed, ctx's error.
func (cn *Consumer) Resync(ctx context.Context) error {
	if err := cn.acquire(ctx); err != nil {
		return opErr("sync consumer group", res(&cn.cfg.Stream, &cn.cfg.Topic, -1)+" group "+cn.group.String(), err)
	}
	defer cn.releaseOp()
	if err := cn.sync(ctx); err != nil {
		return opErr("sync consumer group", res(&cn.cfg.Stream, &cn.cfg.Topic, -1)+" group "+cn.group.String(), err)
	}
	return nil
}

// Assignment returns the local generation (1 after the first sync, +1 on every change
// of the owned partitions) and the owned partitions (sorted), as of the last sync:
// possibly ahead of what OnAssignmentChange has reported.
func (cn *Consumer) Assignment() (generation uint64, partitions []uint32) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.gen, slices.Clone(cn.assigned)
}

// Close leaves the group (bounded by ctx; skipped if ctx has already ended, then the
// server drops the member when the connection closes), closes the connection and ends
// the heartbeat. Idempotent; Poll then returns ErrClosed.
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
