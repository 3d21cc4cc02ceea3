package conformance_test

import (
	"os"
	"path/filepath"
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
// claiming after_consuming and sink_controlled: exactly the scenarios that depend on the
// offset waiting for the sink fail, the others still pass.
func TestBrokenRuntimeFails(t *testing.T) {
	script := filepath.Join(t.TempDir(), "liar.sh")
	if err := os.WriteFile(script, []byte(liarScript), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, conformance.Config{
		Runtime:    []string{script, "{config}"},
		RuntimeEnv: []string{"FERRY_BIN=" + ferryBin},
		Modes:      []string{conformance.AfterConsuming, conformance.SinkControlled},
		Scenarios:  []string{"clean", "failed-batch", "sigkill-mid-batch", "commit-codes", "sigterm-in-flight"},
	})
	want := map[string]conformance.Verdict{
		"clean/after_consuming":             conformance.Pass,
		"clean/sink_controlled":             conformance.Pass,
		"failed-batch/after_consuming":      conformance.Fail,
		"failed-batch/sink_controlled":      conformance.Fail,
		"sigkill-mid-batch/after_consuming": conformance.Fail,
		"sigkill-mid-batch/sink_controlled": conformance.Fail,
		"commit-codes/after_consuming":      conformance.Pass,
		"commit-codes/sink_controlled":      conformance.Fail, // no callback installed
		"sigterm-in-flight/after_consuming": conformance.Fail,
		"sigterm-in-flight/sink_controlled": conformance.Fail,
	}
	if len(res) != len(want) {
		t.Fatalf("got %d results, want %d", len(res), len(want))
	}
	for _, r := range res {
		k := r.Scenario + "/" + r.Mode
		if w, ok := want[k]; !ok || r.Verdict != w {
			t.Errorf("%s: verdict %s, want %s (observed %s)", k, r.Verdict, w, r.Observed)
		}
		if r.Verdict == conformance.Fail && r.Scenario != "commit-codes" && r.Lost == 0 {
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
