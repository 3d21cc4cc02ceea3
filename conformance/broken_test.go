package conformance_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/conformance"
)

// liarScript is a fake runtime: it claims every mode but deletes offset_commit from the
// connector file the suite wrote, then runs Ferry, so every connector really runs
// after_polling (commit on poll) while the suite expects at-least-once.
const liarScript = `#!/bin/sh
dir=$(dirname "$1")
for f in "$dir"/connectors/*.toml; do
	sed -i '/^offset_commit = /d' "$f"
done
exec "$FERRY_BIN" run --config "$1"
`

// TestBrokenRuntimeFails proves that the suite catches a runtime that commits on poll while
// claiming after_consuming and sink_controlled: every scenario whose outcome depends on the
// offset waiting for the sink fails, with a loss (or, for the commit codes, no callback; for
// the late commit, an offset stored past what the sink committed).
// (Scenarios without a crash or a failure are not asserted here: Ferry's after_polling
// delivers the batches it polled before a graceful stop, so a SIGTERM loses nothing in
// either mode and sigterm-in-flight cannot tell them apart.)
func TestBrokenRuntimeFails(t *testing.T) {
	script := filepath.Join(t.TempDir(), "liar.sh")
	if err := os.WriteFile(script, []byte(liarScript), 0o755); err != nil {
		t.Fatal(err)
	}
	liar := conformance.Config{Runtime: []string{script, "{config}"}, RuntimeEnv: []string{"FERRY_BIN=" + ferryBin}}
	cfg := liar
	cfg.Modes = []string{conformance.AfterConsuming, conformance.SinkControlled}
	cfg.Scenarios = []string{"failed-batch", "sigkill-mid-batch"}
	res := run(t, cfg)
	cfg = liar
	cfg.Modes = []string{conformance.SinkControlled}
	cfg.Scenarios = []string{"commit-codes", "commit-order", "late-commit"}
	res = append(res, run(t, cfg)...)
	want := []string{
		"failed-batch/after_consuming", "failed-batch/sink_controlled",
		"sigkill-mid-batch/after_consuming", "sigkill-mid-batch/sink_controlled",
		"commit-codes/sink_controlled", "commit-order/sink_controlled", "late-commit/sink_controlled",
	}
	if len(res) != len(want) {
		t.Fatalf("got %d results, want %d", len(res), len(want))
	}
	for i, r := range res {
		k := r.Scenario + "/" + r.Mode
		if k != want[i] || r.Verdict != conformance.Fail {
			t.Errorf("result %d: %s %s, want %s fail (observed %s)", i, k, r.Verdict, want[i], r.Observed)
		}
		switch {
		case r.Scenario == "commit-codes":
			if !strings.Contains(r.Observed, "callback installed: false") {
				t.Errorf("%s: observed %q, want no callback installed", k, r.Observed)
			}
		case r.Scenario == "commit-order":
			// No callback: the probe never commits, so no code is recorded.
			if !strings.HasPrefix(r.Observed, "higher commit codes map[], lower commit codes map[]") {
				t.Errorf("%s: observed %q, want no commit codes", k, r.Observed)
			}
		case r.Scenario == "late-commit":
			// Stored at poll: the offset is past the batch the sink never committed.
			if !strings.HasPrefix(r.Observed, "stored offset 299 at the kill") || r.Duplicated != 0 {
				t.Errorf("%s: observed %q, want stored offset 299 and no redelivery", k, r.Observed)
			}
		case r.Lost == 0:
			t.Errorf("%s failed without a loss: %s", k, r.Observed)
		}
	}
}

// TestUnsupportedMode: a runtime that refuses to start with a mode yields "not supported",
// not a crash of the suite.
func TestUnsupportedMode(t *testing.T) {
	script := filepath.Join(t.TempDir(), "picky.sh")
	const picky = `#!/bin/sh
if grep -q '^offset_commit = "sink_controlled"' "$(dirname "$1")"/connectors/*.toml; then
	echo "unknown field offset_commit" >&2
	exit 3
fi
exec "$FERRY_BIN" run --config "$1"
`
	if err := os.WriteFile(script, []byte(picky), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, conformance.Config{
		Runtime: []string{script, "{config}"}, RuntimeEnv: []string{"FERRY_BIN=" + ferryBin},
		Modes: []string{conformance.AfterConsuming, conformance.SinkControlled}, Scenarios: []string{"clean"},
	})
	if len(res) != 2 || res[0].Verdict != conformance.Pass || res[1].Verdict != conformance.NotSupported {
		t.Fatalf("results %+v, want clean/after_consuming pass and clean/sink_controlled not supported", res)
	}
}

// noHTTPScript is a runtime without the HTTP API: it turns [http] off in the config the
// suite wrote, then runs Ferry.
const noHTTPScript = `#!/bin/sh
sed -i 's/^enabled = true$/enabled = false/' "$1"
exec "$FERRY_BIN" run --config "$1"
`

// TestNoHTTPAPINotSupported proves that a runtime without the HTTP API gets "not supported"
// for stopped-status, not a failure or a crash of the suite.
func TestNoHTTPAPINotSupported(t *testing.T) {
	script := filepath.Join(t.TempDir(), "nohttp.sh")
	if err := os.WriteFile(script, []byte(noHTTPScript), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, conformance.Config{Runtime: []string{script, "{config}"}, RuntimeEnv: []string{"FERRY_BIN=" + ferryBin},
		Modes: []string{conformance.AfterConsuming}, Scenarios: []string{"stopped-status"}})
	if len(res) != 1 || res[0].Verdict != conformance.NotSupported || !strings.Contains(res[0].Observed, "no Iggy-style HTTP API") {
		t.Fatalf("results %+v, want stopped-status/after_consuming not supported (no Iggy-style HTTP API)", res)
	}
}
