// Package promtooltest lints a metrics exposition with Prometheus' own checker,
// `promtool check metrics`, for the metrics tests (connect/metrics, tests/e2e). It is a
// test helper: only _test.go files import it.
//
// The checker is the one FERRY_PROMTOOL names (CI sets it, see .ci/run); when the
// variable is unset, /usr/bin/promtool (Debian's prometheus package). When neither is
// there the test is skipped, unless FERRY_PROMTOOL or CI is set: then a missing or
// broken promtool fails the test, so a machine without it never passes as "skipped".
package promtooltest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// EnvPromtool names the environment variable with promtool's path.
const EnvPromtool = "FERRY_PROMTOOL"

// DefaultPath is the promtool used when EnvPromtool is unset.
const DefaultPath = "/usr/bin/promtool"

// path returns the promtool to run; it skips or fails the test when there is none (see
// the package comment).
func path(t testing.TB) string {
	t.Helper()
	p := os.Getenv(EnvPromtool)
	if p == "" {
		p = DefaultPath
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv(EnvPromtool) != "" || os.Getenv("CI") != "" {
			t.Fatalf("promtool %s: %v (%s or CI is set: it must be installed; .ci/run installs Debian's prometheus package)", p, err, EnvPromtool)
		}
		t.Skipf("no promtool: %s is unset and %s is missing (.ci/run installs it)", EnvPromtool, DefaultPath)
	}
	return p
}

// Check fails the test unless `promtool check metrics` accepts exposition without a
// single complaint (it exits 0 and prints nothing).
func Check(t testing.TB, exposition []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
