package connect

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// fastRestarts is a restart policy quick enough for tests.
var fastRestarts = config.RestartPolicy{MaxRestarts: 5, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

// flakyOpenSink fails its first failures Opens, then records like recSink. A gated one
// (newGatedOpenSink) holds the Open after the failed ones until release is called.
type flakyOpenSink struct {
	*recSink
	mu       sync.Mutex
	failures int
	opens    int
	gated    bool
	entered  chan struct{} // gated: closed when the held Open began
	open     chan struct{}
	release  func() // gated: lets the held Open go on; idempotent
}

func newGatedOpenSink(failures int) *flakyOpenSink {
	s := &flakyOpenSink{recSink: newRecSink(), failures: failures, gated: true, entered: make(chan struct{}), open: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.open) })
	return s
}

func (s *flakyOpenSink) Open(ctx context.Context, env sdk.SinkEnv) error {
	s.mu.Lock()
	s.opens++
	fail, hold := s.opens <= s.failures, s.gated && s.opens == s.failures+1
	s.mu.Unlock()
	if fail {
		return errors.New("target unreachable")
	}
	if hold {
		close(s.entered)
		<-s.open
	}
	return s.recSink.Open(ctx, env)
}

// TestRestartAfterFailedOpens: a sink whose Open fails twice is restarted twice with
// backoff and then runs; it consumes everything, and its status tells the story.
func TestRestartAfterFailedOpens(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 30, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Restart = fastRestarts
	sink := &flakyOpenSink{recSink: newRecSink(), failures: 2}
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	first := rt.Status()[0]
	if first.State != StateError || first.LastError == nil || !strings.Contains(first.LastError.Message, "open: target unreachable") {
		t.Fatalf("after the first open: %+v", first)
	}
	testkit.WaitFor(t, "sink running", func() bool { st, _ := rt.Connector(KindSink, "rec"); return st.State == StateRunning })
	testkit.WaitFor(t, "30 messages", func() bool { return len(sink.got(0)) == 30 })
	st, _ := rt.Connector(KindSink, "rec")
	if st.Restart.Restarts != 2 || st.Restart.Total != 2 || st.Restart.GaveUp || !st.Restart.NextRetry.IsZero() || st.LastError != nil {
		t.Fatalf("restart state %+v, last error %v", st.Restart, st.LastError)
	}
	if st.ID != first.ID+2 {
		t.Fatalf("instance id %d, want %d (a new id per restart)", st.ID, first.ID+2)
	}
	if !equalOffsets(sink.got(0), seq(0, 29)) {
		t.Fatalf("offsets %v", sink.got(0))
	}
}

// TestSinkRevivesWhenStreamCreated: a sink started before its stream exists waits in
// error with its next retry time, and runs once the stream is created.
func TestSinkRevivesWhenStreamCreated(t *testing.T) {
	env := newIggyEnv(t)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Restart = config.RestartPolicy{MaxRestarts: 1000, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	sink := newRecSink()
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "a restart scheduled", func() bool {
		st, _ := rt.Connector(KindSink, "rec")
		return st.State == StateError && st.Restart.Total >= 2 && !st.Restart.NextRetry.IsZero()
	})
	st, _ := rt.Connector(KindSink, "rec")
	if st.LastError == nil || !strings.Contains(st.LastError.Message, "stream s topic t") {
		t.Fatalf("last error %+v", st.LastError)
	}
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 5, nil)
	testkit.WaitFor(t, "sink consuming", func() bool { return len(sink.got(0)) == 5 })
	// The instance that consumed may still be in its start: starting, never the failed
	// instance's error.
	st, _ = rt.Connector(KindSink, "rec")
	if (st.State != StateStarting && st.State != StateRunning) || st.LastError != nil || st.Restart.GaveUp {
		t.Fatalf("status %s, last error %+v, restart %+v", st.State, st.LastError, st.Restart)
	}
	testkit.WaitFor(t, "sink running", func() bool { st, _ := rt.Connector(KindSink, "rec"); return st.State == StateRunning })
}

