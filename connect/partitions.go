package connect

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// A partitionTable owns everything about the offsets of one topic consumer's partitions
// (one sink × stream × topic), from assignment to release: what was polled, handed to
// the sink, done (committed by the sink or resolved by the runtime) and stored in Iggy,
// and when the next store is due. docs/architecture.md ("Who owns which state") draws it.
//
// Every field of the table and of its partitions is guarded by mu, and no method calls
// out of the table while holding it. The writers, and the goroutine each runs on:
//
//   - change: the poll goroutine, from iggy's in-band OnAssignmentChange (assign,
//     revoke → drain, re-assign);
//   - polled: the poll goroutine, for each batch Poll returned;
//   - delivering, resolve: the consume goroutine, around Consume;
//   - commit: any goroutine of the sink (its Committer, a native plugin's commit
//     callback), routed here by stream and topic (sinkRunner.route);
//   - nextStores, storeResult: the store loop (runStores), the only caller of Iggy's
//     offset store, one store in flight per partition at most;
//   - close: the sink runner, once the sink is closed.
//
// A partition leaves the table (released) when its drain settles (everything polled is
// stored) or times out, when it is assigned again, when the server refuses its store for
// good, or when the table finishes after close. After that its commits are refused with
// sdk.ErrCommitUnknownPartition, its batches still queued are not delivered, and what it
// had not stored is redelivered to its next owner.
type partitionTable struct {
	topic        sdk.TopicMetadata
	policy       commitPolicy
	drainTimeout time.Duration
	backoff      Backoff // store retries (Attempts ignored: a store is retried until stop)
	counters     *Counters
	log          *slog.Logger
	wake         chan struct{} // to the store loop; never blocks
	// flow pauses and resumes polling of a partition (the member consumer; nil in unit
	// tests). It is called under mu, so that a pause and the resume that undoes it are
	// applied in the order the table decided them; its methods only take the consumer's
	// own mutex (lock order: partitionTable.mu → iggy Consumer.mu).
	flow interface {
		Pause(partition uint32)
		Resume(partition uint32)
	}

	mu     sync.Mutex
	parts  map[uint32]*partition
	closed bool // the sink stopped: commits refused, everything pending due now
	held   bool // paused by the operator (hold): no partition is polled, whatever its backpressure
	// pollAhead (max_in_flight > 1; 0: off) is how many polled batches of a partition may
	// wait for the sink (polled, not yet delivering) before its polling pauses until one of
	// them is delivering: the one poll loop then polls the partitions that need a batch,
	// not the next one in turn. 2 keeps what one busy partition holds as with
	// max_in_flight = 1 (one in Consume, one waiting, one polled behind it).
	pollAhead int
	// storesEnded: the store loop ended; a trace handed over now is never stored.
	storesEnded bool
}

// partition is one assignment of one partition. Offsets are "next" positions (offset+1),
// so 0 means none; stored starts at the first polled offset (everything before it was
// stored before this assignment: Iggy's Next strategy resumes at stored+1). Invariants:
// stored ≤ done ≤ delivered ≤ polled, and stored never decreases.
type partition struct {
	id        uint32
	life      uint64 // the member's incarnation of the topic (assignmentChange.life)
	state     partState
	started   bool
	polled    uint64
	delivered uint64
	done      uint64 // everything before it is committed or resolved
	stored    uint64
	resolved  []span // runtime resolutions beyond done, sorted, disjoint
	paused    bool   // backpressure: polled − stored reached max_uncommitted
	waiting   int    // pollAhead: polled batches not delivering yet (polling paused at pollAhead)
	lastBatch uint64 // size of the last polled batch
	current   uint64 // the partition's last offset + 1, as the last poll reported it (0: unknown)
	// consuming counts its batches in Consume; idle is closed when it drops to 0 (a
	// rewound partition's sink is told only once none of its old batches is in Consume).
	consuming int
	idle      chan struct{}

	// Store scheduling (store loop). due is when done-1 must be stored (zero: nothing
	// due); doneAt is when the oldest unstored done offset became done.
	due, doneAt time.Time
	inFlight    bool
	failures    int        // consecutive failed stores
	storeErr    *LastError // the last failed store's error while failures > 0
	drainUntil  time.Time

	// traces are the open traces of polled batches not stored yet, in poll order (only
	// when traces are on; tracing.go).
	traces []*batchTrace
}

