package connect

import (
	"fmt"
	"sync"

	"github.com/ferryio/ferry/sdk"
)

// partitionKey names one partition of one sink instance: the registry key.
type partitionKey struct {
	instance uint32
	sdk.Partition
}

func (k partitionKey) String() string {
	return fmt.Sprintf("instance %d stream %d topic %d partition %d", k.instance, k.StreamID, k.TopicID, k.PartitionID)
}

// span is an inclusive offset range the runtime resolved on its own (dead_letter, skip).
type span struct{ first, last uint64 }

// tracker is the commit state of one partition of one sink instance.
//
// Offsets are kept as "next" positions (offset+1) so that 0 means "none": polled, delivered,
// committed and pending are each one past the highest offset polled, handed to the sink,
// stored in Iggy, and accepted but not yet stored. committed starts at the first polled
// offset: everything before it was stored before this assignment (Iggy's Next strategy
// resumes at stored+1).
//
// All methods are safe for concurrent use and never block on anything but t.mu, which is
// never held across a call out of the tracker.
type tracker struct {
	key            partitionKey
	counters       *Counters
	maxUncommitted uint64 // 0 = unbounded
	wake           func() // non-blocking signal to the commit loop; may be nil
	flushEach      bool   // after_consuming: flush soon after every resolved batch

	mu        sync.Mutex
	closed    bool
	started   bool
	polled    uint64
	delivered uint64
	committed uint64
	pending   uint64
	resolved  []span // sorted by first, disjoint
	paused    bool
	lastBatch uint64 // size of the last polled batch
	// draining: the partition was revoked and is kept open until everything polled is
	// stored (see topicRunner.handleAssignment); settled is closed when it is.
	draining bool
	settled  chan struct{}
}

func newTracker(key partitionKey, c *Counters, maxUncommitted uint64, wake func()) *tracker {
	if c == nil {
		c = new(Counters)
	}
	return &tracker{key: key, counters: c, maxUncommitted: maxUncommitted, wake: wake}
}

// polledBatch records that [first, last] was polled for this partition and reports whether
// the partition must now be paused: polled − committed ≥ maxUncommitted. A paused partition
// is reported once; [tracker.stored] reports when to resume it.
func (t *tracker) polledBatch(first, last uint64) (pause bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started {
		t.started = true
		t.committed = first
	}
	t.polled = max(t.polled, last+1)
	t.lastBatch = last - first + 1
	if t.maxUncommitted > 0 && !t.paused && t.polled-t.committed >= t.maxUncommitted {
		t.paused = true
		return true
	}
	return false
}

// deliveredBatch records that offsets up to last were handed to the sink: commits up to
// last become valid.
func (t *tracker) deliveredBatch(last uint64) {
	t.mu.Lock()
	t.delivered = max(t.delivered, last+1)
	t.mu.Unlock()
}

// commit is the sink's Commit: validate, record, signal.
func (t *tracker) commit(offset uint64) error {
	t.mu.Lock()
	err := t.validateLocked(offset)
	if err != nil {
		t.mu.Unlock()
		t.counters.reject(err)
		return err
	}
	t.pending = offset + 1
	t.absorbLocked()
	signal := t.flushEach || t.urgentLocked()
	t.mu.Unlock()
	t.counters.CommitsAccepted.Add(1)
	if signal && t.wake != nil {
		t.wake()
	}
	return nil
}

func (t *tracker) validateLocked(offset uint64) error {
	if t.closed {
		return fmt.Errorf("%w: %s offset %d", sdk.ErrCommitUnknownPartition, t.key, offset)
	}
	if offset >= t.delivered {
		if t.delivered == 0 {
			return fmt.Errorf("%w: %s offset %d: nothing delivered yet", sdk.ErrCommitOutOfRange, t.key, offset)
		}
		return fmt.Errorf("%w: %s offset %d: delivered up to %d", sdk.ErrCommitOutOfRange, t.key, offset, t.delivered-1)
	}
	if floor := max(t.committed, t.pending); offset+1 <= floor {
		return fmt.Errorf("%w: %s offset %d: committed up to %d", sdk.ErrCommitStale, t.key, offset, int64(floor)-1)
	}
	return nil
}

