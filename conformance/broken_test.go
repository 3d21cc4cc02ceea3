package conformance_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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

// cc compiles the C file src of testdata into a shared library in a temp dir.
func cc(t *testing.T, src string) string {
	t.Helper()
	needCC(t)
	compiler := "cc"
	if _, err := exec.LookPath(compiler); err != nil {
		compiler = "gcc"
	}
	so := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".c")+".so")
	out, err := exec.Command(compiler, "-std=gnu11", "-O2", "-Wall", "-shared", "-fPIC", "-pthread", "-o", so, filepath.Join("testdata", src), "-ldl").CombinedOutput()
	if err != nil {
		t.Fatalf("compiling %s: %v\n%s", src, err, out)
	}
	return so
}

// wrapped is the Config of a fake runtime: script (run with the config path, $FERRY_BIN
// and $LIAR_PLUGIN set) puts the wrapper plugin built from testdata/src in front of the probe.
func wrapped(t *testing.T, src, script string) conformance.Config {
	t.Helper()
	so := cc(t, src)
	path := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".c")+".sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return conformance.Config{Runtime: []string{path, "{config}"}, RuntimeEnv: []string{"FERRY_BIN=" + ferryBin, "LIAR_PLUGIN=" + so}}
}

// wrapperScript is a fake runtime that puts a wrapper plugin in front of the probe: it
// points every connector file's path at $LIAR_PLUGIN (built by wrapped), which loads the
// real probe named by $LIAR_REAL_PLUGIN and breaks one promise of the runtime's (see each
// testdata/*.c), then runs Ferry.
const wrapperScript = `#!/bin/sh
dir=$(dirname "$1")
for f in "$dir"/connectors/*.toml; do
	LIAR_REAL_PLUGIN=$(sed -n 's/^path = "\(.*\)"$/\1/p' "$f")
	sed -i "s|^path = .*|path = \"$LIAR_PLUGIN\"|" "$f"
done
export LIAR_REAL_PLUGIN
export IGGY_CONNECTORS_PLUGINS_DIRECTORIES="[$(dirname "$LIAR_PLUGIN")]"
exec "$FERRY_BIN" run --config "$1"
`

// TestBrokenCommitCallbackFails proves that the suite fails a runtime whose commit
// callback returns 0 where it must refuse: commit-codes names every wrong code and
// commit-after-stop sees 0 from a stopped sink's callback.
func TestBrokenCommitCallbackFails(t *testing.T) {
	cfg := wrapped(t, "liarcommit.c", wrapperScript)
	cfg.Modes, cfg.Scenarios = []string{conformance.SinkControlled}, []string{"commit-codes", "commit-after-stop"}
	res := run(t, cfg)
	if len(res) != 2 {
		t.Fatalf("got %d results, want 2: %+v", len(res), res)
	}
	for _, r := range res {
		if r.Verdict != conformance.Fail {
			t.Errorf("%s: %s, want fail (observed %s)", r.Scenario, r.Verdict, r.Observed)
		}
	}
	const codes = "callback installed: true; ok 0, stale 0 (want -2), range 0 (want -3), foreign 0 (want -1), unknown 0 (want -1); delivered 100, lost 0, duplicated 0"
	if res[0].Scenario != "commit-codes" || res[0].Observed != codes {
		t.Errorf("%s observed %q, want commit-codes %q", res[0].Scenario, res[0].Observed, codes)
	}
	afterStop := regexp.MustCompile(`^failed [1-9][0-9]* times, closed; commit after the stop returned 0$`)
	if res[1].Scenario != "commit-after-stop" || !afterStop.MatchString(res[1].Observed) {
		t.Errorf("%s observed %q, want commit-after-stop matching %s", res[1].Scenario, res[1].Observed, afterStop)
	}
}

