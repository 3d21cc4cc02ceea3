package conformance_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/conformance"
	"github.com/ferryio/ferry/internal/pgtest"
)

// noExactlyOnceScript is a runtime whose PostgreSQL sink trusts Iggy's offsets: it turns
// exactly_once off in the connector file the suite wrote, then runs Ferry. The sink then
// neither records its offsets in the database nor seeks to them after a restart.
const noExactlyOnceScript = `#!/bin/sh
dir=$(dirname "$1")
for f in "$dir"/connectors/*.toml; do
	sed -i 's/^exactly_once = true$/exactly_once = false/' "$f"
done
exec "$FERRY_BIN" run --config "$1"
`

func pgURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("FERRY_POSTGRES_URL")
	if url == "" {
		t.Skip("FERRY_POSTGRES_URL is not set: run `eval \"$(bash scripts/postgres.sh start)\"` for the PostgreSQL scenarios")
	}
	pgtest.HoldRestarts(t) // tests/e2e restarts the cluster, maybe at the same time
	return url
}

// TestPostgresSoakCatchesNoExactlyOnce proves that postgres-soak fails a sink that is not
// exactly-once, in every mode, for the reason each mode's forced kill makes certain. With 3
// kills the third lands at a held offset store: the rows of that batch are in the table and
// the group's stored offset is below them, so after_consuming and sink_controlled, resuming
// from Iggy's offset, write them again (duplicated > 0). The second lands while the sink's
// write waits on the suite's table lock: under after_polling the poll already stored the
// batch's offset, so resuming from Iggy's offset skips it (lost > 0).
func TestPostgresSoakCatchesNoExactlyOnce(t *testing.T) {
	url := pgURL(t)
	script := filepath.Join(t.TempDir(), "no-exactly-once.sh")
	if err := os.WriteFile(script, []byte(noExactlyOnceScript), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, conformance.Config{Runtime: []string{script, "{config}"}, RuntimeEnv: []string{"FERRY_BIN=" + ferryBin},
		Scenarios: []string{"postgres-soak"}, Soak: 3, Seed: 1, Postgres: url})
	if len(res) != len(conformance.AllModes) {
		t.Fatalf("got %d results, want %d", len(res), len(conformance.AllModes))
	}
	for i, r := range res {
		if r.Mode != conformance.AllModes[i] || r.Verdict != conformance.Fail || r.Kills != 3 {
			t.Errorf("result %d: %s/%s %s after %d kills, want %s fail after 3 (observed %s)", i, r.Scenario, r.Mode, r.Verdict, r.Kills, conformance.AllModes[i], r.Observed)
			continue
		}
		switch r.Mode {
		case conformance.AfterPolling:
			if r.Lost == 0 || !strings.Contains(r.Observed, "1 at blocked writes (1 with the stored offset past the rows)") {
				t.Errorf("%s: lost %d, observed %s; want a loss after the kill at a blocked write", r.Mode, r.Lost, r.Observed)
			}
		default:
			if r.Duplicated == 0 || !strings.Contains(r.Observed, "1 at held offset stores (1 with rows past the stored offset)") {
				t.Errorf("%s: duplicated %d, observed %s; want duplicates after the kill at a held store", r.Mode, r.Duplicated, r.Observed)
			}
		}
	}
}

// TestPostgresSoakUnreachable: a database that does not answer fails the scenario with
// the reason, it does not crash the suite or count as "not supported".
func TestPostgresSoakUnreachable(t *testing.T) {
	res := run(t, conformance.Config{Runtime: ferryRuntime(), Scenarios: []string{"postgres-soak"}, Soak: 1,
		Modes: []string{conformance.AfterConsuming}, Postgres: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"})
	if len(res) != 1 || res[0].Verdict != conformance.Fail || !strings.Contains(res[0].Observed, "PostgreSQL (--postgres)") {
		t.Fatalf("results %+v, want postgres-soak/after_consuming fail naming --postgres", res)
	}
}
