package iceberg

import (
	"context"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// openSink opens a sink on cfg with its own Committer and assigns it parts from 0.
func openSink(t *testing.T, cfg string, parts ...sdk.Partition) (*Sink, *sdktest.Committer) {
	t.Helper()
	c := sdktest.NewCommitter()
	s := New()
	if err := s.Open(context.Background(), sdktest.SinkEnv(t, cfg, c)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.crash() })
	if _, err := s.Assigned(context.Background(), sdktest.Topic, parts); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		c.Assign(p, 0)
	}
	return s, c
}

func flush(t *testing.T, s *Sink) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCommitConflictRetriedOnFreshMetadata: two instances with the same table open, each
// holding metadata the other's commit makes stale. One writing partition 1 while the
// other wrote partition 0 commits on the fresh metadata after the conflict (both land,
// and the snapshot keeps both offsets); two owners of partition 2 during a rebalance,
// both holding offsets 0..9, never both append them: the second finds the range in the
// snapshot inside its commit retry and drops it.
func TestCommitConflictRetriedOnFreshMetadata(t *testing.T) {
	cfg, _ := testConfig(t, "")
	ctx := context.Background()
	p0, p1, p2 := sdktest.Part(0), sdktest.Part(1), sdktest.Part(2)
	a, ca := openSink(t, cfg, p0, p2)
	b, cb := openSink(t, cfg, p1, p2)
	consume := func(s *Sink, c *sdktest.Committer, p sdk.Partition, first, n uint64) {
		t.Helper()
		if err := sdktest.Consume(ctx, s, c, sdktest.Topic, p, sdktest.Messages(p.PartitionID, first, n, nil)); err != nil {
			t.Fatal(err)
		}
	}
	consume(a, ca, p0, 0, 10)
	consume(b, cb, p1, 0, 10)
	consume(a, ca, p2, 0, 10)
	consume(b, cb, p2, 0, 10)
	flush(t, a) // b's metadata is now stale
	flush(t, b) // conflict: reloads, finds p2 0..9 in the table, appends p1 alone
	recs, err := readTable(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	count := map[[2]uint64]int{}
	for _, r := range recs {
		count[[2]uint64{uint64(r.Partition), r.Offset}]++
	}
	for p := range uint64(3) {
		for o := range uint64(10) {
			if n := count[[2]uint64{p, o}]; n != 1 {
				t.Errorf("partition %d offset %d: %d times, want once", p, o, n)
			}
		}
	}
	if len(recs) != 30 {
		t.Errorf("%d rows, want 30", len(recs))
	}
	b.mu.Lock()
	tbl := b.tables["ns.events"].tbl
	b.mu.Unlock()
	got, err := tableOffsets(tbl, []string{offsetKey("test", "stream", "topic", 0), offsetKey("test", "stream", "topic", 1), offsetKey("test", "stream", "topic", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[offsetKey("test", "stream", "topic", 0)] != 9 || got[offsetKey("test", "stream", "topic", 1)] != 9 || got[offsetKey("test", "stream", "topic", 2)] != 9 {
		t.Errorf("the last snapshot's offsets %v, want 9 for each of partitions 0, 1 and 2", got)
	}
	if len(tbl.Metadata().Snapshots()) != 2 {
		t.Errorf("%d snapshots, want 2 (one append per instance)", len(tbl.Metadata().Snapshots()))
	}
}
