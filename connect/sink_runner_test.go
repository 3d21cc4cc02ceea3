package connect

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// startLogged starts a Runtime running sink (builtin "rec") whose logs go to a buffer.
func (e *iggyEnv) startLogged(cfg *config.Sink, sink sdk.Sink) (*Runtime, *syncbuf.Buffer) {
	e.T.Helper()
	fitInFlight(cfg, sink)
	if err := cfg.Validate(); err != nil {
		e.T.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	reg := sdk.NewRegistry().AddSink("rec", func() sdk.Sink { return sink })
	rt, err := New(Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: e.Dial(), Builtins: reg,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		e.T.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	return rt, logs
}

const abandonWarning = "in-flight batches did not finish within shutdown_timeout"

// TestSinkStopInTimeLogsNoAbandonWarning: a sink stop whose in-flight batches finish
// within shutdown_timeout (every mode; 30 messages, all delivered before Stop) logs
// "sink stopped" exactly once and never the abandon warning (supervise used to test the
// drain context's Err after cancelling it, so every stop logged it).
func TestSinkStopInTimeLogsNoAbandonWarning(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 30, nil)
			sink := newRecSink()
			sink.commitEach = true
			rt, logs := env.startLogged(testSinkConfig(mode, config.FailureStop), sink)
			testkit.WaitFor(t, "30 delivered", func() bool { return len(sink.got(0)) == 30 })
			stopRuntime(t, rt)
			out := logs.String()
			if n := strings.Count(out, `msg="sink stopped"`); n != 1 {
				t.Fatalf("%d \"sink stopped\" lines, want 1:\n%s", n, out)
			}
			if strings.Contains(out, abandonWarning) || strings.Contains(out, "abandoning") {
				t.Fatalf("a stop that finished in time logged a warning:\n%s", out)
			}
		})
	}
}

// blockSink blocks in Consume until its context ends (a stuck target).
type blockSink struct{ entered chan struct{} }

func (s *blockSink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (s *blockSink) Consume(ctx context.Context, _ sdk.TopicMetadata, _ sdk.MessagesMetadata, _ []sdk.ConsumedMessage) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}
func (s *blockSink) Close(context.Context) error { return nil }

// TestSinkStopPastTimeoutLogsAbandonWarning: the counterpart — a Consume stuck past
// shutdown_timeout (100 ms) is abandoned and the warning is logged exactly once; nothing
// is stored.
func TestSinkStopPastTimeoutLogsAbandonWarning(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 10, nil)
	sink := &blockSink{entered: make(chan struct{}, 1)}
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.ShutdownTimeout = 100 * time.Millisecond
	rt, logs := env.startLogged(cfg, sink)
	select {
	case <-sink.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Consume never called")
	}
	stopRuntime(t, rt)
	if n := strings.Count(logs.String(), abandonWarning); n != 1 {
		t.Fatalf("%d abandon warnings, want 1:\n%s", n, logs.String())
	}
	if _, ok := env.Stored("g", "s", "t", 0); ok {
		t.Fatal("an abandoned batch was committed")
	}
}

// stuckSink ignores its contexts: Consume blocks until release is closed, and so does
// Close (a native plugin cannot see Go's context at all).
type stuckSink struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stuckSink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (s *stuckSink) Consume(context.Context, sdk.TopicMetadata, sdk.MessagesMetadata, []sdk.ConsumedMessage) error {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return nil
}
func (s *stuckSink) Close(context.Context) error {
	<-s.release
	return nil
}

// TestSinkStopBoundedByOneShutdownTimeout is the regression test of "shutdown is not
// bounded": the stop opened three shutdown_timeout windows in a row (in-flight batches,
// Close, final stores), so Stop took 6 s with shutdown_timeout = 2 s, and a Consume that
// ignores its context kept the sink "stopping" for ever. Here Consume and Close both
// ignore their contexts: Stop still returns within shutdown_timeout (300 ms) + 1 s, the
// sink ends "stopped", the abandon warning is logged once, and nothing is stored.
func TestSinkStopBoundedByOneShutdownTimeout(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 10, nil)
	sink := &stuckSink{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(sink.release) }) // let the abandoned goroutines end
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.ShutdownTimeout = 300 * time.Millisecond
	rt, logs := env.startLogged(cfg, sink)
	select {
	case <-sink.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Consume never called")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	took := time.Since(start)
	t.Logf("Stop took %v with shutdown_timeout %v", took, cfg.ShutdownTimeout)
	if took > cfg.ShutdownTimeout+time.Second {
		t.Fatalf("Stop took %v, want at most shutdown_timeout (%v) + 1s", took, cfg.ShutdownTimeout)
	}
	if st := rt.Status()[0]; st.State != StateStopped {
		t.Fatalf("status %+v, want stopped", st)
	}
	if n := strings.Count(logs.String(), abandonWarning); n != 1 {
		t.Fatalf("%d abandon warnings, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "Close did not return within shutdown_timeout") {
		t.Fatalf("no word of the abandoned Close:\n%s", logs.String())
	}
	if _, ok := env.Stored("g", "s", "t", 0); ok {
		t.Fatal("an abandoned batch was committed")
	}
}
