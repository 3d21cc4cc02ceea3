package sdk_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// An at-least-once sink writes every batch it is given, without Fresh: Positions follows
// the runtime's delivery order. After the partition's messages were purged the runtime
// delivers it again from 0; the commit of what was written since must go out (a keeper
// of the highest offset committed nothing until the new messages passed the purged
// ones, 99 here). A redelivery's commit is refused as stale, which is no error.
func TestPositionsFollowDeliveryOrderWithoutFresh(t *testing.T) {
	for _, durableAtOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable_at_once=%v", durableAtOnce), func(t *testing.T) {
			c := sdktest.NewCommitter()
			k := sdk.NewPositions(sdktest.SinkEnv(t, nil, c), nil)
			p := sdktest.Part(0)
			write := func(first, n uint64) {
				t.Helper()
				batch := sdktest.Messages(0, first, n, nil)
				c.Deliver(p, batch)
				last := batch[len(batch)-1].Offset
				if durableAtOnce {
					if err := k.Durable(p, last); err != nil {
						t.Fatalf("durable %d: %v", last, err)
					}
					return
				}
				k.Written(p, last)
				if err := k.Synced(); err != nil {
					t.Fatalf("synced after %d: %v", last, err)
				}
			}
			c.Assign(p, 0)
			write(0, 100)
			write(90, 10) // a redelivery: stale, no error, nothing more committed
			if got := len(c.Commits()); got != 1 {
				t.Fatalf("%d commits after the redelivery, want 1: %v", got, c.Commits())
			}
			// The purge: the runtime starts the partition again at 0.
			c.Assign(p, 0)
			write(0, 10)
			if off, ok := c.Committed(p); !ok || off != 9 {
				t.Fatalf("after the purge committed %d (%v), want 9", off, ok)
			}
			write(10, 5)
			if off, _ := c.Committed(p); off != 14 {
				t.Fatalf("committed %d, want 14", off)
			}
			if bad := c.OutOfRange(); len(bad) != 0 {
				t.Fatalf("commits of offsets never delivered: %v", bad)
			}
		})
	}
}

// A partition the runtime refused as not owned, then gave back, is committed again by a
// sink that never calls Fresh: its next batch starts the bookkeeping afresh.
func TestPositionsReassignedWithoutFresh(t *testing.T) {
	c := sdktest.NewCommitter()
	k := sdk.NewPositions(sdktest.SinkEnv(t, nil, c), nil)
	p := sdktest.Part(1)
	c.Assign(p, 0)
	c.Deliver(p, sdktest.Messages(1, 0, 5, nil))
	k.Written(p, 4)
	c.Revoke(p)
	if err := k.Synced(); err != nil { // refused as not owned: forgotten, no error
		t.Fatal(err)
	}
	if k.Owned(p) {
		t.Fatal("owned after the refusal")
	}
	c.Assign(p, 3)
	c.Deliver(p, sdktest.Messages(1, 3, 4, nil))
	k.Written(p, 6)
	if err := k.Synced(); err != nil {
		t.Fatal(err)
	}
	if off, ok := c.Committed(p); !ok || off != 6 {
		t.Fatalf("committed %d (%v) after the reassignment, want 6", off, ok)
	}
	c.Deliver(p, sdktest.Messages(1, 7, 2, nil))
	c.Revoke(p)
	if err := k.Durable(p, 8); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("durable on a revoked partition: %v", err)
	}
	c.Assign(p, 7)
	c.Deliver(p, sdktest.Messages(1, 7, 2, nil))
	if err := k.Durable(p, 8); err != nil {
		t.Fatalf("durable after the reassignment: %v", err)
	}
	if off, _ := c.Committed(p); off != 8 {
		t.Fatalf("committed %d after the second reassignment, want 8", off)
	}
}

// A sync's Mark holds what was written when it began: what is written during the sync
// waits for the next one.
func TestPositionsMarkCommitsOnlyWhatTheSyncCovered(t *testing.T) {
	c := sdktest.NewCommitter()
	k := sdk.NewPositions(sdktest.SinkEnv(t, nil, c), nil)
	p0, p1 := sdktest.Part(0), sdktest.Part(1)
	c.Deliver(p0, sdktest.Messages(0, 0, 10, nil))
	c.Deliver(p1, sdktest.Messages(1, 0, 10, nil))
	k.Written(p0, 4)
	mark := k.Mark()
	k.Written(p0, 9) // during the sync
	k.Written(p1, 2)
	if err := mark.Synced(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Commits()); got != "[{{1 1 0} 4 <nil>}]" {
		t.Fatalf("commits after the first sync: %s", got)
	}
	if err := k.Synced(); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(p0); off != 9 {
		t.Fatalf("p0 committed %d, want 9", off)
	}
	if off, _ := c.Committed(p1); off != 2 {
		t.Fatalf("p1 committed %d, want 2", off)
	}
	if err := k.Mark().Synced(); err != nil || len(c.Commits()) != 3 {
		t.Fatalf("a sync with nothing new: %v, commits %v", err, c.Commits())
	}
}

// With Fresh the offsets only go up, as before: a late call below an earlier one (an
// upload that finished after a later one) changes nothing.
func TestPositionsWithFreshOnlyGoUp(t *testing.T) {
	c := sdktest.NewCommitter()
	k := sdk.NewPositions(sdktest.SinkEnv(t, nil, c), nil)
	p := sdktest.Part(0)
	c.Assign(p, 0)
	batch := sdktest.Messages(0, 0, 20, nil)
	c.Deliver(p, batch)
	k.Fresh(p, batch)
	k.Written(p, 19)
	k.Written(p, 9)
	if err := k.Synced(); err != nil {
		t.Fatal(err)
	}
	if err := k.Durable(p, 9); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Commits(), len(c.Refused())); got != "[{{1 1 0} 19 <nil>}] 0" {
		t.Fatalf("commits, refused: %s", got)
	}
}

// A sync that follows the runtime going back under what was written (a purge noticed
// before the sync, nothing delivered since) is refused once, not at every later sync; the
// next batch is committed.
func TestPositionsOutOfRangeNotAskedAgainWithoutFresh(t *testing.T) {
	c := sdktest.NewCommitter()
	k := sdk.NewPositions(sdktest.SinkEnv(t, nil, c), nil)
	p := sdktest.Part(0)
	c.Assign(p, 0)
	c.Deliver(p, sdktest.Messages(0, 0, 100, nil))
	k.Written(p, 99)
	c.Assign(p, 0) // the purge: nothing delivered from 0 yet
	if err := k.Synced(); !errors.Is(err, sdk.ErrCommitOutOfRange) {
		t.Fatalf("first sync: %v, want out of range", err)
	}
	if err := k.Synced(); err != nil || len(c.Refused()) != 1 {
		t.Fatalf("second sync: %v, refused %v", err, c.Refused())
	}
	c.Deliver(p, sdktest.Messages(0, 0, 5, nil))
	k.Written(p, 4)
	if err := k.Synced(); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(p); off != 4 {
		t.Fatalf("committed %d, want 4", off)
	}
}
