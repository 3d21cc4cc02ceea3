package connect

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

var testKey = partitionKey{instance: 7, Partition: sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: 3}}

// TestTrackerValidation: every commit outcome, with the exact state after it.
func TestTrackerValidation(t *testing.T) {
	type step struct {
		offset  uint64
		wantErr error // nil = accepted
	}
	for _, tc := range []struct {
		name          string
		first, last   uint64 // delivered batch
		stored        int64  // -1: nothing stored by the runtime in the test
		steps         []step
		wantPending   int64
		wantCommitted int64
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
		{"resumed partition: out of range", 42, 51, -1, []step{{52, sdk.ErrCommitOutOfRange}}, -1, 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := new(Counters)
			tr := newTracker(testKey, c, 0, nil)
			tr.polledBatch(tc.first, tc.last)
			tr.deliveredBatch(tc.last)
			if tc.stored >= 0 {
				tr.stored(uint64(tc.stored))
			}
			var acc, stale, oor uint64
			for _, s := range tc.steps {
				err := tr.commit(s.offset)
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
			st := tr.state()
			if st.Pending != tc.wantPending || st.Committed != tc.wantCommitted {
				t.Errorf("pending %d committed %d, want %d %d", st.Pending, st.Committed, tc.wantPending, tc.wantCommitted)
			}
			got := c.Snapshot()
			if got.CommitsAccepted != acc || got.CommitsStale != stale || got.CommitsOutOfRange != oor || got.CommitsUnknown != 0 {
				t.Errorf("counters %+v, want accepted %d stale %d out-of-range %d", got, acc, stale, oor)
			}
		})
	}
}

func TestTrackerNothingDelivered(t *testing.T) {
	tr := newTracker(testKey, nil, 0, nil)
	if err := tr.commit(0); !errors.Is(err, sdk.ErrCommitOutOfRange) {
		t.Fatalf("commit before delivery = %v, want ErrCommitOutOfRange", err)
	}
	// Polled but not yet handed to the sink: still out of range.
	tr.polledBatch(0, 9)
	if err := tr.commit(0); !errors.Is(err, sdk.ErrCommitOutOfRange) {
		t.Fatalf("commit of polled, undelivered offset = %v, want ErrCommitOutOfRange", err)
	}
}

func TestTrackerClosed(t *testing.T) {
	tr := newTracker(testKey, nil, 0, nil)
	tr.polledBatch(0, 9)
	tr.deliveredBatch(9)
	if err := tr.commit(4); err != nil {
		t.Fatal(err)
	}
	tr.close()
	if err := tr.commit(9); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit after close = %v, want ErrCommitUnknownPartition", err)
	}
	if tr.resolve(0, 9) {
		t.Fatal("resolve after close succeeded")
	}
	// What was accepted before close is still there for the final flush.
	if off, ok, _ := tr.take(); !ok || off != 4 {
		t.Fatalf("take after close = %d, %t; want 4, true", off, ok)
	}
}

// TestTrackerResolveWaitsForPrefix: a dead-lettered batch in sink_controlled mode must not
// commit past earlier batches the sink has not committed yet.
func TestTrackerResolveWaitsForPrefix(t *testing.T) {
	tr := newTracker(testKey, nil, 0, nil)
	tr.polledBatch(0, 9)
	tr.deliveredBatch(9)
	tr.polledBatch(10, 19)
	tr.deliveredBatch(19)
	tr.polledBatch(20, 29)
	tr.deliveredBatch(29)
	tr.resolve(20, 29) // batch 3 dead-lettered; batches 1 and 2 still buffered in the sink
	if _, ok, _ := tr.take(); ok {
		t.Fatal("resolved batch became pending before the sink committed the batches before it")
	}
	if err := tr.commit(9); err != nil { // the sink flushed batch 1
		t.Fatal(err)
	}
	if off, _, _ := tr.take(); off != 9 {
		t.Fatalf("pending %d, want 9", off)
	}
	if err := tr.commit(19); err != nil { // batch 2: now contiguous with the resolved batch
		t.Fatal(err)
	}
	if off, _, _ := tr.take(); off != 29 {
		t.Fatalf("pending %d, want 29", off)
	}
	if err := tr.commit(25); !errors.Is(err, sdk.ErrCommitStale) {
		t.Fatalf("commit inside the resolved batch = %v, want ErrCommitStale", err)
	}
}

// TestTrackerBackpressure: pause exactly when polled − stored reaches max_uncommitted,
// resume when a store brings it below.
func TestTrackerBackpressure(t *testing.T) {
	tr := newTracker(testKey, nil, 250, nil)
	var pausedAt uint64
	for b := uint64(0); b < 10; b++ {
		if tr.polledBatch(b*100, b*100+99) {
			pausedAt = b*100 + 100
			break
		}
	}
	if pausedAt != 300 {
		t.Fatalf("paused after %d messages, want 300 (ceil(250/100) batches of 100)", pausedAt)
	}
	if got := tr.state().Uncommitted; got != 300 {
		t.Fatalf("uncommitted %d, want 300", got)
	}
	tr.deliveredBatch(299)
	if err := tr.commit(49); err != nil {
		t.Fatal(err)
	}
	if tr.stored(49) { // 250 uncommitted: still at the limit
		t.Fatal("resumed at 250 uncommitted")
	}
	if err := tr.commit(50); err != nil {
		t.Fatal(err)
	}
	if !tr.stored(50) { // 249 < 250
		t.Fatal("not resumed at 249 uncommitted")
	}
	if st := tr.state(); st.Paused || st.Uncommitted != 249 || st.Committed != 50 {
		t.Fatalf("state %+v", st)
	}
}