// TestStatusWhileRestartOpens: while a restarted sink's Open runs, its status is the new
// instance's (starting, no error), not the failed instance's; it is running once Open
// returned.
func TestStatusWhileRestartOpens(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 3, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Restart = fastRestarts
	sink := newGatedOpenSink(1)
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	defer sink.release() // a failed check must not leave Open waiting: Stop waits for it
	first, _ := rt.Connector(KindSink, "rec")
	if first.State != StateError {
		t.Fatalf("after the failed open: %s", first.State)
	}
	<-sink.entered
	st, _ := rt.Connector(KindSink, "rec")
	if st.State != StateStarting || st.LastError != nil || st.ID != first.ID+1 || st.Restart.Total != 1 || len(st.Partitions) != 0 {
		t.Fatalf("during the restart's open: state %s, error %+v, id %d (first %d), restart %+v, partitions %v",
			st.State, st.LastError, st.ID, first.ID, st.Restart, st.Partitions)
	}
	sink.release()
	testkit.WaitFor(t, "3 messages", func() bool { return len(sink.got(0)) == 3 })
	testkit.WaitFor(t, "sink running", func() bool { st, _ := rt.Connector(KindSink, "rec"); return st.State == StateRunning })
	if st, _ := rt.Connector(KindSink, "rec"); st.ID != first.ID+1 || st.LastError != nil {
		t.Fatalf("after the open: id %d, error %+v", st.ID, st.LastError)
	}
}

// startGated starts a runtime whose sink's first Open waits for the sink's release, in
// the background: Start's error arrives on the channel.
func startGated(t *testing.T, env *iggyEnv) (*Runtime, *flakyOpenSink, <-chan error) {
	t.Helper()
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	sink := newGatedOpenSink(0)
	rt := env.runtime([]*config.Sink{cfg}, map[string]sdk.Sink{"rec": sink})
	t.Cleanup(sink.release) // a failed check must not leave Open waiting
	started := make(chan error, 1)
	go func() { started <- rt.Start(context.Background()) }()
	<-sink.entered
	return rt, sink, started
}

// TestStatusWhileStartOpens: while Start waits for a sink's Open, Status answers (the
// sink starting, no instance yet) and Pause says it is not running; once Open returned,
// Start returns and the sink runs.
func TestStatusWhileStartOpens(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 4, nil)
	rt, sink, started := startGated(t, env)
	statuses := make(chan []Status, 1)
	go func() { statuses <- rt.Status() }()
	var sts []Status
	select {
	case sts = <-statuses:
	case <-time.After(testkit.Patience):
		t.Fatal("Status blocked while a sink opens")
	}
	if len(sts) != 1 || sts[0].Key != "rec" || sts[0].Kind != KindSink || sts[0].State != StateStarting || sts[0].LastError != nil || sts[0].Path != "builtin:rec" {
		t.Fatalf("while opening: %+v", sts)
	}
	if err := rt.Pause(KindSink, "rec"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause while opening: %v, want ErrNotRunning", err)
	}
	sink.release()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "4 messages", func() bool { return len(sink.got(0)) == 4 })
	if st, _ := rt.Connector(KindSink, "rec"); st.State != StateRunning {
		t.Fatalf("after the open: %s", st.State)
	}
}

// TestStopWhileStartOpens: a Stop that comes while Start waits for a sink's Open waits
// for that instance too, and stops it once it opened: both return, the sink is stopped.
func TestStopWhileStartOpens(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	rt, sink, started := startGated(t, env)
	stopped := make(chan error, 1)
	go func() { stopped <- rt.Stop(bg(t)) }()
	testkit.WaitFor(t, "the runtime stopping", func() bool { return rt.life.soft.Err() != nil })
	sink.release()
	if err := <-started; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st, _ := rt.Connector(KindSink, "rec"); st.State != StateStopped {
		t.Fatalf("after Stop: %s", st.State)
	}
	sink.mu.Lock()
	closed := sink.closed
	sink.mu.Unlock()
	if !closed {
		t.Fatal("the sink was not closed")
	}
}

