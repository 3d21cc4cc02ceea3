package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// Parameters of TestStuckSinkStopIsBounded.
const (
	stuckMessages        = 300 // 3 batches: the stuck one is the last, so polled is exact
	stuckBatch           = 100
	stuckBlockAt         = 3 // consume call that never returns
	stuckShutdownTimeout = 2 * time.Second
	stuckSinkKey         = "stuck"
	stuckSinkGroup       = "iggy-connect-sink-" + stuckSinkKey
	stuckWarning         = "in-flight batches did not finish within shutdown_timeout; abandoning them (they will be redelivered)"
)

// stuckSink is the connector file of testdata/stuck_sink.c (after_consuming).
func stuckSink(lib, marker string) string {
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "stuck sink"
path = %q
offset_commit = "after_consuming"
shutdown_timeout = %q

[[streams]]
stream = "s"
topics = ["t"]
schema = "text"
batch_length = %d
poll_interval = "5ms"

[plugin_config]
marker = %q
block_at_call = %d
`, stuckSinkKey, lib, stuckShutdownTimeout, stuckBatch, marker, stuckBlockAt)
}

// TestStuckSinkStopIsBounded: a sink whose consume never returns (a native plugin cannot
// see Go's context) cannot hold the process past its shutdown_timeout: the whole stop of a
// connector is bounded by one shutdown_timeout. testdata/stuck_sink.c accepts two batches
// and blocks for good in its third consume, after writing the batch's offsets to a marker
// file; a built-in random source writes 300 messages (3 batches of 100) in the same
// `ferry run --embedded`; the sink is after_consuming with shutdown_timeout = "2s". Once
// consume is stuck and the two batches before it are stored (read live), SIGTERM. Asserts:
//
//   - the stuck batch is offsets 200..299 and the stored offset before SIGTERM is 199;
//   - the process exits within shutdown_timeout + 1 s (the one timing assertion), exit
//     status 0;
//   - the output has the warning "in-flight batches did not finish within shutdown_timeout;
//     abandoning them (they will be redelivered)" exactly once, no "hard stop" warning, one
//     "sink stopped with errors" line whose error is the abandoned Close (one of its two
//     texts: which one depends on whether the goroutine calling Close got to run first),
//     and no line of the plugin's close: iggy_sink_close is never called while its consume
//     is still inside the plugin;
//   - the final status lines are exactly "sink stuck stopped polled=300 delivered=200
//     committed=200 consume_errors=0" and "source gen stopped produced=300 sent=300 acked=300
//     send_errors=0";
//   - nothing of the stuck batch was stored: a `ferry server` on the data directory reports
//     stored offset 199, current offset 299 for the sink's group.
func TestStuckSinkStopIsBounded(t *testing.T) {
	lib := cFixture(t, "stuck_sink")
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	marker := filepath.Join(dir, "stuck")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", stuckMessages, 0, stuckBatch))
	writeFile(t, filepath.Join(conns, "sink.toml"), stuckSink(lib, marker))
	cfg := runtimeConfig(t, dir, conns)

	p := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--embedded", "--progress", "0")
	addr := p.embeddedAddr()
	var first, last int64
	testkit.WaitFor(t, "the stuck consume", func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		b, err := os.ReadFile(marker)
		if errors.Is(err, os.ErrNotExist) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscanf(string(b), "%d %d\n", &first, &last); err != nil {
			t.Fatalf("marker %q: %v", b, err)
		}
		return true
	})
	if wantFirst := int64((stuckBlockAt - 1) * stuckBatch); first != wantFirst || last != wantFirst+stuckBatch-1 {
		t.Fatalf("stuck consume got offsets %d..%d, want %d..%d", first, last, wantFirst, wantFirst+stuckBatch-1)
	}
	var live partitionOffsets
	testkit.WaitFor(t, fmt.Sprintf("offset %d stored (the batches before the stuck one)", first-1), func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		live = partition0(t, addr, "s", "t", stuckSinkGroup)
		if live.stored >= first {
			t.Fatalf("stored offset %d while the consume of %d..%d has not returned", live.stored, first, last)
		}
		return live.stored == first-1
	})

	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	limit := stuckShutdownTimeout + time.Second
	select {
	case <-p.done:
	case <-time.After(limit + 10*time.Second):
		t.Fatalf("ferry run still running %v after SIGTERM", limit+10*time.Second)
	}
	took := time.Since(sent)
	t.Logf("consume of %d..%d stuck, %d stored; SIGTERM → exit in %v (%v)", first, last, live.stored, took.Round(time.Millisecond), p.err)
	if took >= limit {
		t.Fatalf("the stop took %v, not below shutdown_timeout %v + 1s", took, stuckShutdownTimeout)
	}
	if p.err != nil {
		t.Fatalf("ferry run: %v, want exit status 0", p.err)
	}

	out := p.out.String()
	if c := strings.Count(out, stuckWarning); c != 1 {
		t.Fatalf("the warning %q appears %d times, want once", stuckWarning, c)
	}
	if strings.Contains(out, "hard stop: abandoning") {
		t.Fatal("output has a \"hard stop\" warning: the stop was not the shutdown_timeout's")
	}
	if l := regexp.MustCompile(`stuck sink \d+ closed`).FindString(out); l != "" {
		t.Fatalf("output has %q: iggy_sink_close was called while consume was inside the plugin", l)
	}
	stoppedRE := regexp.MustCompile(`(?m)^.* msg="sink stopped with errors" sink=stuck instance=\d+ error="(.*)"$`)
	m := stoppedRE.FindAllStringSubmatch(out, -1)
	closeRE := regexp.MustCompile(`^close sink: (Close did not return within shutdown_timeout; abandoned|plugin ` + regexp.QuoteMeta(lib) + `: close sink \d+: waiting for consume: context canceled)$`)
	if len(m) != 1 || !closeRE.MatchString(m[0][1]) {
		t.Fatalf("\"sink stopped with errors\" lines %q, want one whose error matches %s", m, closeRE)
	}
	for _, want := range []string{
		fmt.Sprintf("\nsink   stuck                    stopped  polled=%d delivered=%d committed=%d consume_errors=0\n", stuckMessages, first, first),
		fmt.Sprintf("\nsource gen                      stopped  produced=%d sent=%d acked=%d send_errors=0\n", stuckMessages, stuckMessages, stuckMessages),
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks the status line %q", strings.TrimSpace(want))
		}
	}

	srv, saddr := startServer(t, "server after the stop", dir, filepath.Join(dir, "data"))
	after := partition0(t, saddr, "s", "t", stuckSinkGroup)
	srv.stop(15 * time.Second)
	if after.stored != first-1 || after.current != stuckMessages-1 {
		t.Fatalf("after the stop: stored offset %d, current %d; want %d (nothing of the stuck batch %d..%d) and %d",
			after.stored, after.current, first-1, first, last, stuckMessages-1)
	}
	t.Logf("after the stop: stored %d, current %d; the stuck batch %d..%d will be redelivered (%s)", after.stored, after.current, first, last, m[0][1])
}