type partState uint8

const (
	partOwned    partState = iota // polled and delivered
	partDraining                  // revoked: no longer polled; its last commits are still stored
	partReleased                  // out of the table
)

func (s partState) String() string { return [...]string{"owned", "draining", "released"}[s] }

// span is an inclusive offset range the runtime resolved (dead-letter, skip, success).
type span struct{ first, last uint64 }

func newPartitionTable(topic sdk.TopicMetadata, policy commitPolicy, drainTimeout time.Duration, backoff Backoff, c *Counters, log *slog.Logger) *partitionTable {
	return &partitionTable{topic: topic, policy: policy, drainTimeout: drainTimeout, backoff: backoff, counters: c,
		log: log, wake: make(chan struct{}, 1), parts: map[uint32]*partition{}}
}

func (t *partitionTable) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// change applies an assignment change (revoked first). A revoked partition drains: it is
// not polled any more, the batches of it already polled are still delivered, every
// commit of it is stored at once, and it is released when everything polled is stored or
// after drainTimeout (after_polling has nothing to store: released at once). A partition
// assigned while it is still in the table (re-assigned before its drain ended, or lost
// and regained) replaces the old entry, whose unstored offsets are dropped: the new
// assignment polls from the group's stored offset, so they are redelivered.
func (t *partitionTable) change(revoked, assigned []uint32) {
	t.apply(assignmentChange{revoked: revoked, assigned: assigned})
}

// apply is change for a whole report. When the topic was replaced (deleted and created
// again), every entry of the old topic is released at once, draining ones too: nothing
// of it is stored (its offsets do not describe the new topic's messages), and its
// batches still queued are not delivered. A rewound partition's entry (purged: its
// offsets describe messages that are gone) is released the same way; apply returns what
// closes once none of those entries' batches is in Consume any more.
func (t *partitionTable) apply(ch assignmentChange) (busy []<-chan struct{}) {
	now := time.Now()
	revoked, assigned := ch.revoked, ch.assigned
	t.mu.Lock()
	draining := 0
	if ch.replaced != nil {
		for _, p := range t.parts {
			if p.life != ch.life {
				if p.state == partOwned {
					t.counters.Revoked.Add(1)
				}
				t.releaseLocked(p, "topic replaced")
			}
		}
	}
	for _, r := range ch.rewound {
		p := t.parts[r.partition]
		if p == nil || p.life == ch.life {
			continue
		}
		if p.state == partOwned {
			t.counters.Revoked.Add(1)
		}
		if p.idle != nil {
			busy = append(busy, p.idle)
		}
		t.releaseLocked(p, "rewound")
	}
	for _, id := range revoked {
		p := t.parts[id]
		if p == nil || p.state != partOwned {
			continue
		}
		t.counters.Revoked.Add(1)
		if t.policy.serverStores {
			t.releaseLocked(p, "revoked")
			continue
		}
		p.state, p.drainUntil = partDraining, now.Add(t.drainTimeout)
		draining++
		if !t.settleLocked(p) {
			t.scheduleLocked(p, now)
		}
	}
	for _, id := range assigned {
		if old := t.parts[id]; old != nil {
			t.log.Warn("partition assigned again before its earlier assignment was released; what that one had not stored is redelivered",
				"partition", id, "state", old.state, "polled", int64(old.polled)-1, "stored", int64(old.stored)-1)
			t.releaseLocked(old, "assigned again")
		}
		t.parts[id] = &partition{id: id, life: ch.life}
		if t.held && t.flow != nil {
			t.flow.Pause(id) // a held sink polls no partition, newly assigned ones included
		}
	}
	t.mu.Unlock()
	t.log.Info("assignment changed", "revoked", revoked, "assigned", assigned, "draining", draining)
	t.signal()
	return busy
}