// TestGiveUpAndFailed: with max_restarts = 1 a sink that never opens is restarted once,
// then failed for good; with every connector failed, Failed is closed.
func TestGiveUpAndFailed(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Restart = config.RestartPolicy{MaxRestarts: 1, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	sink := &flakyOpenSink{recSink: newRecSink(), failures: 1 << 30}
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	select {
	case <-rt.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("Failed not closed")
	}
	st, _ := rt.Connector(KindSink, "rec")
	if st.State != StateError || !st.Restart.GaveUp || st.Restart.Total != 1 || !st.Restart.NextRetry.IsZero() {
		t.Fatalf("status %+v restart %+v", st.State, st.Restart)
	}
	sink.mu.Lock()
	opens := sink.opens
	sink.mu.Unlock()
	if opens != 2 {
		t.Fatalf("opens = %d, want 2 (the start and one restart)", opens)
	}
	// A restart on request starts a new series, even after giving up.
	sink.mu.Lock()
	sink.failures = 0
	sink.mu.Unlock()
	if err := rt.Restart(bg(t), KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	st, _ = rt.Connector(KindSink, "rec")
	if st.State != StateRunning || st.Restart.GaveUp || st.Restart.Restarts != 0 || st.Restart.Total != 2 {
		t.Fatalf("after Restart: %+v %+v", st.State, st.Restart)
	}
}

// TestStopPolicyRestarts: on_failure = "stop" after retries stops the sink, and the
// supervisor restarts it; the failed batch is redelivered (nothing lost).
func TestStopPolicyRestarts(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 50, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Restart = fastRestarts
	sink := newRecSink()
	sink.failBatch, sink.failTimes = 2, 2 // batch 2 fails twice: retries (1) run out once
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "everything delivered", func() bool {
		got := sink.got(0)
		return len(got) > 0 && got[len(got)-1] == 49
	})
	got := sink.got(0)
	if !equalOffsets(got, seq(0, 49)) {
		t.Fatalf("offsets %v (want 0..49 once: the failed batch is retried by the next instance)", got)
	}
	testkit.WaitFor(t, "stored 49", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 49 })
	st, _ := rt.Connector(KindSink, "rec")
	if st.Restart.Total != 1 || st.State != StateRunning {
		t.Fatalf("status %s restart %+v", st.State, st.Restart)
	}
}

// TestPauseResume: a paused sink polls nothing more (the lag grows) but keeps its
// membership; resume drains it.
func TestPauseResume(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 0, 10, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	sink := newRecSink()
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "10 consumed", func() bool { return len(sink.got(0)) == 10 })
	// Stored as the sink's table knows it (the store's reply recorded), not only in Iggy.
	testkit.WaitFor(t, "stored 9", func() bool {
		st, _ := rt.Connector(KindSink, "rec")
		for _, p := range st.Partitions {
			if p.Partition == 0 {
				return p.Stored == 9
			}
		}
		return false
	})
	if err := rt.Pause(KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	st, _ := rt.Connector(KindSink, "rec")
	if !st.Paused {
		t.Fatal("status not paused")
	}
	env.Fill("s", "t", 0, 20, nil)
	env.Fill("s", "t", 1, 7, nil)
	offs, err := rt.Offsets(bg(t), "rec")
	if err != nil {
		t.Fatal(err)
	}
	for i := range offs { // when Iggy was read: there, and left out of the comparison
		if offs[i].ReadAt.IsZero() {
			t.Fatalf("offsets of partition %d: no ReadAt", i)
		}
		offs[i].ReadAt = time.Time{}
	}
	want := []PartitionOffsets{
		{Stream: "s", Topic: "t", Partition: 0, Current: 29, Stored: 9, Lag: 20, Owned: true},
		{Stream: "s", Topic: "t", Partition: 1, Current: 6, Stored: -1, Lag: 7, Owned: true},
	}
	if len(offs) != 2 || offs[0] != want[0] || offs[1] != want[1] {
		t.Fatalf("offsets while paused:\n got %+v\nwant %+v", offs, want)
	}
	// Pausing stops polls, not the member: over several syncs (50 ms heartbeat) nothing
	// more is consumed. No event marks a sync that found the sink paused, so watch.
	testkit.Quiet(t, 200*time.Millisecond, "10 consumed while paused", func() bool { return len(sink.got(0))+len(sink.got(1)) == 10 })
	if err := rt.Resume(KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "drained", func() bool { return len(sink.got(0)) == 30 && len(sink.got(1)) == 7 })
	testkit.WaitFor(t, "lag 0", func() bool {
		offs, err := rt.Offsets(bg(t), "rec")
		return err == nil && offs[0].Lag == 0 && offs[1].Lag == 0
	})
	if err := rt.Pause(KindSource, "rec"); !errors.Is(err, ErrNotSink) {
		t.Fatalf("pause of a source kind: %v", err)
	}
	if err := rt.Pause(KindSink, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pause of an unknown sink: %v", err)
	}
}

