package conformance_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/conformance"
	"github.com/ferryio/ferry/internal/pgtest"
)

func needCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Skip("no C compiler: the probe plugin needs cc or gcc")
		}
	}
}

func run(t *testing.T, cfg conformance.Config) []conformance.Result {
	t.Helper()
	needCC(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg.WorkDir = t.TempDir()
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	// Without -v only the results that did not pass are logged: a failing test prints its
	// whole log, and CI keeps just the head and tail of it, where 50 passing lines would
	// push the failing one out of sight.
	passed := 0
	cfg.OnResult = func(r conformance.Result) {
		if r.Verdict == conformance.Pass {
			passed++
			if !testing.Verbose() {
				return
			}
		}
		t.Logf("%s · %s · %s · %s · %s", r.Scenario, r.Mode, r.Expected, r.Observed, r.Verdict)
	}
	defer func() { t.Logf("%d results passed", passed) }()
	res, err := conformance.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func ferryRuntime() []string { return []string{ferryBin, "run", "--config", "{config}"} }

// TestFerryConforms runs every scenario in every mode against Ferry, with a small soak.
func TestFerryConforms(t *testing.T) {
	scen := os.Getenv("FERRY_CONFORMANCE_SCENARIOS")
	var names []string
	if scen != "" {
		names = strings.Split(scen, ",")
	}
	// postgres-soak runs when FERRY_POSTGRES_URL is set (scripts/postgres.sh start; CI sets
	// it) and is "not supported" otherwise.
	pg := os.Getenv("FERRY_POSTGRES_URL")
	if pg != "" {
		pgtest.HoldRestarts(t) // tests/e2e restarts the cluster, maybe at the same time
	}
	// s3-soak likewise with the server of scripts/s3.sh (FERRY_S3_ENDPOINT).
	var s3 *conformance.S3Target
	if ep := os.Getenv("FERRY_S3_ENDPOINT"); ep != "" {
		s3 = &conformance.S3Target{Endpoint: ep, Region: os.Getenv("FERRY_S3_REGION"),
			AccessKey: os.Getenv("FERRY_S3_ACCESS_KEY"), SecretKey: os.Getenv("FERRY_S3_SECRET_KEY")}
	}
	// kafka-soak likewise with the broker of scripts/kafka.sh (FERRY_KAFKA_BOOTSTRAP).
	var kafka []string
	if bs := os.Getenv("FERRY_KAFKA_BOOTSTRAP"); bs != "" {
		kafka = strings.Split(bs, ",")
	}
	// iceberg-soak likewise with a SQL catalog on FERRY_POSTGRES_URL.
	res := run(t, conformance.Config{Runtime: ferryRuntime(), Soak: 3, Seed: 1, Scenarios: names, Postgres: pg, S3: s3, Kafka: kafka, Iceberg: pg,
		ServerCommand: []string{ferryBin, "server", "--addr", "{addr}", "--data", "{data}"}})
	// Every scenario in every mode, but late-commit, commit-order, commit-after-stop,
	// s3-soak, kafka-soak and iceberg-soak (sink_controlled only), storage-fault (the two
	// at-least-once modes) and the eight source scenarios, postgres-cdc and
	// iggy-replication included (once each, mode "source").
	if want := (len(conformance.Scenarios())-6-1-8)*len(conformance.AllModes) + 6 + 2 + 8; len(names) == 0 && len(res) != want {
		t.Fatalf("got %d results, want %d", len(res), want)
	}
	for _, r := range res {
		if (r.Scenario == "postgres-soak" || r.Scenario == "postgres-cdc") && pg == "" {
			if r.Verdict != conformance.NotSupported || !strings.Contains(r.Observed, "no PostgreSQL database given") {
				t.Errorf("%s/%s without FERRY_POSTGRES_URL: %s (%s), want not supported", r.Scenario, r.Mode, r.Verdict, r.Observed)
			}
			continue
		}
		if r.Scenario == "iceberg-soak" && pg == "" {
			if r.Verdict != conformance.NotSupported || !strings.Contains(r.Observed, "no Iceberg catalog database given") {
				t.Errorf("%s/%s without FERRY_POSTGRES_URL: %s (%s), want not supported", r.Scenario, r.Mode, r.Verdict, r.Observed)
			}
			continue
		}
		if r.Scenario == "kafka-soak" && kafka == nil {
			if r.Verdict != conformance.NotSupported || !strings.Contains(r.Observed, "no Kafka broker given") {
				t.Errorf("%s/%s without FERRY_KAFKA_BOOTSTRAP: %s (%s), want not supported", r.Scenario, r.Mode, r.Verdict, r.Observed)
			}
			continue
		}
		if r.Scenario == "s3-soak" && s3 == nil {
			if r.Verdict != conformance.NotSupported || !strings.Contains(r.Observed, "no S3 server given") {
				t.Errorf("%s/%s without FERRY_S3_ENDPOINT: %s (%s), want not supported", r.Scenario, r.Mode, r.Verdict, r.Observed)
			}
			continue
		}
		if r.Verdict != conformance.Pass {
			t.Errorf("%s/%s: %s: expected %s; observed %s", r.Scenario, r.Mode, r.Verdict, r.Expected, r.Observed)
		}
	}
}
