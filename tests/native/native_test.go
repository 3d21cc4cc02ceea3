package native

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

func payloadPM(p uint32) func(int) []byte {
	return func(i int) []byte { return fmt.Appendf(nil, "p%d-m%d", p, i) }
}

// TestCommittingSinkSinkControlled: examples/plugins/c/committing_sink.c in sink_controlled
// mode over 2 partitions × 500 messages (batches of 50, the plugin fsyncs every 20 ms and
// only then commits). While it runs, every stored offset read back from the server is
// covered by the file: for each partition, every message up to the stored offset is
// already in it (a commit never runs ahead of the fsync). At the end the file holds each
// of the 1000 messages exactly once, and the stored offset of each partition equals the
// highest fsynced offset: 499.
func TestCommittingSinkSinkControlled(t *testing.T) {
	so := buildC(t, "committing_sink", "examples/plugins/c/committing_sink.c")
	e := newEnv(t)
	e.Topic("s", "t", 2)
	const per = 500
	for p := uint32(0); p < 2; p++ {
		e.Fill("s", "t", p, per, payloadPM(p))
	}
	out := filepath.Join(t.TempDir(), "out.log")
	cfg := sinkConfig("committing", so, config.CommitSinkControlled,
		jsonConfig("path", strconv.Quote(out), "flush_interval_ms", "20"), 50)
	rt := e.runtime(nil, cfg)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := status(t, rt, "committing"); st.State != connect.StateRunning {
		t.Fatalf("status %+v (%+v)", st, st.LastError)
	}
	samples := 0
	testkit.WaitFor(t, "both partitions stored to 499", func() bool {
		done := true
		var stored [2]int64
		for p := uint32(0); p < 2; p++ {
			stored[p] = -1
			if o, ok := e.Stored("g-committing", "s", "t", p); ok {
				stored[p] = int64(o)
			}
			done = done && stored[p] == per-1
		}
		have := map[string]bool{}
		for _, l := range testkit.ReadLines(t, out) {
			have[l] = true
		}
		for p := uint32(0); p < 2; p++ {
			for i := int64(0); i <= stored[p]; i++ {
				if !have[fmt.Sprintf("p%d-m%d", p, i)] {
					t.Fatalf("partition %d: stored offset %d but message %d is not in the fsynced file", p, stored[p], i)
				}
			}
			if stored[p] >= 0 {
				samples++
			}
		}
		return done
	})
	runkit.Stop(t, rt)
	if samples == 0 {
		t.Fatal("no stored offset was ever sampled")
	}
	lines := testkit.ReadLines(t, out)
	if len(lines) != 2*per {
		t.Fatalf("file holds %d lines, want %d", len(lines), 2*per)
	}
	count := map[string]int{}
	highest := map[uint32]int{0: -1, 1: -1}
	for _, l := range lines {
		count[l]++
		var p uint32
		var i int
		if _, err := fmt.Sscanf(l, "p%d-m%d", &p, &i); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		highest[p] = max(highest[p], i)
	}
	for p := uint32(0); p < 2; p++ {
		for i := range per {
			if n := count[fmt.Sprintf("p%d-m%d", p, i)]; n != 1 {
				t.Fatalf("p%d-m%d written %d times, want once", p, i, n)
			}
		}
		o, _ := e.Stored("g-committing", "s", "t", p)
		if int(o) != highest[p] || o != per-1 {
			t.Fatalf("partition %d: stored %d, highest fsynced %d, want both %d", p, o, highest[p], per-1)
		}
	}
	st := status(t, rt, "committing")
	if st.State != connect.StateStopped || st.Stats.Delivered != 2*per || st.Stats.CommitsAccepted == 0 || st.Stats.CommitsRejected() != 0 {
		t.Fatalf("status %+v", st)
	}
}

