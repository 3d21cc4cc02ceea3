package connect

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

var testTopic = sdk.TopicMetadata{Stream: "s", Topic: "t", StreamID: 1, TopicID: 2}

// newTestTable is a partition table for topic testTopic with drain timeout 10 s and
// store backoff 1 ms…2 ms.
func newTestTable(policy commitPolicy, c *Counters) *partitionTable {
	if c == nil {
		c = new(Counters)
	}
	return newPartitionTable(testTopic, policy, 10*time.Second, Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}, c, quietLog)
}

// controlled is the sink_controlled policy with the given store delay and max_uncommitted.
func controlled(delay time.Duration, maxUncommitted uint64) commitPolicy {
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	cfg.Commit.Delay, cfg.Commit.Interval, cfg.Commit.MaxUncommitted = delay, delay, maxUncommitted
	return policyFor(cfg)
}

// deliver registers [first, last] of partition id as polled and delivered.
func deliver(t *testing.T, tbl *partitionTable, id uint32, first, last uint64) *partition {
	t.Helper()
	p, _ := tbl.polled(id, first, last, last)
	if p == nil {
		t.Fatalf("partition %d not in the table", id)
	}
	if !tbl.delivering(p, last) {
		t.Fatalf("partition %d released", id)
	}
	return p
}

func statusOf(t *testing.T, tbl *partitionTable, id uint32) PartitionStatus {
	t.Helper()
	for _, st := range tbl.status() {
		if st.Partition == id {
			return st
		}
	}
	t.Fatalf("partition %d not in the table", id)
	return PartitionStatus{}
}

// TestCommitValidation: every commit outcome, with the exact state after it.
func TestCommitValidation(t *testing.T) {
	type step struct {
		offset  uint64
		wantErr error // nil = accepted
	}
	for _, tc := range []struct {
		name        string
		first, last uint64 // delivered batch
		stored      int64  // -1: nothing stored in the test
		steps       []step
		wantDone    int64
		wantStored  int64
	}{
		{"accept last", 0, 9, -1, []step{{9, nil}}, 9, -1},
		{"accept first", 0, 9, -1, []step{{0, nil}}, 0, -1},
		{"out of range", 0, 9, -1, []step{{10, sdk.ErrCommitOutOfRange}}, -1, -1},
		{"far out of range", 0, 9, -1, []step{{1 << 40, sdk.ErrCommitOutOfRange}}, -1, -1},
		{"duplicate is stale", 0, 9, -1, []step{{5, nil}, {5, sdk.ErrCommitStale}}, 5, -1},
		{"lower is stale", 0, 9, -1, []step{{5, nil}, {4, sdk.ErrCommitStale}}, 5, -1},
		{"higher wins", 0, 9, -1, []step{{3, nil}, {5, nil}, {9, nil}}, 9, -1},
		{"below stored is stale", 0, 9, 4, []step{{4, sdk.ErrCommitStale}, {2, sdk.ErrCommitStale}, {5, nil}}, 5, 4},
		{"resumed partition: before first polled is stale", 42, 51, -1, []step{{41, sdk.ErrCommitStale}, {0, sdk.ErrCommitStale}, {42, nil}}, 42, 41},
		{"resumed partition: out of range", 42, 51, -1, []step{{52, sdk.ErrCommitOutOfRange}}, 41, 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := new(Counters)
			tbl := newTestTable(controlled(time.Hour, 0), c)
			tbl.change(nil, []uint32{3})
			p := deliver(t, tbl, 3, tc.first, tc.last)
			if tc.stored >= 0 {
				if err := tbl.commit(3, uint64(tc.stored)); err != nil {
					t.Fatal(err)
				}
				jobs, _, _ := tbl.nextStores(time.Now().Add(2 * time.Hour))
				if len(jobs) != 1 || jobs[0].offset != uint64(tc.stored) {
					t.Fatalf("jobs %+v", jobs)
				}
				tbl.storeResult(jobs[0], nil, false, false, time.Now())
				*c = Counters{}
			}
			var acc, stale, oor uint64
			for _, s := range tc.steps {
				err := tbl.commit(3, s.offset)
				if !errors.Is(err, s.wantErr) || (s.wantErr == nil) != (err == nil) {
					t.Fatalf("commit(%d) = %v, want %v", s.offset, err, s.wantErr)
				}
				switch {
				case s.wantErr == nil:
					acc++
				case errors.Is(s.wantErr, sdk.ErrCommitStale):
					stale++
				case errors.Is(s.wantErr, sdk.ErrCommitOutOfRange):
					oor++
				}
				if err != nil && !strings.Contains(err.Error(), "partition 3") {
					t.Errorf("error %q does not name the partition", err)
				}
			}
			if st := statusOf(t, tbl, 3); st.Done != tc.wantDone || st.Stored != tc.wantStored {
				t.Errorf("done %d stored %d, want %d %d", st.Done, st.Stored, tc.wantDone, tc.wantStored)
			}
			got := c.Snapshot()
			if got.CommitsAccepted != acc || got.CommitsStale != stale || got.CommitsOutOfRange != oor || got.CommitsUnknown != 0 {
				t.Errorf("counters %+v, want accepted %d stale %d out-of-range %d", got, acc, stale, oor)
			}
			_ = p
		})
	}
}

