package sdktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// SourceHarness runs a Go source against its real origin the way the runtime does: open
// with the state saved last and a tail reader of the topic, then per batch read, append
// to the topic (a [Log]), save the batch's state, acknowledge. [SourceHarness.CrashAtEveryStep]
// runs it whole once, then once per step with a crash there (the instance dropped: no
// ack, no Close; what it appended stays appended), each followed by a new instance that
// runs to the end; after every run Check judges what the topic holds.
//
// The crash between the append and the ack is the one exactly once is about: the
// batch is in Iggy but neither its state was saved nor the origin told, so the next
// instance reads it again from the origin and must skip it by reading the topic back.
type SourceHarness struct {
	// New returns a new, unopened source (one per instance).
	New func() sdk.Source
	// Config is the source's plugin_config (see [Config]).
	Config any
	// Partitions of the topic (default 3).
	Partitions int
	// Reset prepares the origin before each run (fills it, or empties it and starts a
	// producer); nil: nothing to prepare.
	Reset func(ctx context.Context) error
	// Done reports that the topic holds everything the run waits for (checked after each
	// batch); a source may also end with sdk.ErrEndOfInput.
	Done func(log *Log) bool
	// Check judges the topic after each run (the guarantee is the test's to state:
	// exact origin positions, duplicates allowed or not).
	Check func(t *testing.T, log *Log)
	// MaxReads bounds the reads of one instance (default 10,000): a source that never
	// gets Done fails the test instead of hanging it.
	MaxReads int
	// Crash, when set, is called once with each instance right after its crash, to do to
	// the origin what the death of its process would and an instance dropped in the
	// test's process does not: end its connections without a goodbye (a live server then
	// lets go of what the session held: a replication slot, a lock, a consumer-group
	// membership; the next instance needs it) and stop its goroutines, acknowledging
	// nothing. nil: the crashed instance is left as it is, beside the next one, until the
	// test ends, which suits an origin the test process owns.
	Crash func(sdk.Source)
}

// Run runs the sequence once without a crash, checks, and returns how many steps it has.
func (h SourceHarness) Run(t *testing.T) int {
	t.Helper()
	h.defaults()
	return h.run(t, 0)
}

// CrashAtEveryStep runs the sequence whole, then once with a crash at each of its steps.
func (h SourceHarness) CrashAtEveryStep(t *testing.T) {
	t.Helper()
	h.defaults()
	steps := h.run(t, 0)
	for k := 1; k <= steps; k++ {
		t.Run(fmt.Sprintf("crash_at_step_%02d", k), func(t *testing.T) { h.run(t, k) })
	}
}

func (h *SourceHarness) defaults() {
	if h.Partitions <= 0 {
		h.Partitions = 3
	}
	if h.MaxReads <= 0 {
		h.MaxReads = 10_000
	}
}

type sourceRun struct {
	h       *SourceHarness
	t       *testing.T
	log     *Log
	state   []byte
	crashAt int
	step    int
	names   []string
}

func (h *SourceHarness) run(t *testing.T, crashAt int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*Patience)
	defer cancel()
	if h.Reset != nil {
		if err := h.Reset(ctx); err != nil {
			t.Fatalf("reset the origin: %v", err)
		}
	}
	r := &sourceRun{h: h, t: t, log: NewLog(h.Partitions), crashAt: crashAt}
	if r.instance(ctx, crashAt > 0) {
		t.Logf("crashed at step %d: %s", crashAt, r.names[len(r.names)-1])
		if r.instance(ctx, false) {
			t.Fatal("the recovery run crashed")
		}
	}
	h.Check(t, r.log)
	return r.step
}

// instance runs one source until Done, the end of input or the crash (true).
func (r *sourceRun) instance(ctx context.Context, mayCrash bool) (crash bool) {
	h := r.h
	src := h.New()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(crashed); !ok {
				panic(v)
			}
			crash = true
			if h.Crash != nil {
				h.Crash(src)
			}
			r.t.Cleanup(func() {
				ended, cancel := context.WithCancel(context.Background())
				cancel()
				_ = src.Close(ended)
			})
		}
	}()
	r.at(mayCrash, "open")
	if err := src.Open(ctx, SourceEnv(r.t, h.Config, r.state, r.log)); err != nil {
		r.t.Fatalf("open: %v", err)
	}
	for reads := 0; h.Done == nil || !h.Done(r.log); reads++ {
		if reads >= h.MaxReads {
			r.t.Fatalf("%d reads and the topic (%d messages) is not done", reads, r.log.Len())
		}
		r.at(mayCrash, "read")
		var batch sdk.SourceBatch
		var ack sdk.AckFunc
		retry := sdk.Retry{Initial: 10 * time.Millisecond, Max: time.Second}
		end := false
		err := retry.Do(ctx, func(ctx context.Context, _ int) error {
			var err error
			batch, ack, err = src.Read(ctx)
			if errors.Is(err, sdk.ErrEndOfInput) {
				end = true
				return nil
			}
			return err
		})
		if end {
			break
		}
		if err != nil {
			r.t.Fatalf("read: %v", err)
		}
		if ack == nil {
			r.t.Fatal("read returned a nil AckFunc")
		}
		if len(batch.Messages) > 0 {
			r.at(mayCrash, fmt.Sprintf("append %d messages", len(batch.Messages)))
			r.log.Append(batch.Messages)
		}
		r.at(mayCrash, "save the state and ack")
		if batch.State != nil {
			r.state = append([]byte(nil), batch.State...)
		}
		if err := ack(ctx, nil); err != nil {
			r.t.Fatalf("ack: %v", err)
		}
	}
	r.at(mayCrash, "close")
	cctx, cancel := context.WithTimeout(ctx, Patience)
	defer cancel()
	if err := src.Close(cctx); err != nil {
		r.t.Fatalf("close: %v", err)
	}
	return false
}

func (r *sourceRun) at(mayCrash bool, name string) {
	r.step++
	r.names = append(r.names, name)
	if mayCrash && r.step == r.crashAt {
		panic(crashed{})
	}
}
