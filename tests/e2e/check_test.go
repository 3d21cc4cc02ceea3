package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: `ferry check` accepts the quickstart (one line per connector with its mode)
// and refuses a bad connector file with file:line: key: message and a non-zero exit.
func TestCheck(t *testing.T) {
	cmd := exec.Command(ferryBin, "check", "--config", filepath.Join("examples", "quickstart", "config.toml"))
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check quickstart: %v\n%s", err, out)
	}
	for _, want := range []string{"source quickstart_random", "sink   quickstart_file", "offset_commit=sink_controlled"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("check output lacks %q:\n%s", want, out)
		}
	}

	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	bad := strings.Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "o"), 10, 10), "after_consuming", "sometimes", 1)
	writeFile(t, filepath.Join(conns, "sink.toml"), bad)
	cmd = exec.Command(ferryBin, "check", "--config", runtimeConfig(t, dir, conns))
	out, err = cmd.CombinedOutput()
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) {
		t.Fatalf("check of a bad file: err = %v, want a non-zero exit\n%s", err, out)
	}
	if want := filepath.Join(conns, "sink.toml") + ":7: offset_commit: unknown value \"sometimes\""; !strings.Contains(string(out), want) {
		t.Fatalf("check output = %s, want it to contain %q", out, want)
	}
}