func TestCommitNothingDelivered(t *testing.T) {
	tbl := newTestTable(controlled(time.Hour, 0), nil)
	if err := tbl.commit(0, 0); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit before assignment = %v, want ErrCommitUnknownPartition", err)
	}
	tbl.change(nil, []uint32{0})
	if err := tbl.commit(0, 0); !errors.Is(err, sdk.ErrCommitOutOfRange) {
		t.Fatalf("commit before delivery = %v, want ErrCommitOutOfRange", err)
	}
	tbl.polled(0, 0, 9, 9) // polled but not yet handed to the sink: still out of range
	if err := tbl.commit(0, 0); !errors.Is(err, sdk.ErrCommitOutOfRange) {
		t.Fatalf("commit of a polled, undelivered offset = %v, want ErrCommitOutOfRange", err)
	}
}

// TestResolveWaitsForPrefix: a dead-lettered batch in sink_controlled mode must not be
// stored past earlier batches the sink has not committed yet.
func TestResolveWaitsForPrefix(t *testing.T) {
	tbl := newTestTable(controlled(time.Hour, 0), nil)
	tbl.change(nil, []uint32{0})
	p := deliver(t, tbl, 0, 0, 9)
	deliver(t, tbl, 0, 10, 19)
	deliver(t, tbl, 0, 20, 29)
	tbl.resolve(p, 20, 29) // batch 3 dead-lettered; batches 1 and 2 still buffered in the sink
	if st := statusOf(t, tbl, 0); st.Done != -1 || st.Pending != 0 {
		t.Fatalf("resolved batch done before the sink committed the batches before it: %+v", st)
	}
	if err := tbl.commit(0, 9); err != nil { // the sink flushed batch 1
		t.Fatal(err)
	}
	if st := statusOf(t, tbl, 0); st.Done != 9 {
		t.Fatalf("done %d, want 9", st.Done)
	}
	if err := tbl.commit(0, 19); err != nil { // batch 2: now contiguous with the resolved batch
		t.Fatal(err)
	}
	if st := statusOf(t, tbl, 0); st.Done != 29 || st.Pending != 30 {
		t.Fatalf("done %d pending %d, want 29 and 30", st.Done, st.Pending)
	}
	if err := tbl.commit(0, 25); !errors.Is(err, sdk.ErrCommitStale) {
		t.Fatalf("commit inside the resolved batch = %v, want ErrCommitStale", err)
	}
}

// TestBackpressure: pause exactly when polled − stored reaches max_uncommitted, resume
// when a store brings it below.
func TestBackpressure(t *testing.T) {
	tbl := newTestTable(controlled(time.Hour, 250), nil)
	tbl.change(nil, []uint32{0})
	var pausedAt uint64
	for b := uint64(0); b < 10; b++ {
		p, pause := tbl.polled(0, b*100, b*100+99, b*100+99)
		tbl.delivering(p, b*100+99)
		if pause {
			pausedAt = b*100 + 100
			break
		}
	}
	if pausedAt != 300 {
		t.Fatalf("paused after %d messages, want 300 (ceil(250/100) batches of 100)", pausedAt)
	}
	if st := statusOf(t, tbl, 0); st.Uncommitted != 300 || !st.Paused {
		t.Fatalf("status %+v, want 300 uncommitted, paused", st)
	}
	store := func(off uint64) bool {
		t.Helper()
		if err := tbl.commit(0, off); err != nil {
			t.Fatal(err)
		}
		jobs, _, _ := tbl.nextStores(time.Now())
		if len(jobs) != 1 || jobs[0].offset != off {
			t.Fatalf("a paused partition's commit is not due at once: %+v", jobs)
		}
		return tbl.storeResult(jobs[0], nil, false, false, time.Now())
	}
	if store(49) { // 250 uncommitted: still at the limit
		t.Fatal("resumed at 250 uncommitted")
	}
	if !store(50) { // 249 < 250
		t.Fatal("not resumed at 249 uncommitted")
	}
	if st := statusOf(t, tbl, 0); st.Paused || st.Uncommitted != 249 || st.Stored != 50 {
		t.Fatalf("status %+v", st)
	}
}

