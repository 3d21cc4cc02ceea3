package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
)

// TestKeylessAPIAttacks replays, against a real `ferry run --embedded` with the HTTP API on
// and no api_key (the quickstart's shape), the attacks that once ran code through it:
//
//   - a request for another host name (DNS rebinding) is refused 403 host_not_allowed;
//   - a POST from another origin (CSRF) is refused 403, a form body 415, and the sink runs on;
//   - a config naming a library outside the plugin directories is refused 400 by
//     POST …/configs, and a config file naming it is refused when the sink restarts: the
//     library's constructor (which creates a marker file) never runs.
func TestKeylessAPIAttacks(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: this test builds a shared library")
	}
	marker := filepath.Join(t.TempDir(), "loaded")
	evil := filepath.Join(t.TempDir(), "evil.so")
	if msg, err := exec.Command(gcc, "-std=gnu11", "-O2", "-Wall", "-shared", "-fPIC", "-o", evil,
		filepath.Join(repoRoot, "connect", "httpapi", "testdata", "loaded_marker.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("s", "t", "after_consuming", filepath.Join(dir, "out.jsonl"), 10, 1000))
	cfg := runtimeConfig(t, dir, conns)
	apiAddr := freeAddr(t)
	enableHTTP(t, cfg, apiAddr, "")
	p := startFerry(t, "run", dir, []string{"FERRY_TEST_LOADED_MARKER=" + marker}, "run", "--config", cfg, "--embedded", "--progress", "0")
	api := apiClient{t: t, base: "http://" + apiAddr}
	status := func() sinkStatus {
		var st sinkStatus
		api.getJSON("/sinks/out/status", &st)
		return st
	}
	testkit.WaitFor(t, "sink out running", func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		code, b, err := api.try(http.MethodGet, "/sinks/out/status", "")
		return err == nil && code == http.StatusOK && strings.Contains(string(b), `"status":"running"`)
	})
	send := func(method, path, body string, hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, api.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i] == "Host" {
				req.Host = hdr[i+1]
			} else {
				req.Header.Set(hdr[i], hdr[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var e struct{ Code, Reason string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code + ": " + e.Reason
	}
	wantCode := func(code int, got string, wantCode int, wantText string) {
		t.Helper()
		if code != wantCode || !strings.Contains(got, wantText) {
			t.Fatalf("answer %d %q, want %d with %q", code, got, wantCode, wantText)
		}
	}
	create := `{"enabled":true,"name":"evil","path":"` + evil + `","streams":[{"stream":"s","topics":["t"],"schema":"text"}]}`

	code, got := send(http.MethodPost, "/sinks/out/configs", create, "Host", "rebind.attacker.example:"+strings.Split(apiAddr, ":")[1], "Content-Type", "application/json")
	wantCode(code, got, http.StatusForbidden, `host_not_allowed: Host "rebind.attacker.example:`)
	code, got = send(http.MethodPost, "/sinks/out/stop", "", "Origin", "http://127.0.0.1:1")
	wantCode(code, got, http.StatusForbidden, `cross_origin_refused: Origin "http://127.0.0.1:1" is not the API's origin "http://`+apiAddr+`"`)
	code, _ = send(http.MethodPost, "/sinks/out/stop", "a=b", "Content-Type", "application/x-www-form-urlencoded")
	if code != http.StatusUnsupportedMediaType {
		t.Fatalf("form POST: %d, want 415", code)
	}
	if st := status(); st.Status != "running" {
		t.Fatalf("sink out after the refused requests: %+v", st)
	}

	code, got = send(http.MethodPost, "/sinks/out/configs", create, "Content-Type", "application/json")
	wantCode(code, got, http.StatusBadRequest, `invalid_configuration: Invalid configuration: request body: path: plugin library not in an allowed directory: plugin path "`+evil+`" is `+evil+`, outside the plugin directories (`+conns+`, `+filepath.Dir(ferryBin)+`)`)
	if m, _ := filepath.Glob(filepath.Join(conns, "sink_out_*")); len(m) != 0 {
		t.Fatalf("the refused create wrote %v", m)
	}
	// A config file naming the library (version 1, so the restart runs it).
	sink := strings.Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "out.jsonl"), 10, 1000), "version = 0", "version = 1", 1)
	writeFile(t, filepath.Join(conns, "sink_out_1.toml"), strings.Replace(sink, `path = "builtin:file"`, `path = "`+evil+`"`, 1))
	if code, b := api.do(http.MethodPost, "/sinks/out/restart", ""); code != http.StatusNoContent {
		t.Fatalf("restart: %d %s", code, b)
	}
	var st sinkStatus
	testkit.WaitFor(t, "sink out refused to start", func() bool {
		st = status()
		return st.Status == "error" && st.LastError != nil
	})
	if want := `plugin path "` + evil + `" is ` + evil + `, outside the plugin directories`; !strings.Contains(st.LastError.Message, want) {
		t.Fatalf("last_error %q, want it to contain %q", st.LastError.Message, want)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the library outside the plugin directories was loaded (marker: %v)", err)
	}
}
