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
// the sink stopped cleanly (exit status 0).
func TestQuickstart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(repoRoot, "examples", "quickstart", "config.toml")
	env := []string{"IGGY_CONNECTORS_CONNECTORS_CONFIG_DIR=" + filepath.Join(repoRoot, "examples", "quickstart", "connectors"),
		"IGGY_CONNECTORS_HTTP_ADDRESS=127.0.0.1:0"} // the API on a free port: 8081 may be taken

	p := startFerry(t, "quickstart", dir, env, "run", "--config", cfg, "--embedded",
		"--embedded-addr", "127.0.0.1:0", "--exit-when-idle", "1s")
	p.wait(20 * time.Second)
	if !strings.Contains(p.out.String(), `msg="HTTP API started"`) {
		t.Fatal("the quickstart did not start its HTTP API")
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
}
