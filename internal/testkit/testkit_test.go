package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatal is what a recorder's Fatal carries up the stack.
type fatal struct{ msg string }

// recorder is a testing.TB whose Fatal ends the call it is in (by panicking with fatal)
// instead of the test, so a test can assert a helper's failure message.
type recorder struct {
	testing.TB
}

func (recorder) Helper()                   {}
func (recorder) Fatal(args ...any)         { panic(fatal{fmt.Sprint(args...)}) }
func (recorder) Fatalf(f string, a ...any) { panic(fatal{fmt.Sprintf(f, a...)}) }

// failure runs fn with a recorder and returns the message it failed with ("" if it did not).
func failure(t *testing.T, fn func(tb testing.TB)) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			msg = f.msg
		}
	}()
	fn(recorder{t})
	return ""
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if msg := failure(t, func(tb testing.TB) { WaitFor(tb, "three", func() bool { return n.Load() == 3 }) }); msg != "" {
		t.Fatalf("WaitFor failed: %s", msg)
	}
}

func TestEventuallySaysWhatItAwaited(t *testing.T) {
	err := eventually(20*time.Millisecond, "the moon", func() bool { return false })
	if err == nil || err.Error() != "timed out after 20ms waiting for the moon" {
		t.Fatalf("got %v", err)
	}
	if err := eventually(20*time.Millisecond, "the sun", func() bool { return true }); err != nil {
		t.Fatal(err)
	}
}

func TestQuietFailsAtTheFirstChange(t *testing.T) {
	start := time.Now()
	calls := 0
	msg := failure(t, func(tb testing.TB) {
		Quiet(tb, MaxQuiet, "the counter", func() bool { calls++; return calls < 3 })
	})
	if msg != "the counter changed within 2s" {
		t.Fatalf("message %q", msg)
	}
	if calls != 3 {
		t.Fatalf("still asked %d times, want 3 (it must stop at the first false)", calls)
	}
	if el := time.Since(start); el >= MaxQuiet {
		t.Fatalf("took %v: a change must fail at once, not at the end of the period", el)
	}
}

func TestQuietHoldsForItsPeriod(t *testing.T) {
	start := time.Now()
	if msg := failure(t, func(tb testing.TB) { Quiet(tb, 30*time.Millisecond, "x", func() bool { return true }) }); msg != "" {
		t.Fatal(msg)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("returned after %v, before its 30ms", el)
	}
}

func TestQuietRefusesAnUnboundedPeriod(t *testing.T) {
	for _, d := range []time.Duration{0, MaxQuiet + time.Millisecond} {
		msg := failure(t, func(tb testing.TB) { Quiet(tb, d, "x", func() bool { return true }) })
		if !strings.Contains(msg, "outside (0, 2s]") {
			t.Fatalf("period %v: message %q", d, msg)
		}
	}
}

func TestReadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if got := ReadLines(t, path); got != nil {
		t.Fatalf("missing file: %q, want nil", got)
	}
	if err := os.WriteFile(path, []byte("a\nb\ntorn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ReadLines(t, path); !slices.Equal(got, []string{"a", "b", "torn"}) {
		t.Fatalf("got %q", got)
	}
}