// fakeStores records stores and answers each with fail(partition, offset) (nil = stored).
type fakeStores struct {
	mu    sync.Mutex
	fail  func(partition uint32, offset uint64) error
	calls map[uint32][]uint64 // every attempt
	ok    map[uint32][]uint64 // successful ones
}

func newFakeStores(fail func(uint32, uint64) error) *fakeStores {
	return &fakeStores{fail: fail, calls: map[uint32][]uint64{}, ok: map[uint32][]uint64{}}
}

func (f *fakeStores) store(_ context.Context, _ uint64, p uint32, off uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[p] = append(f.calls[p], off)
	if f.fail != nil {
		if err := f.fail(p, off); err != nil {
			return err
		}
	}
	f.ok[p] = append(f.ok[p], off)
	return nil
}

func (f *fakeStores) get(p uint32) (calls, ok []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.calls[p]...), append([]uint64(nil), f.ok[p]...)
}

// runStoreLoop runs tbl's store loop until the test ends (or the table finishes).
func runStoreLoop(t *testing.T, tbl *partitionTable, f *fakeStores) (done <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	go func() { defer close(ch); tbl.runStores(ctx, f.store) }()
	stop = func() { cancel(); <-ch }
	t.Cleanup(stop)
	return ch, stop
}

// TestStoresCoalesced: commits made before the store delay passes share one store (of
// the highest); a store is never below the last one.
func TestStoresCoalesced(t *testing.T) {
	tbl := newTestTable(controlled(time.Hour, 0), nil)
	tbl.change(nil, []uint32{0})
	deliver(t, tbl, 0, 0, 99)
	for off := uint64(0); off < 100; off += 10 {
		if err := tbl.commit(0, off+9); err != nil {
			t.Fatal(err)
		}
	}
	if jobs, _, _ := tbl.nextStores(time.Now()); len(jobs) != 0 {
		t.Fatalf("stores due before the delay: %+v", jobs)
	}
	jobs, _, _ := tbl.nextStores(time.Now().Add(time.Hour + time.Millisecond))
	if len(jobs) != 1 || jobs[0].offset != 99 {
		t.Fatalf("jobs after the delay %+v, want one store of 99", jobs)
	}
	// In flight: a later commit waits for the store's outcome, never runs beside it.
	deliver(t, tbl, 0, 100, 109)
	if err := tbl.commit(0, 109); err != nil {
		t.Fatal(err)
	}
	if more, _, _ := tbl.nextStores(time.Now().Add(3 * time.Hour)); len(more) != 0 {
		t.Fatalf("a second store of the partition while one is in flight: %+v", more)
	}
	tbl.storeResult(jobs[0], nil, false, false, time.Now())
	next, _, _ := tbl.nextStores(time.Now().Add(3 * time.Hour))
	if len(next) != 1 || next[0].offset != 109 {
		t.Fatalf("after the store: %+v, want 109", next)
	}
}

// TestFailingPartitionDoesNotDelayOthers is the regression test of "one failing
// partition slows the whole topic": the commit loop's single failure counter suppressed
// every partition's prompt stores while one partition's stores failed. Here partition 1's
// stores fail for good-looking transient reasons (backoff up to 1 h), and every commit of
// partition 0 is still stored within the store delay: 50 commits, 50 stores, in order.
func TestFailingPartitionDoesNotDelayOthers(t *testing.T) {
	c := new(Counters)
	tbl := newPartitionTable(testTopic, controlled(time.Millisecond, 0), 10*time.Second, Backoff{Initial: time.Hour, Max: time.Hour}, c, quietLog)
	tbl.change(nil, []uint32{0, 1})
	f := newFakeStores(func(p uint32, _ uint64) error {
		if p == 1 {
			return errors.New("injected: store failed")
		}
		return nil
	})
	runStoreLoop(t, tbl, f)
	deliver(t, tbl, 1, 0, 9)
	if err := tbl.commit(1, 9); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "partition 1's store failed", func() bool { calls, _ := f.get(1); return len(calls) == 1 })
	for i := uint64(0); i < 50; i++ {
		deliver(t, tbl, 0, i*10, i*10+9)
		if err := tbl.commit(0, i*10+9); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, fmt.Sprintf("commit %d of partition 0 stored", i), func() bool {
			_, ok := f.get(0)
			return len(ok) > 0 && ok[len(ok)-1] == i*10+9
		})
	}
	calls0, ok0 := f.get(0)
	calls1, _ := f.get(1)
	if len(ok0) != 50 || len(calls0) != 50 || len(calls1) != 1 {
		t.Fatalf("partition 0: %d stores (%d attempts), partition 1: %d attempts; want 50, 50, 1", len(ok0), len(calls0), len(calls1))
	}
	if st := c.Snapshot(); st.StoreErrors != 1 || st.Committed != 500 || st.StoreLatency.Count != 50 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStoreRefusedIsFinal: a store refused because the partition is not ours any more
