package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// script is an operation that returns its errors in order, then nil.
func script(errs ...error) (func(context.Context, int) error, *int) {
	calls := 0
	return func(context.Context, int) error {
		calls++
		if calls <= len(errs) {
			return errs[calls-1]
		}
		return nil
	}, &calls
}

type waits struct{ got []time.Duration }

func (w *waits) sleep(_ context.Context, d time.Duration) bool { w.got = append(w.got, d); return true }

func TestRetrySteering(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name      string
		attempts  int
		errs      []error
		transient func(error) bool
		wantErr   error
		wantCalls int
		wantWaits []time.Duration
	}{
		{"succeeds after two failures", 0, []error{boom, boom}, nil, nil, 3, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}},
		{"the waits double up to the cap", 0, []error{boom, boom, boom, boom, boom}, nil, nil, 6,
			[]time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}},
		{"attempts run out: the last error as returned", 3, []error{errors.New("1"), errors.New("2"), boom, boom}, nil, boom, 3,
			[]time.Duration{10 * time.Millisecond, 20 * time.Millisecond}},
		{"permanent ends at once", 5, []error{Permanent(boom)}, nil, boom, 1, nil},
		{"not transient ends at once", 5, []error{boom}, func(error) bool { return false }, boom, 1, nil},
		{"a back off waits what it asks, uncounted", 2, []error{boom, BackOff(time.Second, boom), BackOff(0, boom), boom}, nil, boom, 4,
			[]time.Duration{10 * time.Millisecond, time.Second, 20 * time.Millisecond}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op, calls := script(c.errs...)
			var w waits
			r := Retry{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Attempts: c.attempts, Transient: c.transient, Sleep: w.sleep}
			err := r.Do(context.Background(), op)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if *calls != c.wantCalls || fmt.Sprint(w.got) != fmt.Sprint(c.wantWaits) {
				t.Fatalf("calls %d waits %v; want %d %v", *calls, w.got, c.wantCalls, c.wantWaits)
			}
		})
	}
}

type reconnector struct {
	errs  []error
	calls int
}

func (r *reconnector) Reconnect(context.Context) error {
	r.calls++
	if r.calls <= len(r.errs) {
		return r.errs[r.calls-1]
	}
	return nil
}

func TestRetryReconnects(t *testing.T) {
	down := fmt.Errorf("write: %w", ErrNotConnected)
	rc := &reconnector{errs: []error{errors.New("refused"), errors.New("refused")}}
	op, calls := script(down, down)
	var w waits
	var events []string
	r := Retry{Initial: 10 * time.Millisecond, Max: time.Second, Attempts: 1, Reconnector: rc, Sleep: w.sleep,
		OnRetry: func(e RetryEvent) { events = append(events, fmt.Sprintf("%d:%s", e.Attempt, e.Steer)) }}
	if err := r.Do(context.Background(), op); err != nil {
		t.Fatal(err) // Attempts = 1 and two failures: reconnects do not count
	}
	// Two ErrNotConnected: the first reconnect fails twice (waits 10ms, 20ms), the second works at once.
	if *calls != 3 || rc.calls != 4 || fmt.Sprint(w.got) != "[10ms 20ms]" || strings.Join(events, ",") != "1:reconnect,2:reconnect" {
		t.Fatalf("calls %d reconnects %d waits %v events %v", *calls, rc.calls, w.got, events)
	}

	// A permanent reconnect failure ends the retry with it.
	bad := errors.New("bad password")
	rc = &reconnector{errs: []error{Permanent(bad)}}
	op, _ = script(down)
	if err := (Retry{Reconnector: rc, Sleep: w.sleep}).Do(context.Background(), op); !errors.Is(err, bad) || !errors.Is(err, ErrPermanent) {
		t.Fatalf("err = %v", err)
	}

	// Without a Reconnector it waits one step and tries again.
	w.got = nil
	op, calls = script(down)
	if err := (Retry{Initial: 7 * time.Millisecond, Attempts: 1, Sleep: w.sleep}).Do(context.Background(), op); err != nil || *calls != 2 || fmt.Sprint(w.got) != "[7ms]" {
		t.Fatalf("err %v calls %d waits %v", err, *calls, w.got)
	}
}

func TestRetryStopsWithTheContext(t *testing.T) {
	boom := errors.New("boom")
	ctx, cancel := context.WithCancel(context.Background())
	r := Retry{Initial: time.Hour, Sleep: func(ctx context.Context, d time.Duration) bool {
		cancel()
		<-ctx.Done()
		return false
	}}
	op, calls := script(boom, boom)
	err := r.Do(ctx, op)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, boom) || *calls != 1 {
		t.Fatalf("err = %v after %d calls", err, *calls)
	}
	// A failure seen after the end is not retried either.
	op, calls = script(boom, boom)
	if err := r.Do(ctx, op); !errors.Is(err, context.Canceled) || !errors.Is(err, boom) || *calls != 1 {
		t.Fatalf("err = %v after %d calls", err, *calls)
	}
	// The real Sleep gives up at once on an ended context.
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended context")
	}
}

func TestRetryJitter(t *testing.T) {
	var w waits
	r := Retry{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: 0.25, Sleep: w.sleep}
	boom := errors.New("boom")
	errs := make([]error, 200)
	for i := range errs {
		errs[i] = boom
	}
	op, _ := script(errs...)
	if err := r.Do(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	distinct := map[time.Duration]bool{}
	for _, d := range w.got {
		if d > 100*time.Millisecond || d < 75*time.Millisecond {
			t.Fatalf("wait %v outside [75ms, 100ms]", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("only %d distinct waits in 200: no jitter", len(distinct))
	}
}

func TestRetryLogsEachRetryOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	var w waits
	boom := errors.New("boom")
	op, _ := script(boom, BackOff(time.Second, boom), boom, boom)
	r := Retry{Initial: time.Millisecond, Max: time.Second, Attempts: 3, What: "upload", Log: log, LogAttrs: []any{"key", "k1"}, Sleep: w.sleep}
	if err := r.Do(context.Background(), op); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	want := `level=WARN msg="upload failed; retrying" attempt=1 key=k1 of=3 backoff=1ms error=boom
level=WARN msg="upload asked to back off" attempt=2 key=k1 of=3 backoff=1s error="back off 1s: boom"
level=WARN msg="upload failed; retrying" attempt=3 key=k1 of=3 backoff=2ms error=boom
`
	if buf.String() != want {
		t.Fatalf("log:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// TestRetryMultiplier: the waits grow by Multiplier (3: 10, 30, 90 ms, capped at 100),
// 1 keeps them at Initial, and 0 doubles as before.
func TestRetryMultiplier(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		m    float64
		want []time.Duration
	}{
		{0, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms}},
		{3, []time.Duration{10 * ms, 30 * ms, 90 * ms, 100 * ms, 100 * ms}},
		{1, []time.Duration{10 * ms, 10 * ms, 10 * ms, 10 * ms, 10 * ms}},
		{0.5, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms}},
	}
	for _, c := range cases {
		r := Retry{Initial: 10 * ms, Max: 100 * ms, Multiplier: c.m}
		for n, want := range c.want {
			if got := r.Delay(n + 1); got != want {
				t.Errorf("multiplier %v: Delay(%d) = %v, want %v", c.m, n+1, got, want)
			}
		}
	}
}
