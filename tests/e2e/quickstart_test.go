package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuickstart runs the README's quickstart command (examples/quickstart, embedded
// server) with --exit-when-idle, from a fresh working directory, and checks that the file
// holds exactly the 200,000 messages, offsets 0..199999 once each, and that the source and
// the sink stopped cleanly (exit status 0); then that a rerun says it is caught up.
func TestQuickstart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(repoRoot, "examples", "quickstart", "config.toml")
	env := []string{"IGGY_CONNECTORS_CONNECTORS_CONFIG_DIR=" + filepath.Join(repoRoot, "examples", "quickstart", "connectors"),
		"IGGY_CONNECTORS_HTTP_ADDRESS=127.0.0.1:0"} // the API on a free port: 8081 may be taken

	p := startFerry(t, "quickstart", dir, env, "run", "--config", cfg, "--embedded",
		"--embedded-addr", "127.0.0.1:0", "--exit-when-idle", "1s", "--progress", "100ms")
	p.wait(20 * time.Second)
	if !strings.Contains(p.out.String(), `msg="HTTP API started"`) {
		t.Fatal("the quickstart did not start its HTTP API")
	}
	// It says once that everything is delivered, and stops printing rates of 0/s.
	caught := "ferry: caught up: 200000 messages produced, 200000 delivered and committed by the sinks (quickstart_file → quickstart/events.jsonl); offsets and lag: ferry status --url http://127.0.0.1:"
	if n := strings.Count(p.out.String(), caught); n != 1 {
		t.Fatalf("the caught-up line appears %d times, want once:\n%s", n, tail(p.out.String(), 20))
	}
	after := p.out.String()[strings.Index(p.out.String(), caught):]
	if strings.Count(after, "(0/s)") > 2 { // the final summary line only (produced, delivered)
		t.Fatalf("progress lines after the caught-up line:\n%s", after)
	}
	recs := readRecords(t, filepath.Join(dir, "quickstart", "events.jsonl"))
	if len(recs) != 200000 {
		t.Fatalf("%d lines, want 200000", len(recs))
	}
	for i, r := range recs {
		if r.Offset != uint64(i) || r.Partition != 0 || r.seq(t) != uint64(i) {
			t.Fatalf("line %d: partition %d offset %d id %s; want 0/%d id %d", i+1, r.Partition, r.Offset, r.ID, i, i+1)
		}
	}

	// A rerun has nothing new: the source's state says it is done and the sink polls
	// nothing, yet it says it is caught up (from Iggy's offsets; before, only a batch
	// polled told the sink's tables where the partition ended, and the line never came).
	p = startFerry(t, "quickstart rerun", dir, env, "run", "--config", cfg, "--embedded",
		"--embedded-addr", "127.0.0.1:0", "--exit-when-idle", "3s", "--progress", "100ms")
	p.wait(20 * time.Second)
	if again := "ferry: caught up: 200000 messages produced (0 by this run), 200000 delivered and committed by the sinks"; strings.Count(p.out.String(), again) != 1 {
		t.Fatalf("the rerun does not say once that it is caught up (%q):\n%s", again, tail(p.out.String(), 20))
	}
	if n := countLines(filepath.Join(dir, "quickstart", "events.jsonl")); n != 200000 {
		t.Fatalf("after the rerun %d lines, want 200000", n)
	}
}
