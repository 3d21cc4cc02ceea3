package connect

import (
	"strings"
	"sync"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestPositionKeeperAfterPollingStoresOnlyWritten is the regression test of a loss the
// conformance suite's postgres-soak found under after_polling (47 rows): a sink that keeps
// its own positions resumes a partition it has not written yet at Iggy's offset, and the
// server had stored that offset with each poll, before the write, so a crash skipped what
// was polled and not written. Here the keeper has written no position of its own (Assigned
// names none), fails batch 2 (offsets 20..29) for good with on_failure = stop after the
// poller polled 50: Iggy's offset must be 19, the last offset written, not the 49 of the
// polls; and a restart delivers exactly 20..99.
func TestPositionKeeperAfterPollingStoresOnlyWritten(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 100, nil)
	keeper := func() *keeperSink {
		return &keeperSink{seekSink: &seekSink{recSink: newRecSink(), start: map[uint32]uint64{}}, keeps: true}
	}
	sink := keeper()
	var rt *Runtime
	var rtMu sync.Mutex
	polled := make(chan error, 2)
	sink.failBatch, sink.failTimes = 2, -1
	sink.beforeFail = func() {
		polled <- testkit.Eventually("the poller to have polled 50", func() bool {
			rtMu.Lock()
			defer rtMu.Unlock()
			return rt != nil && sinkOf(rt).counters.Polled.Load() == 50
		})
	}
	first, logs := env.startLogged(testSinkConfig(config.CommitAfterPolling, config.FailureStop), sink)
	rtMu.Lock()
	rt = first
	rtMu.Unlock()
	testkit.WaitFor(t, "error status", func() bool { return first.Status()[0].State == StateError })
	stopRuntime(t, first)
	for range 2 { // first attempt and its one retry
		if err := <-polled; err != nil {
			t.Fatal(err)
		}
	}
	if got := sink.got(0); !equalOffsets(got, seq(0, 19)) {
		t.Fatalf("first run delivered %v, want 0..19", got)
	}
	env.WantStored("g", "s", "t", 0, 19)
	if line := "offset_commit = after_polling: Iggy's offset is stored after each batch the sink wrote"; !strings.Contains(logs.String(), line) {
		t.Fatalf("no %q in the log:\n%s", line, logs.String())
	}

	sink2 := keeper()
	rt2 := env.start(testSinkConfig(config.CommitAfterPolling, config.FailureStop), sink2)
	testkit.WaitFor(t, "redelivery to the end", func() bool { g := sink2.got(0); return len(g) > 0 && g[len(g)-1] == 99 })
	stopRuntime(t, rt2)
	if got := sink2.got(0); !equalOffsets(got, seq(20, 99)) {
		t.Fatalf("restart delivered %v, want 20..99", got)
	}
	env.WantStored("g", "s", "t", 0, 99)
}