// polled records that [first, last] of partition id was polled and returns its entry, or
// nil when the table does not track it (released: the batch must not be delivered).
// pause reports that the partition reached max_uncommitted: it is paused (flow) until
// its stores catch up (storeResult resumes it).
func (t *partitionTable) polled(id uint32, first, last, current uint64) (p *partition, pause bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p = t.parts[id]
	if p == nil || p.state != partOwned {
		return nil, false
	}
	if !p.started {
		p.started, p.stored, p.done = true, first, first
	}
	p.polled = max(p.polled, last+1)
	p.current = max(p.current, current+1, last+1)
	p.lastBatch = last - first + 1
	if t.pollAhead > 0 {
		p.waiting++
		if p.waiting == t.pollAhead && t.flow != nil {
			t.flow.Pause(id)
		}
	}
	if t.policy.serverStores { // stored by the server with the poll
		n := p.polled - p.stored
		p.delivered, p.done, p.stored = p.polled, p.polled, p.polled
		t.counters.Committed.Add(n)
		return p, false
	}
	if t.policy.maxUncommitted > 0 && !p.paused && p.polled-p.stored >= t.policy.maxUncommitted {
		p.paused, pause = true, true
		if t.flow != nil {
			t.flow.Pause(id)
		}
	}
	t.scheduleLocked(p, now) // urgency may have changed
	return p, pause
}

// pollableLocked says whether nothing holds p's polling back: the operator's hold,
// backpressure, or pollAhead batches of it waiting for the sink.
func (t *partitionTable) pollableLocked(p *partition) bool {
	return !t.held && !p.paused && (t.pollAhead == 0 || p.waiting < t.pollAhead)
}

// delivering records that offsets up to last are handed to the sink (commits of them
// become valid); false if p was released meanwhile (then the batch is not delivered).
func (t *partitionTable) delivering(p *partition, last uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.state == partReleased || t.closed {
		return false
	}
	p.consuming++
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	p.delivered = max(p.delivered, last+1)
	if p.waiting > 0 {
		p.waiting--
		if p.waiting == t.pollAhead-1 && t.flow != nil && t.pollableLocked(p) {
			t.flow.Resume(p.id)
		}
	}
	return true
}

// consumed records that a batch delivering returned true for is out of Consume.
func (t *partitionTable) consumed(p *partition) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.consuming--; p.consuming == 0 {
		close(p.idle)
		p.idle = nil
	}
}

// resolve marks [first, last] of p done by the runtime (commitPolicy.resolves). It
// becomes done once everything before first is, so a resolution never moves past a
// batch the sink has not committed yet.
func (t *partitionTable) resolve(p *partition, first, last uint64) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.state == partReleased || t.closed {
		return
	}
	p.delivered = max(p.delivered, last+1)
	if last+1 <= p.done {
		return
	}
	i, _ := slices.BinarySearchFunc(p.resolved, first, func(s span, f uint64) int { return cmp.Compare(s.first, f) })
	p.resolved = slices.Insert(p.resolved, i, span{first, last})
	p.absorbLocked()
	t.scheduleLocked(p, now)
}

// commit is the sink's commit of offset on partition id: validate, record, schedule. It
// never blocks. Errors wrap sdk.ErrCommitUnknownPartition (not in the table, or the sink
// stopped), sdk.ErrCommitOutOfRange (not delivered yet) or sdk.ErrCommitStale (at or
// below what is done).
func (t *partitionTable) commit(id uint32, offset uint64) error {
	now := time.Now()
	t.mu.Lock()
	err := t.commitLocked(id, offset, now)
	t.mu.Unlock()
	if err != nil {
		t.counters.reject(err)
		return err
	}
	t.counters.CommitsAccepted.Add(1)
	return nil
}