// TestNativeConsumeFailureRetried: the probe plugin returns 1 from consume for the batch
// holding a "fail" command (offsets 10..19); with max_retries 2 it is called 3 times for
// that batch — each attempt runs the batch's 9 "sleep 0" commands, so the out file holds
// exactly 10 + 3×9 lines — and then on_failure applies: stop leaves the stored offset at
// 9 (after_consuming) and the status in error naming the plugin failure; skip stores 29
// and delivers the last batch too (47 lines).
func TestNativeConsumeFailureRetried(t *testing.T) {
	so := buildC(t, "probe", "connect/plugin/testdata/c/probe.c")
	for _, policy := range []config.FailurePolicy{config.FailureStop, config.FailureSkip} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			e.Topic("s", "t", 1)
			e.Fill("s", "t", 0, 30, func(i int) []byte {
				if i == 10 {
					return []byte("fail")
				}
				return []byte("sleep 0")
			})
			out := filepath.Join(t.TempDir(), "out.log")
			cfg := sinkConfig("probe", so, config.CommitAfterConsuming, jsonConfig("out", strconv.Quote(out)), 10)
			cfg.OnFailure = policy
			rt := e.runtime(nil, cfg)
			if err := rt.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if policy == config.FailureStop {
				testkit.WaitFor(t, "error status", func() bool { return status(t, rt, "probe").State == connect.StateError })
			} else {
				testkit.WaitFor(t, "stored 29", func() bool { o, ok := e.Stored("g-probe", "s", "t", 0); return ok && o == 29 })
			}
			runkit.Stop(t, rt)
			st := status(t, rt, "probe")
			wantLines, wantStored, wantDelivered := 10+3*9, uint64(9), uint64(10)
			if policy == config.FailureSkip {
				wantLines, wantStored, wantDelivered = 10+3*9+10, 29, 20
				if st.State != connect.StateStopped || st.Stats.Skipped != 10 {
					t.Fatalf("status %+v", st)
				}
			} else if st.State != connect.StateError || st.LastError == nil ||
				!strings.Contains(st.LastError.Message, "plugin reported an error") {
				t.Fatalf("status %+v (%+v)", st, st.LastError)
			}
			if st.Stats.ConsumeErrors != 3 || st.Stats.FailedBatches != 1 || st.Stats.Delivered != wantDelivered {
				t.Fatalf("stats %+v", st.Stats)
			}
			if lines := testkit.ReadLines(t, out); len(lines) != wantLines {
				t.Fatalf("out file has %d lines, want %d", len(lines), wantLines)
			}
			e.WantStored("g-probe", "s", "t", 0, wantStored)
		})
	}
}

// TestNativeSinkControlledWithoutCallback: a plugin without iggy_sink_set_commit_callback
// (probe built with -DNO_COMMIT) configured sink_controlled is refused at start with an
// error saying so, and its group never stores an offset; the same library configured
// after_consuming in the same runtime runs: it gets all 20 messages and stores 19.
func TestNativeSinkControlledWithoutCallback(t *testing.T) {
	so := buildC(t, "probe-nocommit", "connect/plugin/testdata/c/probe.c", "NO_COMMIT")
	e := newEnv(t)
	e.Topic("s", "t", 1)
	e.Fill("s", "t", 0, 20, func(int) []byte { return []byte("sleep 0") })
	out := filepath.Join(t.TempDir(), "out.log")
	refused := sinkConfig("controlled", so, config.CommitSinkControlled, jsonConfig("out", strconv.Quote(out+".refused")), 10)
	running := sinkConfig("consuming", so, config.CommitAfterConsuming, jsonConfig("out", strconv.Quote(out)), 10)
	rt := e.runtime(nil, refused, running)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := status(t, rt, "controlled")
	if st.State != connect.StateError || st.LastError == nil ||
		!strings.Contains(st.LastError.Message, "does not support sink-controlled commits") {
		t.Fatalf("sink_controlled without callback: status %+v (%+v)", st, st.LastError)
	}
	testkit.WaitFor(t, "the other sink stores 19", func() bool { o, ok := e.Stored("g-consuming", "s", "t", 0); return ok && o == 19 })
	runkit.Stop(t, rt)
	if lines := testkit.ReadLines(t, out); len(lines) != 20 {
		t.Fatalf("running sink wrote %d lines, want 20", len(lines))
	}
	if lines := testkit.ReadLines(t, out+".refused"); len(lines) != 0 {
		t.Fatalf("refused sink wrote %d lines", len(lines))
	}
	if _, ok := e.Stored("g-controlled", "s", "t", 0); ok {
		t.Fatal("the refused sink's group stored an offset")
	}
	if st := status(t, rt, "consuming"); st.State != connect.StateStopped || st.Stats.Delivered != 20 {
		t.Fatalf("running sink: status %+v", st)
	}
	if st := status(t, rt, "controlled"); st.State != connect.StateError {
		t.Fatalf("refused sink after stop: %+v", st)
	}
}
