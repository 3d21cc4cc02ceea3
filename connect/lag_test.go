package connect

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
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
		for j := range got[i] { // when the read began: checked, then left out of the comparison
			if got[i][j].ReadAt.IsZero() {
				t.Fatalf("caller %d, partition %d: no ReadAt", i, j)
			}
			got[i][j].ReadAt = time.Time{}
		}
		if errs[i] != nil || !slices.Equal(got[i], want) {
			t.Fatalf("caller %d: %+v, %v; want %+v", i, got[i], errs[i], want)
		}
	}
	offs, err := rt.Offsets(bg(t), "rec")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 3 || offs[0].ReadAt.IsZero() {
		t.Fatalf("offsets %+v", offs)
	}
	offs[0].ReadAt = time.Time{}
	if offs[0] != (PartitionOffsets{Stream: "s", Topic: "t", Partition: 0, Current: 4, Stored: -1, Lag: 5}) {
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

// heldAdmin is the runtime's own offsetAdmin with a hook: while hold is set, a read
// announces itself on entered and waits for release (or for the reader's close).
type heldAdmin struct {
	offsetAdmin
	hold     atomic.Bool
	entered  chan struct{}
	released chan struct{}
}

func (h *heldAdmin) groupOffsets(ctx context.Context, group, stream, topic string) ([]groupPartition, error) {
	if h.hold.Load() {
		h.entered <- struct{}{}
		select {
		case <-h.released:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.offsetAdmin.groupOffsets(ctx, group, stream, topic)
}

// TestLagServesTheKeptReadDuringARefresh: a caller never waits for a refresh. When the
// kept read is older than a second, callers get it at once, with the time it began
// (ReadAt), while one new read runs; once that read ends they get its figures. Only a
// topic with no read kept (after a restart forgot it) makes callers wait, and then at most
// lagWait: they get errLagReading, and the read goes on for the next callers. Stop ends a
// read held in flight, which is not kept: a caller after the stop reads Iggy itself. Before, every caller past the second waited for the whole read
// (5 s and an error on a topic of 10,000 partitions).
func TestLagServesTheKeptReadDuringARefresh(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 0, 5, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Path = "builtin:missing" // never runs: the figures are Iggy's alone
	rt := env.start(cfg, newRecSink())
	stopped := false
	defer func() {
		if !stopped {
			stopRuntime(t, rt)
		}
	}()
	held := &heldAdmin{offsetAdmin: rt.lag.adm, entered: make(chan struct{}), released: make(chan struct{})}
	rt.lag.adm = held
	st, _ := rt.Connector(KindSink, "rec")
	current := func(parts []PartitionStatus) int64 { return parts[0].Current }

	first, err := rt.SinkPartitions(bg(t), st)
	if err != nil || len(first) != 2 || current(first) != 4 {
		t.Fatalf("first read: %+v, %v", first, err)
	}
	readAt := first[0].ReadAt
	env.Fill("s", "t", 0, 3, nil) // current offset 7 from now on

	rt.lag.maxAge = 0 // every kept read is due from now on
	held.hold.Store(true)
	for i := range 3 {
		got, err := rt.SinkPartitions(bg(t), st)
		if err != nil || current(got) != 4 || !got[0].ReadAt.Equal(readAt) || got[0].Lag != 5 {
			t.Fatalf("call %d during the refresh: %+v, %v; want the kept read (current 4, read at %v)", i, got, err, readAt)
		}
		if i == 0 {
			<-held.entered // exactly one refresh started; the later calls start none
		}
	}
	held.hold.Store(false)
	held.released <- struct{}{}
	testkit.WaitFor(t, "the refresh to end", func() bool { return rt.lag.reads.Load() == 2 })
	rt.lag.maxAge = time.Hour
	got, err := rt.SinkPartitions(bg(t), st)
	if err != nil || current(got) != 7 || got[0].Lag != 8 || !got[0].ReadAt.After(readAt) {
		t.Fatalf("after the refresh: %+v, %v; want current 7, lag 8, read after %v", got, err, readAt)
	}

	// A restart forgets the kept read: the next caller must wait, for lagWait at most.
	if err := rt.Restart(bg(t), KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	rt.lag.wait = 20 * time.Millisecond
	held.hold.Store(true)
	parts, err := rt.SinkPartitions(bg(t), st)
	if want := "stream s topic t: the offsets are still being read from Iggy (read for 20ms so far)"; err == nil || err.Error() != want || !errors.Is(err, errLagReading) {
		t.Fatalf("a first read held: %v, want %s", err, want)
	}
	if len(parts) != 0 {
		t.Fatalf("a first read held: partitions %+v, want none (the sink owns none)", parts)
	}
	<-held.entered
	// Stop ends the read held in flight (its context ends), and waits for it.
	stopRuntime(t, rt)
	stopped = true
	if n := rt.lag.reads.Load(); n != 3 {
		t.Fatalf("%d reads after the stop, want 3", n)
	}
	// After the stop a caller reads in its own goroutine (an exit summary still gets
	// Iggy's figures); the read Stop ended was not kept.
	held.hold.Store(false)
	got, err = rt.SinkPartitions(bg(t), st)
	if err != nil || len(got) != 2 || current(got) != 7 {
		t.Fatalf("after the stop: %+v, %v; want current 7", got, err)
	}
	if n := rt.lag.reads.Load(); n != 4 {
		t.Fatalf("%d reads after a call after the stop, want 4", n)
	}
}