// (ResourceNotFound) is attempted once, counted, and releases that partition only: its
// later commits are ErrCommitUnknownPartition; the other partition is stored as usual.
func TestStoreRefusedIsFinal(t *testing.T) {
	c := new(Counters)
	tbl := newTestTable(controlled(time.Millisecond, 0), c)
	tbl.change(nil, []uint32{0, 1})
	f := newFakeStores(func(p uint32, _ uint64) error {
		if p == 1 {
			return fmt.Errorf("store offset: %w", wire.ErrResourceNotFound)
		}
		return nil
	})
	runStoreLoop(t, tbl, f)
	deliver(t, tbl, 0, 0, 9)
	deliver(t, tbl, 1, 0, 9)
	if err := tbl.commit(1, 9); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "partition 1 released", func() bool { return len(tbl.status()) == 1 })
	if err := tbl.commit(1, 9); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit after the refusal: %v, want ErrCommitUnknownPartition", err)
	}
	if err := tbl.commit(0, 9); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "partition 0 stored", func() bool { _, ok := f.get(0); return len(ok) == 1 })
	if calls, _ := f.get(1); len(calls) != 1 {
		t.Fatalf("partition 1: %d store attempts, want exactly 1", len(calls))
	}
	if st := c.Snapshot(); st.StoresRefused != 1 || st.StoreErrors != 0 || st.CommitsUnknown != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDrain: a revoked partition is stored at once (whatever the delay), released once