// TestBrokenHTTPStatusFails proves that the suite fails a runtime whose HTTP API reports a
// stopped sink as running without last_error (testdata/lyingapi.py: a reverse proxy on
// the suite's [http] address in front of Ferry's real API, which it moves to another
// port). The metrics are passed through unchanged, so the observed text shows them true
// and the status false.
func TestBrokenHTTPStatusFails(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3: the lying HTTP API is a Python script")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "lyingapi.py"))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, conformance.Config{Runtime: []string{"python3", script, "{config}"}, RuntimeEnv: []string{"FERRY_BIN=" + ferryBin},
		Modes: []string{conformance.AfterConsuming}, Scenarios: []string{"stopped-status"}, Timeout: 15 * time.Second})
	want := regexp.MustCompile(`^status "running"; metrics: errors [1-9][0-9]*, sinks running 0; timed out after 15s waiting for the HTTP API to show the sink stopped$`)
	if len(res) != 1 || res[0].Verdict != conformance.Fail || !want.MatchString(res[0].Observed) {
		t.Fatalf("results %+v, want stopped-status fail observing %s", res, want)
	}
}

// lossyServerScript is a server command that loses acknowledged data: it runs `ferry
// server`, and when started again on the same data directory (after the SIGKILL) it wipes
// that directory first and tells Ferry's server, which refuses a data directory that
// vanished, to begin empty (--init).
const lossyServerScript = `#!/bin/sh
init=
if [ -e "$2.started" ]; then rm -rf "$2"; init=--init; fi
touch "$2.started"
exec %q server --addr "$1" --data "$2" $init
`

// TestBrokenServerLosesData proves that server-sigkill does not blame the runtime for a
// server that lost acknowledged messages in the kill: it fails and says how many the
// server lost (all 200 acknowledged per partition).
func TestBrokenServerLosesData(t *testing.T) {
	script := filepath.Join(t.TempDir(), "lossy-server.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(lossyServerScript, ferryBin)), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, conformance.Config{Runtime: ferryRuntime(), ServerCommand: []string{script, "{addr}", "{data}"},
		Modes: []string{conformance.AfterConsuming}, Scenarios: []string{"server-sigkill"}})
	want := regexp.MustCompile(`^server SIGKILLed after [0-9]+ recorded, restarted; the server lost 400 acknowledged messages \(partition 0 holds 0 of 200, partition 1 holds 0 of 200\)$`)
	if len(res) != 1 || res[0].Verdict != conformance.Fail || !want.MatchString(res[0].Observed) {
		t.Fatalf("results %+v, want server-sigkill fail observing %s", res, want)
	}
}

// lateDeliveryScript is a fake runtime whose first process keeps delivering partitions
// after the rebalance moved them away: in the first instance (rt1) it points the connector
// file's path at testdata/latedelivery.c's wrapper ($LIAR_PLUGIN), which acknowledges each
// batch at once but hands it to the probe only once another process recorded its
// partition (or at close). Later instances run the probe as it is.
const lateDeliveryScript = `#!/bin/sh
dir=$(dirname "$1")
case "$dir" in
*/rt1)
	for f in "$dir"/connectors/*.toml; do
		LIAR_REAL_PLUGIN=$(sed -n 's/^path = "\(.*\)"$/\1/p' "$f")
		sed -i "s|^path = .*|path = \"$LIAR_PLUGIN\"|" "$f"
	done
	export LIAR_REAL_PLUGIN
	export IGGY_CONNECTORS_PLUGINS_DIRECTORIES="[$(dirname "$LIAR_PLUGIN")]"
	;;
esac
exec "$FERRY_BIN" run --config "$1"
`

