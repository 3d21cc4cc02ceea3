package connect

import (
	"errors"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

func TestRegistryRemoval(t *testing.T) {
	r := newRegistry()
	c := new(Counters)
	p := sdk.Partition{StreamID: 1, TopicID: 1, PartitionID: 0}
	tr := newTracker(partitionKey{3, p}, c, 0, nil)
	if err := r.add(tr); err != nil {
		t.Fatal(err)
	}
	if err := r.add(newTracker(partitionKey{3, p}, c, 0, nil)); err == nil {
		t.Fatal("duplicate add accepted")
	}
	tr.polledBatch(0, 9)
	tr.deliveredBatch(9)
	cm := r.committer(3, c)
	if err := cm.Commit(p, 5); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Another instance (a restarted sink) and another partition are not owned.
	if err := r.committer(4, c).Commit(p, 6); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("other instance: %v", err)
	}
	if err := cm.Commit(sdk.Partition{StreamID: 1, TopicID: 1, PartitionID: 1}, 6); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("other partition: %v", err)
	}
	if got := r.remove(partitionKey{3, p}); got != tr {
		t.Fatal("remove returned another tracker")
	}
	if err := cm.Commit(p, 9); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit after removal = %v, want ErrCommitUnknownPartition", err)
	}
	// Changes nothing: the pending offset is still 5.
	if off, ok, _ := tr.take(); !ok || off != 5 {
		t.Fatalf("pending after rejected commit = %d, %t; want 5", off, ok)
	}
	// A stale reference to the removed tracker is closed too.
	if err := tr.commit(9); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit through removed tracker = %v", err)
	}
	if s := c.Snapshot(); s.CommitsAccepted != 1 || s.CommitsUnknown != 4 {
		t.Fatalf("counters %+v, want 1 accepted, 4 unknown", s)
	}
	if r.len() != 0 {
		t.Fatalf("registry holds %d entries", r.len())
	}
}
