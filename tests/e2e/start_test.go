package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestRunRefusesATakenAPIPortFirst: with [http] address on a port another process holds,
// `ferry run` fails on the listen before it connects or starts a connector: exit 1, the
// listen error, and not one message of its source on the server. (It used to start the
// connectors first: its source had sent thousands of messages when the listen failed.)
func TestRunRefusesATakenAPIPortFirst(t *testing.T) {
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	client := dial(t, addr)
	createTopic(t, client, 1)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	conns := filepath.Join(dir, "connectors")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", 1_000_000, 0, 100))
	cfg := remoteConfigWith(t, dir, addr, conns, fmt.Sprintf("[http]\nenabled = true\naddress = %q\n", taken.Addr().String()))
	p := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--progress", "0")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not exit within 30s")
	}
	if code := p.exitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	want := "ferry: HTTP API: listen on http.address " + taken.Addr().String() + ": listen tcp " + taken.Addr().String() + ": bind: address already in use"
	if !strings.Contains(p.out.String(), want) {
		t.Fatalf("output lacks %q", want)
	}
	for _, never := range []string{"source running", "connect to Iggy"} {
		if strings.Contains(p.out.String(), never) {
			t.Fatalf("output has %q: something started before the listen", never)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topic, err := client.GetTopic(ctx, iggy.Name("s"), iggy.Name("t"))
	if err != nil {
		t.Fatal(err)
	}
	if topic.MessagesCount != 0 {
		t.Fatalf("s/t holds %d messages, want none", topic.MessagesCount)
	}
}

// TestRunAPIPortZeroFromEnv: IGGY_CONNECTORS_HTTP_ADDRESS (upstream's override of [http]
// address) with port 0 gives each process a free port: the bound address is logged at INFO,
// written to <state>/http.url, answers there, and `ferry status` finds it with no --url; the
// file is removed at a clean stop.
func TestRunAPIPortZeroFromEnv(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", 1_000_000, 50, 10))
	cfg := runtimeConfig(t, dir, conns)
	// The file says port 8081 and disabled; the environment wins, as upstream.
	env := []string{"IGGY_CONNECTORS_HTTP_ENABLED=true", "IGGY_CONNECTORS_HTTP_ADDRESS=127.0.0.1:0", "FERRY_API_URL="}
	p := startFerry(t, "run", dir, env, "run", "--config", cfg, "--embedded", "--progress", "0")
	urlFile := filepath.Join(dir, "state", "http.url")
	started := regexp.MustCompile(`level=INFO msg="HTTP API started" address=(127\.0\.0\.1:(\d+)) `)
	var url string
	var m []string
	// Both: the file is written before the line is logged, and the line reaches the
	// test's buffer through a pipe some time after that.
	testkit.WaitFor(t, "http.url and the HTTP API started line", func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		b, err := os.ReadFile(urlFile)
		url = strings.TrimSpace(string(b))
		m = started.FindStringSubmatch(p.out.String())
		return err == nil && url != "" && m != nil
	})
	if m[2] == "0" || url != "http://"+m[1] {
		t.Fatalf("http.url = %q, log line %q; want the bound address logged at INFO and written", url, m)
	}
	api := apiClient{t: t, base: url}
	var sources []struct{ Key, Status string }
	testkit.WaitFor(t, "source gen running", func() bool {
		api.getJSON("/sources", &sources)
		return len(sources) == 1 && sources[0].Key == "gen" && sources[0].Status == "running"
	})
	cmd := exec.Command(ferryBin, "status", "--config", cfg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FERRY_API_URL=")
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^source\s+gen\s+running`).Match(out) {
		t.Fatalf("ferry status without --url: %v\n%s", err, out)
	}
	p.stop(30 * time.Second)
	if _, err := os.Stat(urlFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after the stop: %v; want it removed", urlFile, err)
	}
}

// TestRunIsolatesConnectorErrors: one runtime, upstream's per-connector mistakes beside
// healthy connectors: an invalid poll_interval, a plugin that is not there, a source whose
// state path has a missing directory. Each is in error with its message (upstream's words
// first) in the API and the metrics; the process, /health and the healthy sink and source
// run; `ferry check` reports the same three messages and exits 1.
func TestRunIsolatesConnectorErrors(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.jsonl")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", 1_000_000, 200, 10))
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("s", "t", "after_consuming", out, 100, 100000))
	badSink := strings.NewReplacer(`key = "out"`, `key = "stdout_invalid"`, `poll_interval = "5ms"`, `poll_interval = "not-a-valid-duration"`).
		Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "never.jsonl"), 100, 100000))
	badFile := filepath.Join(conns, "stdout_invalid.toml")
	writeFile(t, badFile, badSink)
	lib := filepath.Join(dir, "nowhere", "libiggy_connector_stdout_sink")
	writeFile(t, filepath.Join(conns, "missing.toml"), strings.NewReplacer(`key = "out"`, `key = "missing_plugin"`, `path = "builtin:file"`, fmt.Sprintf("path = %q", lib)).
		Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "never2.jsonl"), 100, 100000)))
	writeFile(t, filepath.Join(conns, "state.toml"), strings.Replace(randomSource("s", "t", 10, 0, 10), `key = "gen"`, `key = "random_invalid/state_missing_parent"`, 1))
	cfg := runtimeConfig(t, dir, conns)
	env := []string{"IGGY_CONNECTORS_HTTP_ENABLED=true", "IGGY_CONNECTORS_HTTP_ADDRESS=127.0.0.1:0",
		"IGGY_CONNECTORS_HTTP_METRICS_ENABLED=true", "IGGY_CONNECTORS_HTTP_METRICS_ENDPOINT=/metrics"}

	state := filepath.Join(dir, "state")
	wantSink := badFile + `:14: streams[0].poll_interval: Invalid poll interval: invalid duration "not-a-valid-duration": expected a number at "not-a-valid-duration"`
	wantMissing := "Failed to resolve plugin path: Plugin library not found: " + lib + ".so does not exist"
	wantState := "Failed to load source state: Cannot open state file " + filepath.Join(state, "source_random_invalid", "state_missing_parent.state") +
		": its directory " + filepath.Join(state, "source_random_invalid") + ": stat " + filepath.Join(state, "source_random_invalid") + ": no such file or directory"

	// check first: the state dir does not exist yet (run creates it), which is no error.
	cmd := exec.Command(ferryBin, "check", "--config", cfg)
	cmd.Env = append(os.Environ(), env...)
	got, err := cmd.CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("check: %v, want exit 1\n%s", err, got)
	}
	for _, want := range []string{"ERROR: " + wantSink, "ERROR: " + wantMissing, "ERROR: " + wantState, "check: 3 connector(s) with problems"} {
		if !strings.Contains(string(got), want) {
			t.Fatalf("check output lacks %q:\n%s", want, got)
		}
	}
	for _, ok := range []string{`(?m)^source gen .* ok$`, `(?m)^sink   out .* ok$`} {
		if !regexp.MustCompile(ok).Match(got) {
			t.Fatalf("check output lacks a line %s:\n%s", ok, got)
		}
	}

	p := startFerry(t, "run", dir, env, "run", "--config", cfg, "--embedded", "--progress", "0")
	var url string
	testkit.WaitFor(t, "http.url", func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		b, err := os.ReadFile(filepath.Join(state, "http.url"))
		url = strings.TrimSpace(string(b))
		return err == nil && url != ""
	})
	api := apiClient{t: t, base: url}
	testkit.WaitFor(t, "100 messages through the healthy sink", func() bool { return countLines(out) >= 100 })
	type info struct {
		Key       string `json:"key"`
		Name      string `json:"name"`
		Path      string `json:"path"`
		Status    string `json:"status"`
		LastError *struct {
			Message string `json:"message"`
		} `json:"last_error"`
	}
	byKey := func(path string) map[string]info {
		var list []info
		api.getJSON(path, &list)
		m := map[string]info{}
		for _, in := range list {
			m[in.Key] = in
		}
		return m
	}
	var sinks, sources map[string]info
	testkit.WaitFor(t, "the three in error", func() bool {
		sinks, sources = byKey("/sinks"), byKey("/sources")
		return sinks["missing_plugin"].Status == "error" && sinks["stdout_invalid"].Status == "error" &&
			sources["random_invalid/state_missing_parent"].Status == "error"
	})
	if len(sinks) != 3 || len(sources) != 2 {
		t.Fatalf("sinks %v sources %v; want 3 and 2", sinks, sources)
	}
	for _, c := range []struct {
		in   info
		want string
	}{{sinks["stdout_invalid"], wantSink}, {sinks["missing_plugin"], wantMissing}, {sources["random_invalid/state_missing_parent"], wantState}} {
		if c.in.LastError == nil || c.in.LastError.Message != c.want {
			t.Fatalf("%s: last_error %+v, want %q", c.in.Key, c.in.LastError, c.want)
		}
	}
	if in := sinks["stdout_invalid"]; in.Name != "file out" || in.Path != "builtin:file" {
		t.Fatalf("stdout_invalid: name %q path %q, want the file's (as upstream lists a failed connector)", in.Name, in.Path)
	}
	for _, c := range []info{sinks["out"], sources["gen"]} {
		if c.Status != "running" || c.LastError != nil {
			t.Fatalf("%s: %+v, want running without last_error", c.Key, c)
		}
	}
	if code, body := api.do("GET", "/health", ""); code != 200 || !strings.Contains(string(body), `"healthy"`) {
		t.Fatalf("/health: %d %s", code, body)
	}
	_, metrics := api.do("GET", "/metrics", "")
	for _, want := range []string{
		`ferry_connector_status{connector_key="stdout_invalid",connector_type="sink",status="error"} 1`,
		`ferry_connector_status{connector_key="random_invalid/state_missing_parent",connector_type="source",status="error"} 1`,
		`ferry_connector_status{connector_key="out",connector_type="sink",status="running"} 1`,
		"iggy_connectors_sinks_total 3\n", "iggy_connectors_sinks_running 1\n", "iggy_connectors_sources_total 2\n",
	} {
		if !strings.Contains(string(metrics), want) {
			t.Fatalf("metrics lack %s:\n%s", want, metrics)
		}
	}
	// A run with connectors in error ends with status 1 (a service manager can tell).
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s")
	}
	if code := p.exitCode(); code != 1 || !strings.Contains(p.out.String(), "connectors in error: ") {
		t.Fatalf("exit code %d, want 1 naming the connectors in error", code)
	}
}

// runAndCheck runs `ferry check` and `ferry run --embedded` on cfg and returns their outputs;
// both must exit 1 (run within 60 s).
func runAndCheck(t *testing.T, dir, cfg string, env []string) (checkOut, runOut string) {
	t.Helper()
	cmd := exec.Command(ferryBin, "check", "--config", cfg)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("check: %v, want exit 1\n%s", err, out)
	}
	p := startFerry(t, "run", dir, env, "run", "--config", cfg, "--embedded", "--progress", "0", "--status=false")
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("run did not exit within 60s")
	}
	if code := p.exitCode(); code != 1 {
		t.Fatalf("run: exit code %d, want 1", code)
	}
	return string(out), p.out.String()
}

// TestCheckAndRunAgree: the two disagreements seen by users. An API address off loopback
// without an api_key passed check and failed run: now both refuse it with the same line,
// and run has created nothing. An unknown plugin_config field failed check while run
// restarted the sink for ever: now run gives that sink up at once with check's words and
// exits 1.
func TestCheckAndRunAgree(t *testing.T) {
	t.Run("API off loopback", func(t *testing.T) {
		dir := t.TempDir()
		conns := filepath.Join(dir, "connectors")
		writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", 10, 0, 10))
		cfg := runtimeConfig(t, dir, conns)
		env := []string{"IGGY_CONNECTORS_HTTP_ENABLED=true", "IGGY_CONNECTORS_HTTP_ADDRESS=0.0.0.0:0"}
		checkOut, runOut := runAndCheck(t, dir, cfg, env)
		want := `ferry: httpapi: http.address "0.0.0.0:0" is not a loopback address and http.api_key is empty: set an api_key, or listen on 127.0.0.1, ::1 or localhost` + "\n"
		if checkOut != want || !strings.HasSuffix(runOut, want) {
			t.Fatalf("check said %q\nrun said %q\nwant both %q", checkOut, runOut, want)
		}
		for _, never := range []string{"state", "data"} {
			if _, err := os.Stat(filepath.Join(dir, never)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("run created %s before refusing: %v", never, err)
			}
		}
	})
	t.Run("unknown plugin_config field", func(t *testing.T) {
		dir := t.TempDir()
		conns := filepath.Join(dir, "connectors")
		sink := filepath.Join(conns, "sink.toml")
		writeFile(t, sink, fileSink("s", "t", "after_consuming", filepath.Join(dir, "out.jsonl"), 10, 10)+"flush_intervall = \"1s\"\n")
		checkOut, runOut := runAndCheck(t, dir, runtimeConfig(t, dir, conns), nil)
		msg := sink + ":23: plugin_config.flush_intervall: unknown field (known: path, flush_interval, fsync_each_batch)"
		if !strings.Contains(checkOut, "ERROR: "+msg+"\n") {
			t.Fatalf("check output lacks %q:\n%s", msg, checkOut)
		}
		if !strings.HasSuffix(runOut, "ferry: connectors in error: sink out: "+msg+"\n") || strings.Contains(runOut, "restarting") {
			t.Fatalf("run output: want the sink given up at once with %q:\n%s", msg, runOut)
		}
	})
}