// TestBrokenRebalanceFails proves that rebalance fails a runtime whose first process
// delivers partitions after they moved to the second: every message is still delivered
// once, so only the per-process check sees it.
func TestBrokenRebalanceFails(t *testing.T) {
	cfg := wrapped(t, "latedelivery.c", lateDeliveryScript)
	cfg.Modes, cfg.Scenarios = []string{conformance.AfterConsuming}, []string{"rebalance"}
	res := run(t, cfg)
	// The two partitions that moved when the second process joined come late from the
	// first: its 100 held messages of each, and whatever of the next 100 it polled before
	// the revocation completed (timing), so the message count is bounded, not fixed.
	want := regexp.MustCompile(`^4 partitions moved to the other process; 2 of them delivered by a process they had moved away from \(([0-9]+) messages\); delivered 1200, lost 0, duplicated 0$`)
	if len(res) != 1 || res[0].Verdict != conformance.Fail || !want.MatchString(res[0].Observed) {
		t.Fatalf("results %+v, want rebalance fail observing %s", res, want)
	}
	if n, _ := strconv.Atoi(want.FindStringSubmatch(res[0].Observed)[1]); n < 200 || n > 400 {
		t.Errorf("%d messages delivered after their partition moved, want 200 to 400 (two partitions' held 100, and up to 100 more each)", n)
	}
}

// strictScript is a runtime that rejects a source batch with a message it cannot encode
// as a whole, as Iggy's runtime does: it removes on_failure from the source's connector
// file, so Ferry applies its default (stop) to the batch instead of skipping the message.
const strictScript = `#!/bin/sh
dir=$(dirname "$1")
sed -i '/^on_failure = /d' "$dir"/connectors/source.toml
exec "$FERRY_BIN" run --config "$1"
`

// TestSourcePoisonBatchRejectedFails proves that source-poison fails a runtime that NACKs
// the whole batch of a poison message: the good messages of that batch are not stored and
// the runtime NACKed it (and stopped the source).
func TestSourcePoisonBatchRejectedFails(t *testing.T) {
	script := filepath.Join(t.TempDir(), "strict.sh")
	if err := os.WriteFile(script, []byte(strictScript), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, conformance.Config{Runtime: []string{script, "{config}"}, RuntimeEnv: []string{"FERRY_BIN=" + ferryBin},
		Scenarios: []string{"source-poison"}})
	if len(res) != 1 || res[0].Mode != conformance.SourceMode || res[0].Verdict != conformance.Fail {
		t.Fatalf("results %+v, want one source-poison failure", res)
	}
	// The first batch (0..49) holds poison 24 and 49: the runtime NACKs it and stops the
	// source, so nothing is stored (all 192 good messages lost) and the probe was closed
	// before it was done.
	if r := res[0]; r.Lost != 192 || !strings.HasPrefix(r.Observed, "topic: stored 0, lost 192") || !strings.Contains(r.Observed, "NACKs (runtime 1)") || !strings.Contains(r.Observed, "closed 1 times before it produced everything") {
		t.Fatalf("observed %q (lost %d), want stored 0, lost 192, one runtime NACK, closed once", r.Observed, r.Lost)
	}
}

// TestSourceEarlyAckFails proves that source-clean catches a runtime that ACKs a batch
// before Iggy stored it (testdata/early_ack.c ACKs each batch to the probe source as it is
// handed over): every one of the 12 ACKs came before its messages were appended.
func TestSourceEarlyAckFails(t *testing.T) {
	cfg := wrapped(t, "early_ack.c", wrapperScript)
	cfg.Scenarios = []string{"source-clean"}
	res := run(t, cfg)
	if len(res) != 1 || res[0].Verdict != conformance.Fail {
		t.Fatalf("results %+v, want one source-clean failure", res)
	}
	// The runtime's one-slot hand-over refuses a batch the probe sends before the runtime
	// took the last one (the probe counts a callback NACK and resends): how often depends
	// on scheduling, so the NACKs are not asserted; the ACKs and the early ones are. The
	// suite stops the runtime only once Iggy holds every ACKed message, so the last batch
	// was sent and its state saved: the restart resumes at 600, not at 550 with a 13th ACK.
	obs := res[0].Observed
	if !strings.HasPrefix(obs, "topic: stored 600, lost 0, duplicated 0; probe: 12 ACKs, ") ||
		!strings.HasSuffix(obs, ", 0 results refused, 12 batches ACKed before Iggy stored them; restarted at 600") {
		t.Fatalf("observed %q, want 600 stored, 12 ACKs, all 12 ACKed before Iggy stored them", obs)
	}
}
