package connect

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// steerSink returns errs[i] from its i-th Consume (nil past the end).
type steerSink struct {
	scriptSink
	mu    sync.Mutex
	errs  []error
	calls int
}

func (s *steerSink) Consume(context.Context, sdk.TopicMetadata, sdk.MessagesMetadata, []sdk.ConsumedMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= len(s.errs) {
		return s.errs[s.calls-1]
	}
	return nil
}

// reconnectingSink is a steerSink with Reconnect, which fails its first failFirst calls.
type reconnectingSink struct {
	steerSink
	failFirst  int
	reconnects int
}

func (s *reconnectingSink) Reconnect(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconnects++
	if s.reconnects <= s.failFirst {
		return errors.New("still down")
	}
	return nil
}

func repeat1ms(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Millisecond
	}
	return out
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// TestConsumeSteering: the sdk's steering errors change how a failed Consume is retried,
// with max_retries = 3 (4 attempts) and on_failure = skip throughout:
//
//   - sdk.Permanent: no retry; on_failure at once (skipped: 10 messages, 1 failed batch);
//   - sdk.BackOff(d): waits exactly d each time and never counts toward max_retries, so 5
//     back-offs in a row still end delivered; BackOff(0) waits the connector's backoff;
//   - sdk.ErrNotConnected (wrapped): the sink's Reconnect is called (retried with the
//     backoff until it works) and the batch is called again, never counted toward
//     max_retries; a sink without Reconnect is called again after one backoff step;
//   - a plain error 4 times still exhausts max_retries (the unchanged rule).
//
// The waits of the consume loop are recorded by a hook instead of slept, so an hour's
// back-off costs nothing and the test sees the exact waits.
func TestConsumeSteering(t *testing.T) {
	notConnected := fmt.Errorf("write: %w", sdk.ErrNotConnected)
	for _, tc := range []struct {
		name           string
		errs           []error
		reconnectFails int // -1: the sink has no Reconnect
		want           batchResult
		wantCalls      int
		wantWaits      []time.Duration
		wantReconnects int
		wantFailed     uint64
		wantSkipped    uint64
	}{
		{"permanent: no retry", []error{sdk.Permanent(errors.New("schema mismatch"))}, -1, batchResolved, 1, nil, 0, 1, 10},
		{"back off: the asked waits, uncounted", []error{sdk.BackOff(time.Hour, nil), sdk.BackOff(2*time.Hour, errors.New("429")),
			sdk.BackOff(3*time.Hour, nil), sdk.BackOff(4*time.Hour, nil), sdk.BackOff(5*time.Hour, nil)}, -1,
			batchDelivered, 6, []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour, 5 * time.Hour}, 0, 0, 0},
		{"back off 0: the connector's backoff", []error{sdk.BackOff(0, nil)}, -1, batchDelivered, 2, []time.Duration{time.Millisecond}, 0, 0, 0},
		{"not connected: reconnect, uncounted", repeat(notConnected, 5), 2, batchDelivered, 6, []time.Duration{time.Millisecond, 2 * time.Millisecond}, 7, 0, 0},
		{"not connected without Reconnect: one step each", repeat(notConnected, 5), -1, batchDelivered, 6, repeat1ms(5), 0, 0, 0},
		{"plain errors exhaust max_retries", repeat(errors.New("boom"), 9), -1, batchResolved, 4,
			[]time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}, 0, 1, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureSkip)
			cfg.Retry = config.Retry{MaxRetries: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Hour}
			c := new(Counters)
			var sink sdk.Sink
			rs := &reconnectingSink{steerSink: steerSink{errs: tc.errs}, failFirst: tc.reconnectFails}
			if tc.reconnectFails >= 0 {
				sink = rs
			} else {
				sink = &rs.steerSink
			}
			p := testProcessor(cfg, sink, nil, c)
			var waits []time.Duration
			p.wait = func(_ context.Context, d time.Duration) bool { waits = append(waits, d); return true }
			res, err := p.process(context.Background(), sdk.TopicMetadata{Stream: "s", Topic: "t"}, sdk.MessagesMetadata{}, testBatch(0, 10))
			if res != tc.want {
				t.Fatalf("result %v (%v), want %v", res, err, tc.want)
			}
			if rs.calls != tc.wantCalls || rs.reconnects != tc.wantReconnects || !reflect.DeepEqual(waits, tc.wantWaits) {
				t.Fatalf("consume calls %d, reconnects %d, waits %v; want %d, %d, %v", rs.calls, rs.reconnects, waits, tc.wantCalls, tc.wantReconnects, tc.wantWaits)
			}
			s := c.Snapshot()
			if s.FailedBatches != tc.wantFailed || s.Skipped != tc.wantSkipped || s.ConsumeErrors != uint64(min(len(tc.errs), tc.wantCalls)) {
				t.Fatalf("counters %+v", s)
			}
			if tc.want == batchDelivered && s.Delivered != 10 {
				t.Fatalf("delivered %d, want 10", s.Delivered)
			}
		})
	}
}