func (t *partitionTable) commitLocked(id uint32, offset uint64, now time.Time) error {
	where := func() string {
		return fmt.Sprintf("stream %d topic %d partition %d offset %d", t.topic.StreamID, t.topic.TopicID, id, offset)
	}
	p := t.parts[id]
	switch {
	case t.closed:
		return fmt.Errorf("%w: %s: the sink stopped", sdk.ErrCommitUnknownPartition, where())
	case p == nil:
		return fmt.Errorf("%w: %s", sdk.ErrCommitUnknownPartition, where())
	case offset >= p.delivered && p.delivered == 0:
		return fmt.Errorf("%w: %s: nothing delivered yet", sdk.ErrCommitOutOfRange, where())
	case offset >= p.delivered:
		return fmt.Errorf("%w: %s: delivered up to %d", sdk.ErrCommitOutOfRange, where(), p.delivered-1)
	case offset+1 <= p.done:
		return fmt.Errorf("%w: %s: committed up to %d", sdk.ErrCommitStale, where(), int64(p.done)-1)
	}
	p.done = offset + 1
	p.absorbLocked()
	t.scheduleLocked(p, now)
	return nil
}

// absorbLocked moves resolved spans that now touch done into it.
func (p *partition) absorbLocked() {
	n := 0
	for _, s := range p.resolved {
		if s.first > p.done {
			break
		}
		p.done = max(p.done, s.last+1)
		n++
	}
	p.resolved = p.resolved[n:]
}

// urgent reports whether p's done offset must be stored now rather than after the
// delay: the partition is paused, draining or the sink stopped; or it is close to
// max_uncommitted — within three batches of it (the one being consumed, the queued one
// and the one being polled) and at least half of it used. Storing then, and not earlier,
// keeps a partition whose sink commits steadily from ever pausing.
func (t *partitionTable) urgent(p *partition) bool {
	if p.paused || p.state == partDraining || t.closed {
		return true
	}
	m := t.policy.maxUncommitted
	if m == 0 {
		return false
	}
	threshold := (m + 1) / 2
	if room := 3 * p.lastBatch; room < m {
		threshold = max(threshold, m-room)
	}
	return p.polled-min(p.polled, p.stored) >= threshold
}

// scheduleLocked sets when p's done offset is due to be stored: storeDelay after it was
// done, or now if urgent. A store already in flight gets the rest after it (storeResult).
func (t *partitionTable) scheduleLocked(p *partition, now time.Time) {
	if p.done <= p.stored {
		return
	}
	if p.doneAt.IsZero() {
		p.doneAt = now
	}
	if p.inFlight || p.failures > 0 { // storeResult sets the next due time
		return
	}
	due := p.doneAt.Add(t.policy.storeDelay)
	if t.urgent(p) {
		due = now
	}
	if p.due.IsZero() || due.Before(p.due) {
		p.due = due
		t.signal()
	}
}

// settleLocked releases a draining partition once everything polled is stored; it
// reports whether it did.
func (t *partitionTable) settleLocked(p *partition) bool {
	if p.state != partDraining || p.stored < p.polled || p.inFlight {
		return false
	}
	t.releaseLocked(p, "drained")
	return true
}

// releaseLocked takes p out of the table (see partitionTable). Idempotent.
func (t *partitionTable) releaseLocked(p *partition, why string) {
	if p.state == partReleased {
		return
	}
	for _, bt := range p.traces {
		bt.unstored()
	}
	p.traces = nil
	wasDraining := p.state == partDraining
	p.state = partReleased
	if t.parts[p.id] == p {
		delete(t.parts, p.id)
	}
	attrs := []any{"partition", p.id, "why", why, "polled", int64(p.polled) - 1, "delivered", int64(p.delivered) - 1,
		"done", int64(p.done) - 1, "stored", int64(p.stored) - 1}
	switch {
	case p.stored < p.polled && wasDraining:
		t.log.Warn("revoked partition released before everything polled was stored; the rest goes to its next owner", attrs...)
	case wasDraining:
		t.log.Info("revoked partition released", attrs...)
	default:
		t.log.Debug("partition released", attrs...)
	}
}

// hold pauses (on) or resumes (off) the polling of every partition of the table, for
// the operator's pause: the member keeps its assignment and heartbeats, and what was
// polled is still delivered and stored. Resuming leaves partitions paused by
// backpressure, or with pollAhead batches waiting for the sink, paused.
func (t *partitionTable) hold(on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == on {
		return
	}
	t.held = on
	if t.flow == nil {
		return
	}
	for id, p := range t.parts {
		switch {
		case on:
			t.flow.Pause(id)
		case t.pollableLocked(p):
			t.flow.Resume(id)
		}
	}
}

