package ferrycli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// startRunWithSink runs `ferry run --embedded` on a config of one file sink "out" (stream
// s, topic t, raw) with the API on a free port; it returns the config's path, the embedded
// server's address and the sink's output file. The run stops when the test ends.
func startRunWithSink(t *testing.T) (cfg, iggyAddr, out string) {
	t.Helper()
	cfg, iggyAddr, out, _ = startRunWith(t, nil, nil, func(logs string) bool { return strings.Contains(logs, "sink running") })
	return cfg, iggyAddr, out
}

// startRunWith is startRunWithSink with more connector files (name → content), Go
// connectors (nil: the built-ins) and the condition on the logs that says it started; it
// also returns the API's URL.
func startRunWith(t *testing.T, files map[string]string, builtins *sdk.Registry, ready func(logs string) bool) (cfg, iggyAddr, out, api string) {
	t.Helper()
	dir := t.TempDir()
	out = filepath.Join(dir, "out.jsonl")
	if err := os.MkdirAll(filepath.Join(dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	sink := fmt.Sprintf(`type = "sink"
key = "out"
enabled = true
version = 0
name = "file"
path = "builtin:file"

[[streams]]
stream = "s"
topics = ["t"]
schema = "raw"
poll_interval = "10ms"

[plugin_config]
path = %q
`, out)
	if err := os.WriteFile(filepath.Join(dir, "connectors", "out.toml"), []byte(sink), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg = filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `[iggy]
address = "127.0.0.1:0"
username = "iggy"
password = "iggy"

[state]
path = %q

[connectors]
config_type = "local"
config_dir = %q

[embedded]
data_dir = %q

[http]
enabled = true
address = "127.0.0.1:0"
`, filepath.Join(dir, "state"), filepath.Join(dir, "connectors"), filepath.Join(dir, "data")), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	f := runFlagsFor(cfg, true)
	f.logLevel, f.logTo, f.progress, f.printStatus, f.builtins = "info", logs, 0, false, builtins
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runRuntime(ctx, f) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v\n%s", err, logs)
		}
	})
	addrRE := regexp.MustCompile(`msg="embedded Iggy server started" addr=(\S+)`)
	testkit.WaitFor(t, "the run to start its server and its API", func() bool {
		_, err := os.Stat(filepath.Join(dir, "state", apiURLFile))
		return addrRE.MatchString(logs.String()) && err == nil && ready(logs.String())
	})
	u, err := os.ReadFile(filepath.Join(dir, "state", apiURLFile))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, addrRE.FindStringSubmatch(logs.String())[1], out, strings.TrimSpace(string(u))
}

// control runs `ferry ACTION ARGS --config cfg` and returns its stdout and error.
func runControl(t *testing.T, cfg string, args ...string) (string, error) {
	t.Helper()
	root := New().command()
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(args, "--config", cfg))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestControlCommands: ferry pause, resume, stop and restart drive a running sink through
// the API a running ferry run wrote to its state directory: paused, what is produced
// meanwhile waits; resumed, it is written; stopped and restarted. Unknown keys and a pause
// of a stopped sink are refused with the API's words.
func TestControlCommands(t *testing.T) {
	cfg, addr, out := startRunWithSink(t)
	produce := func(lines string) {
		t.Helper()
		root := New().command()
		root.SetIn(strings.NewReader(lines))
		root.SetErr(&lockedBuffer{})
		root.SetArgs([]string{"produce", "s", "t", "--addr", addr, "--username", "iggy", "--password", "iggy"})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := func(cmdOut string, err error, exp string) {
		t.Helper()
		if err != nil || cmdOut != exp {
			t.Fatalf("got %q, %v; want %q", cmdOut, err, exp)
		}
	}
	status := func() string {
		st, err := runControl(t, cfg, "status")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(strings.Split(st, "\n")[1])[2]
	}
	produce("a\nb\n")
	testkit.WaitFor(t, "2 lines in the sink's file", func() bool { return lines(out) == 2 })

	o, err := runControl(t, cfg, "pause", "out")
	want(o, err, "sink out paused\n")
	st, _ := runControl(t, cfg, "status")
	if !strings.Contains(st, "running (paused)") {
		t.Fatalf("status after pause:\n%s", st)
	}
	o, err = runControl(t, cfg, "resume", "out")
	want(o, err, "sink out resumed\n")
	produce("c\n")
	testkit.WaitFor(t, "3 lines in the sink's file", func() bool { return lines(out) == 3 })

	o, err = runControl(t, cfg, "stop", "out")
	want(o, err, "sink out stopped\n")
	if s := status(); s != "stopped" {
		t.Fatalf("status after stop: %s", s)
	}
	if _, err := runControl(t, cfg, "pause", "out"); err == nil || !strings.Contains(err.Error(), "409 Conflict: sink_not_running") {
		t.Errorf("pause of a stopped sink: %v", err)
	}
	o, err = runControl(t, cfg, "restart", "out", "--kind", "sink")
	want(o, err, "sink out restarted\n")
	testkit.WaitFor(t, "the restarted sink running", func() bool { return status() == "running" })
	produce("d\n")
	testkit.WaitFor(t, "4 lines in the sink's file", func() bool { return lines(out) == 4 })

	if _, err := runControl(t, cfg, "restart", "nope"); err == nil || err.Error() != `no sink or source "nope" runs there (ferry status lists them)` {
		t.Errorf("restart of an unknown key: %v", err)
	}
	if _, err := runControl(t, cfg, "pause", "nope"); err == nil || !strings.HasPrefix(err.Error(), "POST /sinks/nope/pause: 404 Not Found: sink_not_found: ") ||
		!strings.HasSuffix(err.Error(), `(no sink "nope" runs there: ferry status lists them)`) {
		t.Errorf("pause of an unknown key: %v", err)
	}
	if _, err := runControl(t, cfg, "stop", "out", "--kind", "other"); err == nil || err.Error() != `--kind "other": want sink or source` {
		t.Errorf("--kind other: %v", err)
	}
}