// TestStopConnectorAndSetOffsets: offsets can only be set on a stopped sink; after a
// rewind and a restart the sink consumes again from the new position.
func TestStopConnectorAndSetOffsets(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 20, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Restart = fastRestarts
	sink := newRecSink()
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "stored 19", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 19 })
	change := []OffsetChange{{Stream: "s", Topic: "t", Partition: 0, Offset: 4}}
	if err := rt.SetOffsets(bg(t), "rec", change); !errors.Is(err, ErrNotStopped) {
		t.Fatalf("SetOffsets on a running sink: %v", err)
	}
	if err := rt.StopConnector(bg(t), KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	st, _ := rt.Connector(KindSink, "rec")
	if st.State != StateStopped {
		t.Fatalf("after StopConnector: %s", st.State)
	}
	if err := rt.SetOffsets(bg(t), "rec", []OffsetChange{{Stream: "x", Topic: "t", Offset: 1}}); !errors.Is(err, ErrInvalidOffsets) {
		t.Fatalf("SetOffsets of a foreign topic: %v", err)
	}
	for _, bad := range []struct {
		c    OffsetChange
		want string
	}{
		{OffsetChange{Stream: "s", Topic: "t", Partition: 7, Offset: 1}, `stream "s" topic "t" has no partition 7`},
		{OffsetChange{Stream: "s", Topic: "t", Partition: 0, Offset: 20}, `partition 0: offset 20 is past the last offset 19`},
		// Past the int64 range: once wrapped to -1 and let through to the server (a 500).
		{OffsetChange{Stream: "s", Topic: "t", Partition: 0, Offset: math.MaxUint64}, `partition 0: offset 18446744073709551615 is past the last offset 19`},
	} {
		err := rt.SetOffsets(bg(t), "rec", []OffsetChange{change[0], bad.c})
		if !errors.Is(err, ErrInvalidOffsets) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("SetOffsets %+v: %v, want ErrInvalidOffsets with %q", bad.c, err, bad.want)
		}
		env.WantStored("g", "s", "t", 0, 19) // a bad change changes nothing
	}
	if err := rt.SetOffsets(bg(t), "rec", change); err != nil {
		t.Fatal(err)
	}
	env.WantStored("g", "s", "t", 0, 4)
	// Stopped by the operator: not restarted by the policy. A restart would come after the
	// policy's backoff, and no event marks "the policy chose not to", so watch.
	testkit.Quiet(t, 100*time.Millisecond, "the stopped sink's state and restart count", func() bool {
		st, _ := rt.Connector(KindSink, "rec")
		return st.State == StateStopped && st.Restart.Total == 0
	})
	if err := rt.Restart(bg(t), KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "redelivered 5..19", func() bool { return len(sink.got(0)) == 35 })
	if got := sink.got(0)[20:]; !equalOffsets(got, seq(5, 19)) {
		t.Fatalf("after the rewind: %v", got)
	}
}

// TestRestartUnderLoadLosesNothing: five restarts on request while a sink_controlled sink
// consumes lose nothing: every offset of both partitions is delivered at least once,
// and the group ends stored at the last offset of each.
func TestRestartUnderLoadLosesNothing(t *testing.T) {
	const n = 1000
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 0, n, nil)
	env.Fill("s", "t", 1, n, nil)
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	sink := newRecSink()
	sink.commitEach, sink.delay = true, time.Millisecond
	rt := env.start(cfg, sink)
	defer stopRuntime(t, rt)
	consumed := func() int { return len(sink.got(0)) + len(sink.got(1)) }
	for i := 1; i <= 5; i++ {
		testkit.WaitFor(t, "progress", func() bool { return consumed() >= i*2*n/7 })
		if err := rt.Restart(bg(t), KindSink, "rec"); err != nil {
			t.Fatal(err)
		}
	}
	for p := uint32(0); p < 2; p++ {
		testkit.WaitFor(t, "stored to the end", func() bool { o, ok := env.Stored("g", "s", "t", p); return ok && o == n-1 })
		seen := map[uint64]bool{}
		for _, o := range sink.got(p) {
			seen[o] = true
		}
		for o := uint64(0); o < n; o++ {
			if !seen[o] {
				t.Fatalf("partition %d offset %d never delivered", p, o)
			}
		}
	}
	st, _ := rt.Connector(KindSink, "rec")
	if st.Restart.Total != 5 || st.State != StateRunning {
		t.Fatalf("status %s %+v", st.State, st.Restart)
	}
	t.Logf("delivered %d for %d messages over 5 restarts", consumed(), 2*n)
}
