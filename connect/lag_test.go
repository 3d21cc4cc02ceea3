package connect

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
)

// TestLagOfASinkThatNeverStarted: a sink whose built-in does not exist never starts (no
// partition table), yet SinkPartitions and Offsets report every partition of its two
// topics with Iggy's current offset, nothing stored and the lag of everything waiting
// (before, the sink had no partitions at all and Offsets was the only place with a lag).
// Sixteen concurrent callers and Offsets cost one read per topic; a restart forgets the
// reads, so the next caller reads again.
func TestLagOfASinkThatNeverStarted(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Topic("s", "u", 1)
	env.Fill("s", "t", 0, 5, nil)
	env.Fill("s", "t", 1, 3, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Path = "builtin:missing"
	cfg.Streams[0].Topics = []string{"t", "u"}
	rt := env.start(cfg, newRecSink())
	defer stopRuntime(t, rt)
	rt.lag.maxAge = time.Hour // no read expires during the test: every read is counted

	st, _ := rt.Connector(KindSink, "rec")
	if st.State != StateError || len(st.Partitions) != 0 {
		t.Fatalf("status %s with %d partitions in tables, want error and none", st.State, len(st.Partitions))
	}
	want := []PartitionStatus{
		{Stream: "s", Topic: "t", Partition: 0, State: PartitionNotOwned, Polled: -1, Delivered: -1, Done: -1, Stored: -1, Current: 4, Lag: 5, FromServer: true},
		{Stream: "s", Topic: "t", Partition: 1, State: PartitionNotOwned, Polled: -1, Delivered: -1, Done: -1, Stored: -1, Current: 2, Lag: 3, FromServer: true},
		{Stream: "s", Topic: "u", Partition: 0, State: PartitionNotOwned, Polled: -1, Delivered: -1, Done: -1, Stored: -1, Current: -1, Lag: 0, FromServer: true},
	}
	var wg sync.WaitGroup
	got := make([][]PartitionStatus, 16)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() { got[i], errs[i] = rt.SinkPartitions(bg(t), st) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || !slices.Equal(got[i], want) {
			t.Fatalf("caller %d: %+v, %v; want %+v", i, got[i], errs[i], want)
		}
	}
	offs, err := rt.Offsets(bg(t), "rec")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 3 || offs[0] != (PartitionOffsets{Stream: "s", Topic: "t", Partition: 0, Current: 4, Stored: -1, Lag: 5}) {
		t.Fatalf("offsets %+v", offs)
	}
	if n := rt.lag.reads.Load(); n != 2 {
		t.Fatalf("%d reads of Iggy for 17 callers over 2 topics, want 2", n)
	}

	if err := rt.Restart(bg(t), KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	env.Fill("s", "u", 0, 2, nil)
	parts, err := rt.SinkPartitions(bg(t), st)
	if err != nil || len(parts) != 3 || parts[2].Current != 1 || parts[2].Lag != 2 {
		t.Fatalf("after a restart and 2 messages to s/u: %+v, %v", parts, err)
	}
	if n := rt.lag.reads.Load(); n != 4 {
		t.Fatalf("%d reads after a restart, want 4 (the restart forgot both topics)", n)
	}
}
