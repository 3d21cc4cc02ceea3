package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSystemdUnit: deploy/ferry.service passes `systemd-analyze verify` with no message
// at all (a warning is a failure too), with its ExecStart pointed at the binary under test
// (verify checks that the command exists), keeps the settings docs/deploy.md promises,
// and its sandbox's offline exposure score stays at most 1.5 (it is 1.2; weakening the
// sandbox raises it). systemd-analyze comes from Debian's systemd package (.ci/run).
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "ferry.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID", "ReadWritePaths=/var/lib/ferry",
		"StateDirectory=ferry", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "KillMode=mixed",
		"ExecStart=/usr/local/bin/ferry run --config /etc/ferry/config.toml --progress 0"} {
		if !strings.Contains(string(unit), "\n"+line+"\n") {
			t.Errorf("deploy/ferry.service lacks the line %q", line)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ferry.service")
	writeFile(t, path, strings.Replace(string(unit), "ExecStart=/usr/local/bin/ferry ", "ExecStart="+ferryBin+" ", 1))
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for ferry\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if score, _ := strconv.ParseFloat(string(m[1]), 64); score > 1.5 {
		t.Fatalf("exposure level %.1f, want at most 1.5:\n%s", score, out)
	}

	// The check can fail: a unit with a typo is refused.
	writeFile(t, path, strings.Replace(string(unit), "ProtectSystem=strict", "ProtectSystem=strickt", 1))
	if out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput(); err == nil && len(out) == 0 {
		t.Fatal("systemd-analyze verify accepted ProtectSystem=strickt")
	}
}

// TestAlertRules: deploy/ferry-alerts.yml passes `promtool check rules` (8 rules), and
// its unit tests (deploy/ferry-alerts.test.yml: each alert fires on the series it is
// meant for, at the time it should, with its labels and annotations, and not before)
// pass `promtool test rules`. promtool comes from Debian's prometheus package (.ci/run).
func TestAlertRules(t *testing.T) {
	deploy := filepath.Join(repoRoot, "deploy")
	cmd := exec.Command("promtool", "check", "rules", "ferry-alerts.yml")
	cmd.Dir = deploy
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 8 rules found") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd = exec.Command("promtool", "test", "rules", "ferry-alerts.test.yml")
	cmd.Dir = deploy
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestVersion: a plain `go build` (the binary under test) reports the VERSION file's
// version in `ferry version` and `ferry --version`, never "(devel)"; a build with the
// README's -ldflags -X reports the version given, in both and in GET /stats.
func TestVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(want) {
		t.Fatalf("VERSION holds %q, want MAJOR.MINOR.PATCH", want)
	}
	check := func(bin, version string) {
		t.Helper()
		for _, args := range [][]string{{"version"}, {"--version"}} {
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
			}
			if line := "ferry " + version + " (Iggy server 0.9, binary protocol 0.11.0)\n"; string(out) != line {
				t.Fatalf("ferry %v printed %q, want %q", args, out, line)
			}
		}
	}
	check(ferryBin, want)

	stamped := filepath.Join(t.TempDir(), "ferry")
	build := exec.Command("go", "build", "-ldflags", "-X main.Version="+want+"-e2e", "-o", stamped, "./cmd/ferry")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags: %v\n%s", err, out)
	}
	check(stamped, want+"-e2e")

	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	if err := os.MkdirAll(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := apiConfig(t, dir, conns)
	cmd := exec.Command(stamped, "run", "--config", cfg, "--embedded", "--progress", "0")
	cmd.Dir = dir
	p := startCmd(t, "stamped run", cmd)
	url := p.apiURL()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats struct {
		Version string `json:"connectors_runtime_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	if stats.Version != want+"-e2e" {
		t.Fatalf("/stats connectors_runtime_version %q, want %q", stats.Version, want+"-e2e")
	}
	p.stop(30 * time.Second)
}