// TestPermanentStopsAtOnce: under on_failure = stop a permanent error stops the sink after
// one call, with the connector's error in the stop's.
func TestPermanentStopsAtOnce(t *testing.T) {
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	sink := &steerSink{errs: []error{sdk.Permanent(errors.New("column missing"))}}
	p := testProcessor(cfg, sink, nil, new(Counters))
	p.wait = func(context.Context, time.Duration) bool { t.Fatal("a permanent error waited"); return false }
	res, err := p.process(context.Background(), sdk.TopicMetadata{}, sdk.MessagesMetadata{}, testBatch(5, 3))
	if res != batchStop || !errors.Is(err, sdk.ErrPermanent) || !strings.Contains(err.Error(), "partition 0 offsets 5..7: column missing") || sink.calls != 1 {
		t.Fatalf("result %v, %v after %d calls", res, err, sink.calls)
	}
}

// reconnectingSource is a seqSource with Reconnect.
type reconnectingSource struct {
	*seqSource
	mu         sync.Mutex
	reconnects int
}

func (s *reconnectingSource) Reconnect(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconnects++
	return nil
}

// TestSourceReadSteering: a source whose Read says it lost its connection is reconnected
// (once per such error) and then delivers everything exactly once; a source whose Read
// returns a permanent error is not read again and stops in error with it.
func TestSourceReadSteering(t *testing.T) {
	fastSourceBackoff(t)
	t.Run("not connected", func(t *testing.T) {
		src := &reconnectingSource{seqSource: &seqSource{t: t, batchSize: 10, total: 30, schema: sdk.SchemaText,
			readErrs: 3, readErr: fmt.Errorf("poll: %w", sdk.ErrNotConnected)}}
		be := &memSource{}
		rt := sourceRuntime(sourceCfg("seq"), src, be, t.TempDir())
		if err := rt.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "source stopped at end of input", func() bool { return rt.Status()[0].State == StateStopped })
		if err := rt.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantSeq(t, be.snapshot(), 0, 30)
		src.mu.Lock()
		defer src.mu.Unlock()
		if src.reconnects != 3 {
			t.Fatalf("reconnects %d, want 3", src.reconnects)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		src := &seqSource{t: t, batchSize: 10, total: 30, schema: sdk.SchemaText,
			readErrs: 5, readErr: sdk.Permanent(errors.New("cursor expired"))}
		rt := sourceRuntime(sourceCfg("seq"), src, &memSource{}, t.TempDir())
		if err := rt.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "source in error", func() bool { return rt.Status()[0].State == StateError })
		st := rt.Status()[0]
		if err := rt.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		src.mu.Lock()
		defer src.mu.Unlock()
		if src.reads != 1 || st.LastError == nil || !strings.Contains(st.LastError.Message, "read: cursor expired") {
			t.Fatalf("reads %d, last error %+v", src.reads, st.LastError)
		}
	})
}