// everything polled is stored; one that is not committed in time is released at its
// deadline after one last store of what it had; a re-assignment releases the old entry.
func TestDrain(t *testing.T) {
	t.Run("settled", func(t *testing.T) {
		tbl := newTestTable(controlled(time.Hour, 0), nil)
		tbl.change(nil, []uint32{0})
		f := newFakeStores(nil)
		runStoreLoop(t, tbl, f)
		deliver(t, tbl, 0, 0, 9)
		if err := tbl.commit(0, 4); err != nil {
			t.Fatal(err)
		}
		tbl.change([]uint32{0}, nil)
		testkit.WaitFor(t, "the drain stores 4 at once", func() bool { _, ok := f.get(0); return len(ok) == 1 && ok[0] == 4 })
		if st := statusOf(t, tbl, 0); st.State != "draining" {
			t.Fatalf("state %s, want draining", st.State)
		}
		if err := tbl.commit(0, 9); err != nil { // the sink commits the rest while draining
			t.Fatal(err)
		}
		testkit.WaitFor(t, "released once 9 is stored", func() bool { return len(tbl.status()) == 0 })
		if _, ok := f.get(0); len(ok) != 2 || ok[1] != 9 {
			t.Fatalf("stores %v, want [4 9]", ok)
		}
		if err := tbl.commit(0, 9); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
			t.Fatalf("commit after release: %v", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		tbl := newPartitionTable(testTopic, controlled(time.Hour, 0), 50*time.Millisecond, Backoff{Initial: time.Hour, Max: time.Hour}, new(Counters), quietLog)
		tbl.change(nil, []uint32{0})
		deliver(t, tbl, 0, 0, 9)
		if err := tbl.commit(0, 4); err != nil {
			t.Fatal(err)
		}
		tbl.change([]uint32{0}, nil)
		revoked := time.Now()
		jobs, _, _ := tbl.nextStores(revoked)
		if len(jobs) != 1 || jobs[0].offset != 4 || jobs[0].final {
			t.Fatalf("jobs %+v", jobs)
		}
		tbl.storeResult(jobs[0], errors.New("injected"), false, false, revoked) // retried in 1 h…
		if err := tbl.commit(0, 6); err != nil {
			t.Fatal(err)
		}
		at := revoked.Add(time.Second) // …but the drain ends first: one last attempt
		jobs, _, _ = tbl.nextStores(at)
		if len(jobs) != 1 || jobs[0].offset != 6 || !jobs[0].final {
			t.Fatalf("jobs at the deadline %+v, want the final store of 6", jobs)
		}
		tbl.storeResult(jobs[0], nil, false, false, at)
		if n := len(tbl.status()); n != 0 {
			t.Fatalf("%d partitions after the drain deadline, want 0", n)
		}
	})
	t.Run("re-assigned", func(t *testing.T) {
		tbl := newTestTable(controlled(time.Hour, 0), nil)
		tbl.change(nil, []uint32{0})
		old := deliver(t, tbl, 0, 0, 9)
		if err := tbl.commit(0, 4); err != nil {
			t.Fatal(err)
		}
		tbl.change([]uint32{0}, []uint32{0}) // lost and regained: the old entry is void
		if tbl.delivering(old, 9) {
			t.Fatal("a batch of the old assignment is still delivered")
		}
		if jobs, _, _ := tbl.nextStores(time.Now().Add(2 * time.Hour)); len(jobs) != 0 {
			t.Fatalf("the old assignment's commit is still stored: %+v", jobs)
		}
		fresh := deliver(t, tbl, 0, 20, 29)
		if fresh == old {
			t.Fatal("no new entry")
		}
		if err := tbl.commit(0, 15); !errors.Is(err, sdk.ErrCommitStale) {
			t.Fatalf("commit below the new assignment's start: %v, want stale", err)
		}
	})
}

// TestCloseStoresWhatIsDone: after close, commits are refused, what was done is stored at
// once (whatever the delay), and the store loop ends.
func TestCloseStoresWhatIsDone(t *testing.T) {
	tbl := newTestTable(controlled(time.Hour, 0), nil)
	tbl.change(nil, []uint32{0, 1})
	f := newFakeStores(nil)
	done, _ := runStoreLoop(t, tbl, f)
	deliver(t, tbl, 0, 0, 9)
	deliver(t, tbl, 1, 0, 9)
	if err := tbl.commit(0, 7); err != nil {
		t.Fatal(err)
	}
	tbl.close()
	if err := tbl.commit(1, 9); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit after close: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("store loop did not end after close")
	}
	if _, ok := f.get(0); len(ok) != 1 || ok[0] != 7 {
		t.Fatalf("partition 0 stores %v, want [7]", ok)
	}
	if calls, _ := f.get(1); len(calls) != 0 {
		t.Fatalf("partition 1 stores %v, want none (nothing done)", calls)
	}
	if n := len(tbl.status()); n != 0 {
		t.Fatalf("%d partitions after close, want 0", n)
	}
}

// TestStoresNeverGoBackwards: random interleavings of polls, commits, resolutions and
// store outcomes never produce a store at or below an earlier successful one, never store
// an offset that was not delivered, and never let stored pass done.
func TestStoresNeverGoBackwards(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		tbl := newTestTable(controlled(time.Duration(r.IntN(3))*time.Millisecond, 0), nil)
		tbl.change(nil, []uint32{0})
		now := time.Now()
		var next, lastStored uint64
		var inFlight []storeJob
		stored := false
		p := (*partition)(nil)
		for range 300 {
			now = now.Add(time.Millisecond)
			switch r.IntN(5) {
			case 0:
				n := uint64(1 + r.IntN(5))
				p = deliver(t, tbl, 0, next, next+n-1)
				next += n
			case 1:
				if next > 0 {
					_ = tbl.commit(0, uint64(r.IntN(int(next))))
				}
			case 2:
				if p != nil && next > 0 {
					a := uint64(r.IntN(int(next)))
					tbl.resolve(p, a, a+uint64(r.IntN(int(next-a))))
				}
			case 3:
				jobs, _, _ := tbl.nextStores(now)
				inFlight = append(inFlight, jobs...)
			case 4:
				if len(inFlight) > 0 {
					j := inFlight[0]
					inFlight = inFlight[1:]
					if j.offset >= next {
						t.Fatalf("run %d: store of %d, delivered up to %d", run, j.offset, next-1)
					}
					if stored && j.offset <= lastStored {
						t.Fatalf("run %d: store of %d after %d was stored", run, j.offset, lastStored)
					}
					var err error
					if r.IntN(4) == 0 {
						err = errors.New("injected")
					} else {
						stored, lastStored = true, j.offset
					}
					tbl.storeResult(j, err, false, false, now)
				}
			}
			if st := statusOf(t, tbl, 0); st.Stored > st.Done || st.Done > st.Delivered {
				t.Fatalf("run %d: stored %d done %d delivered %d", run, st.Stored, st.Done, st.Delivered)
			}
		}
	}
}