// resolve marks [first, last] as handled by the runtime (a successful batch in
// after_consuming mode, a dead-lettered or skipped batch). The range becomes pending as soon
// as everything before first is committed or pending, so a runtime resolution never commits
// past a batch the sink has not committed yet. It returns false when the partition is closed.
func (t *tracker) resolve(first, last uint64) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	t.delivered = max(t.delivered, last+1)
	if last+1 > max(t.committed, t.pending) {
		i := len(t.resolved)
		for i > 0 && t.resolved[i-1].first > first {
			i--
		}
		t.resolved = append(t.resolved, span{})
		copy(t.resolved[i+1:], t.resolved[i:])
		t.resolved[i] = span{first, last}
		t.absorbLocked()
	}
	signal := t.flushEach || t.urgentLocked()
	t.mu.Unlock()
	if signal && t.wake != nil {
		t.wake()
	}
	return true
}

// absorbLocked moves resolved spans that now touch the committed/pending prefix into pending.
func (t *tracker) absorbLocked() {
	n := 0
	for _, s := range t.resolved {
		if floor := max(t.committed, t.pending); s.first <= floor {
			if s.last+1 > floor {
				t.pending = s.last + 1
			}
			n++
			continue
		}
		break
	}
	t.resolved = t.resolved[n:]
	if t.pending <= t.committed {
		t.pending = 0
	}
}

// take returns the offset to store, if any is pending, and whether it must be stored now
// rather than on the interval: the partition is paused by backpressure, or half its
// max_uncommitted budget is used (storing early keeps it from pausing at all). A
// flushEach partition (after_consuming) wants a store soon after every batch; the commit
// loop paces those (see commitLoop.minGap).
func (t *tracker) take() (offset uint64, ok, urgent bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending <= t.committed {
		return 0, false, false
	}
	return t.pending - 1, true, t.urgentLocked()
}

// urgentLocked reports whether pending commits must be stored without waiting for the
// interval: the partition is paused, or close to max_uncommitted — within three batches
// of it (the batch being consumed, the queued one and the one being polled), and at least
// half of it used. Storing then, and not earlier, keeps a partition whose sink commits
// steadily from ever pausing with as few stores as possible (every store takes a turn on
// the member connection, which the polls need).
func (t *tracker) urgentLocked() bool {
	if t.paused || t.draining {
		return true
	}
	if t.maxUncommitted == 0 {
		return false
	}
	threshold := (t.maxUncommitted + 1) / 2
	if room := 3 * t.lastBatch; room < t.maxUncommitted {
		threshold = max(threshold, t.maxUncommitted-room)
	}
	return t.polled-min(t.polled, t.committed) >= threshold
}

// stored records that offset was written to Iggy. It reports whether a paused partition
// may resume.
func (t *tracker) stored(offset uint64) (resume bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if offset+1 > t.committed {
		if t.started {
			t.counters.Committed.Add(offset + 1 - t.committed)
		}
		t.committed = offset + 1
		t.started = true
	}
	if t.pending <= t.committed {
		t.pending = 0
	}
	t.absorbLocked()
	t.settleLocked()
	if t.paused && (t.maxUncommitted == 0 || t.polled-t.committed < t.maxUncommitted) {
		t.paused = false
		return true
	}
	return false
}

// beginDrain marks a revoked partition that stays open for its last commits: from now on
// every accepted commit is urgent (stored at once), and the returned channel is closed as
// soon as everything polled is stored (committed ≥ polled, so delivered ≤ committed too).
// Idempotent.
func (t *tracker) beginDrain() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.settled == nil {
		t.draining = true
		t.settled = make(chan struct{})
		t.settleLocked()
	}
	return t.settled
}

// settleLocked closes settled once a draining partition has stored everything it polled.
func (t *tracker) settleLocked() {
	if !t.draining || t.committed < t.polled {
		return
	}
	select {
	case <-t.settled:
	default:
		close(t.settled)
	}
}

// close makes every later commit fail with ErrCommitUnknownPartition; what is pending stays
// pending for the final flush.
func (t *tracker) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// trackerState is a snapshot for tests, status and logs; offsets are -1 when none.
type trackerState struct {
	Polled, Delivered, Committed, Pending int64
	Uncommitted                           uint64
	Paused, Closed, Draining              bool
}

func (t *tracker) state() trackerState {
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := int64(-1)
	if t.pending > t.committed {
		pending = int64(t.pending) - 1
	}
	return trackerState{
		Polled: int64(t.polled) - 1, Delivered: int64(t.delivered) - 1, Committed: int64(t.committed) - 1,
		Pending: pending, Uncommitted: t.polled - min(t.polled, t.committed), Paused: t.paused, Closed: t.closed, Draining: t.draining,
	}
}