// isHeld reports whether the operator's pause is on.
func (t *partitionTable) isHeld() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}

// close refuses every later commit and makes everything done due now: the store loop
// stores it (retrying until its context ends) and then ends. Called once the sink is
// closed (a sink may commit while closing).
func (t *partitionTable) close() {
	now := time.Now()
	t.mu.Lock()
	t.closed = true
	for _, p := range t.parts {
		p.failures, p.storeErr = 0, nil // retry at once what was backing off
		p.due = time.Time{}
		t.scheduleLocked(p, now)
	}
	t.mu.Unlock()
	t.signal()
}

// PartitionStatus is one partition of a sink topic as Status reports it. Offsets are -1
// when none.
type PartitionStatus struct {
	Stream, Topic string
	Partition     uint32
	State         string // owned or draining; PartitionNotOwned (SinkPartitions only)
	Polled        int64
	Delivered     int64
	Done          int64 // committed by the sink or resolved by the runtime
	Stored        int64
	Pending       uint64 // done but not stored yet (messages)
	Uncommitted   uint64 // polled but not stored yet (messages)
	Paused        bool
	// Current is the partition's last offset as Iggy reported it with the last batch
	// polled (-1 before any); Lag is Current − Stored (messages not yet stored).
	// Runtime.SinkPartitions sets both, and Stored, from Iggy too (the newer wins).
	Current int64
	Lag     uint64
	// StoreFailures counts the partition's consecutive failed offset stores (0 once one
	// succeeds) and StoreError is the last one's error (nil then). A store that fails
	// for any reason but "not yours any more" or "behind" (a full disk on the server,
	// a lost connection) keeps the partition: the store is retried with backoff and the
	// partition is polled up to max_uncommitted, then paused until stores succeed.
	StoreFailures int
	StoreError    *LastError
	// FromServer: Current, Stored and Lag include what Iggy answered
	// (Runtime.SinkPartitions); false for the table's view alone (Status).
	FromServer bool
	// ReadAt is when the read of Iggy behind FromServer's figures began (they are at
	// least that old); zero when not FromServer.
	ReadAt time.Time
}

func (t *partitionTable) status() []PartitionStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]PartitionStatus, 0, len(t.parts))
	for _, p := range t.parts {
		out = append(out, PartitionStatus{Stream: t.topic.Stream, Topic: t.topic.Topic, Partition: p.id, State: p.state.String(),
			Polled: int64(p.polled) - 1, Delivered: int64(p.delivered) - 1, Done: int64(p.done) - 1, Stored: int64(p.stored) - 1,
			Pending: p.done - p.stored, Uncommitted: p.polled - p.stored, Paused: p.paused || t.held,
			Current: int64(p.current) - 1, Lag: p.current - min(p.current, p.stored),
			StoreFailures: p.failures, StoreError: copyError(p.storeErr)})
	}
	slices.SortFunc(out, func(a, b PartitionStatus) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

func copyError(le *LastError) *LastError {
	if le == nil {
		return nil
	}
	c := *le
	return &c
}

// traceBatch hands the table a polled batch's trace, whose store half ends when a store
// covers the batch's last offset (storedTracesLocked) or the partition leaves the table.
func (t *partitionTable) traceBatch(p *partition, bt *batchTrace) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.state == partReleased || t.storesEnded {
		bt.unstored()
		return
	}
	p.traces = append(p.traces, bt)
}

// storedTracesLocked ends the store half of every traced batch of p that the store of offset
// (from start to end) covered; t.mu held.
func (t *partitionTable) storedTracesLocked(p *partition, offset uint64, start, end time.Time) {
	n := 0
	for _, bt := range p.traces {
		if bt.last > offset {
			break
		}
		bt.storedAt(start, end, offset)
		n++
	}
	if n > 0 {
		p.traces = slices.Delete(p.traces, 0, n)
	}
}

// dropTraces ends the store half of every traced batch still in the table: the store
// loop ends, and nothing more is stored by this member.
func (t *partitionTable) dropTraces() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.storesEnded = true
	for _, p := range t.parts {
		for _, bt := range p.traces {
			bt.unstored()
		}
		p.traces = nil
	}
}