// flowLog records the table's Pause and Resume calls per partition.
type flowLog struct {
	mu     sync.Mutex
	paused map[uint32]bool
	calls  []string
}

func (f *flowLog) Pause(id uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused[id] = true
	f.calls = append(f.calls, fmt.Sprintf("pause %d", id))
}

func (f *flowLog) Resume(id uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.paused, id)
	f.calls = append(f.calls, fmt.Sprintf("resume %d", id))
}

func (f *flowLog) isPaused(id uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused[id]
}

// TestPollAheadFlow: with pollAhead 2 (max_in_flight > 1) a partition's polling pauses
// while two of its polled batches wait for the sink and resumes when one is delivering;
// that resume never undoes the other reasons to stay paused (backpressure, the operator's
// hold), and their ends never undo a pause for waiting batches. Without pollAhead a poll
// pauses nothing.
func TestPollAheadFlow(t *testing.T) {
	tbl := newTestTable(controlled(time.Hour, 250), nil)
	flow := &flowLog{paused: map[uint32]bool{}}
	tbl.flow, tbl.pollAhead = flow, 2
	tbl.change(nil, []uint32{0})
	poll := func(first, last uint64) *partition {
		t.Helper()
		p, _ := tbl.polled(0, first, last, 999)
		if p == nil {
			t.Fatal("partition 0 not in the table")
		}
		return p
	}
	storeDone := func(off uint64) {
		t.Helper()
		if err := tbl.commit(0, off); err != nil {
			t.Fatal(err)
		}
		jobs, _, _ := tbl.nextStores(time.Now())
		if len(jobs) != 1 || jobs[0].offset != off {
			t.Fatalf("the commit of %d is not due at once: %+v", off, jobs)
		}
		tbl.storeResult(jobs[0], nil, false, false, time.Now())
	}
	p := poll(0, 99)
	if flow.isPaused(0) {
		t.Fatal("paused with one batch waiting")
	}
	poll(100, 199)
	if !flow.isPaused(0) {
		t.Fatal("two polled batches waiting for the sink did not pause their partition")
	}
	tbl.delivering(p, 99)
	if flow.isPaused(0) {
		t.Fatal("one of the two is delivering, the partition still paused")
	}
	tbl.delivering(p, 199)

	// Backpressure: the third batch reaches max_uncommitted (300 ≥ 250).
	tbl.delivering(poll(200, 299), 299)
	if !flow.isPaused(0) {
		t.Fatal("delivering resumed a partition paused by backpressure")
	}
	poll(300, 399) // polled before the pause took effect: they wait
	poll(400, 499)
	storeDone(299) // 200 uncommitted: backpressure ends
	if !flow.isPaused(0) {
		t.Fatal("the end of backpressure resumed a partition whose two batches wait")
	}
	// The operator's hold, then a batch delivering: still held; unhold resumes.
	tbl.hold(true)
	tbl.delivering(p, 399)
	if !flow.isPaused(0) {
		t.Fatal("delivering resumed a held partition")
	}
	tbl.hold(false)
	if flow.isPaused(0) {
		t.Fatal("unhold left the partition paused")
	}
	storeDone(399)
	poll(500, 599) // 200 uncommitted; two wait again: 400..499 and 500..599
	tbl.hold(true)
	tbl.hold(false)
	if !flow.isPaused(0) {
		t.Fatal("unhold resumed a partition whose two batches wait")
	}
	tbl.delivering(p, 499)
	if flow.isPaused(0) {
		t.Fatal("delivering one of the two waiting batches left the partition paused")
	}

	plain := newTestTable(controlled(time.Hour, 0), nil)
	pf := &flowLog{paused: map[uint32]bool{}}
	plain.flow = pf
	plain.change(nil, []uint32{0})
	plain.polled(0, 0, 99, 999)
	plain.polled(0, 100, 199, 999)
	plain.polled(0, 200, 299, 999)
	if len(pf.calls) != 0 {
		t.Fatalf("without pollAhead a poll paused or resumed: %v", pf.calls)
	}
}
