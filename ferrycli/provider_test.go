package ferrycli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/providertest"
)

// hookLog is the run's log output: it keeps every line, and calls onLine (once) for the
// first line holding match, before the logging call returns.
type hookLog struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	match  string
	onLine func()
}

func (h *hookLog) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.onLine != nil && bytes.Contains(p, []byte(h.match)) {
		h.onLine()
		h.onLine = nil
	}
	return h.buf.Write(p)
}

func (h *hookLog) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}

// lines counts the lines of a file (0 when it does not exist).
func lines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

func eventually(t *testing.T, what string, cond func() bool, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a loaded machine: starting the embedded server alone took 15 s here
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; logs:\n%s", what, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunWithHTTPProvider: `ferry run` with [connectors] config_type = "http" whose config
// API is down at start (nothing listens: connection refused). Ferry logs the failure and
// retries with backoff; the API comes up; Ferry reads the active configs and starts the
// connectors, which deliver. Then the configs routes of Ferry's API go to the provider
// (create, activate), a reload reads the provider's active configs and restarts the sink
// with its new version, and the API key header is never in the logs.
func TestRunWithHTTPProvider(t *testing.T) {
	dir := t.TempDir()
	out1, out2 := filepath.Join(dir, "out1.jsonl"), filepath.Join(dir, "out2.jsonl")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil { // down: connection refused until the API starts
		t.Fatal(err)
	}
	api := providertest.New(true)
	defer api.Close()
	api.Put("sources", map[string]any{"key": "gen", "enabled": true, "version": 0, "name": "gen", "path": "builtin:random",
		"streams":       []any{map[string]any{"stream": "s", "topic": "t", "schema": "raw"}},
		"plugin_config": map[string]any{"count": 10}}, true)
	api.Put("sinks", fileSink(0, out1), true)

	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`[connectors]
config_type = "http"
base_url = "http://%s"
timeout = "5s"

[connectors.request_headers]
api-key = "provider-key-9f3a"

[connectors.retry]
enabled = true
max_attempts = 20
initial_backoff = "50ms"
max_backoff = "1s"
backoff_multiplier = 2

[connectors.response]
data_path = "data"
error_path = "error"

[state]
path = %q

[embedded]
address = "127.0.0.1:0"
data_dir = %q

[http]
enabled = true
address = "127.0.0.1:0"
`, addr, filepath.Join(dir, "state"), filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}

	logs := &hookLog{match: "config provider: request failed, retrying", onLine: func() {
		if _, err := api.Start(addr); err != nil {
			panic(err)
		}
	}}
	f := runFlagsFor(cfg, true)
	f.logLevel, f.logTo = "info", logs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runRuntime(ctx, f) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v\n%s", err, logs)
		}
	}

	eventually(t, "the sink to write the source's 10 messages", func() bool { return lines(out1) == 10 }, logs)
	if !strings.Contains(logs.String(), `msg="config provider: request failed, retrying" component=config_provider method=GET url=http://`+addr+`/configs/active attempt=1 of=21`) ||
		!strings.Contains(logs.String(), "connection refused") {
		stop()
		t.Fatalf("the retry is not logged:\n%s", logs)
	}

	urlBytes, err := os.ReadFile(filepath.Join(dir, "state", apiURLFile))
	if err != nil {
		stop()
		t.Fatal(err)
	}
	base := strings.TrimSpace(string(urlBytes))
	call := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	body, _ := json.Marshal(fileSink(0, out2))
	if code, resp := call("POST", "/sinks/out/configs", string(body)); code != 200 || !strings.Contains(resp, `"version":1`) {
		stop()
		t.Fatalf("create through Ferry's API: %d %s", code, resp)
	}
	if code, resp := call("PUT", "/sinks/out/configs/active", `{"version": 1}`); code != 204 {
		stop()
		t.Fatalf("activate through Ferry's API: %d %s", code, resp)
	}
	if code, resp := call("GET", "/sinks/out/configs", ""); code != 200 || !strings.Contains(resp, `"version":0`) || !strings.Contains(resp, `"version":1`) {
		stop()
		t.Fatalf("versions through Ferry's API: %d %s", code, resp)
	}
	code, resp := call("POST", "/reload", "")
	if code != 200 || !strings.Contains(resp, `"restarted":["sink out"]`) || !strings.Contains(resp, `"unchanged":["source gen"]`) {
		stop()
		t.Fatalf("reload: %d %s", code, resp)
	}
	stop()

	var seen []string
	for _, r := range api.Requests() {
		seen = append(seen, r.Method+" "+r.Path)
		if r.Header.Get("api-key") != "provider-key-9f3a" {
			t.Errorf("%s %s without the api-key header", r.Method, r.Path)
		}
	}
	for _, want := range []string{"GET /configs/active", "POST /sinks/out/configs", "PUT /sinks/out/configs/active", "GET /sinks/out/configs"} {
		if !strings.Contains(strings.Join(seen, "\n"), want) {
			t.Errorf("the provider got no %s; it got:\n%s", want, strings.Join(seen, "\n"))
		}
	}
	if n := strings.Count(strings.Join(seen, "\n")+"\n", "GET /configs/active\n"); n != 2 {
		t.Errorf("GET /configs/active %d times, want 2 (the start, the reload)", n)
	}
	if strings.Contains(logs.String(), "provider-key-9f3a") {
		t.Fatalf("the API key is in the logs:\n%s", logs)
	}
}

func fileSink(version int, out string) map[string]any {
	return map[string]any{"key": "out", "enabled": true, "version": version, "name": "file", "path": "builtin:file",
		"streams":       []any{map[string]any{"stream": "s", "topics": []any{"t"}, "schema": "raw"}},
		"plugin_config": map[string]any{"path": out}}
}

// TestCheckHTTPProvider: `ferry check` refuses the [connectors] http settings and an
// unreachable provider as `ferry run` does, with the same message, and reports a config
// the provider serves that does not load.
func TestCheckHTTPProvider(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, connectors string) (string, string) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.toml")
		body := fmt.Sprintf("[connectors]\nconfig_type = \"http\"\n%s\n[state]\npath = %q\n\n[http]\nenabled = false\n", connectors, filepath.Join(dir, "state"))
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir, cfg
	}
	for _, tc := range []struct{ name, connectors, want string }{
		{"no base_url", "", "%[1]s/config.toml:1: connectors.base_url: required when config_type = \"http\" (the URL of the config API)"},
		{"header name", "base_url = \"http://" + down + "\"\n[connectors.request_headers]\n\"x y\" = \"v\"\n", "%[1]s/config.toml:4: connectors.request_headers: \"x y\" is not a valid HTTP header name"},
		{"provider down", "base_url = \"http://" + down + "\"\n[connectors.retry]\nenabled = false\nmax_attempts = 0\ninitial_backoff = \"1s\"\nmax_backoff = \"1s\"\nbackoff_multiplier = 1\n",
			"connectors: read the active configs: config provider request failed: GET http://" + down + "/configs/active: dial tcp " + down + ": connect: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg := write(t, tc.connectors)
			want := strings.ReplaceAll(tc.want, "%[1]s", dir)
			checkErr := check(io.Discard, startOptions{config: cfg})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			runErr := runRuntime(ctx, runFlagsFor(cfg, false))
			if checkErr == nil || runErr == nil || checkErr.Error() != want || runErr.Error() != want {
				t.Fatalf("check: %v\nrun:   %v\nwant:  %s", checkErr, runErr, want)
			}
		})
	}

	t.Run("invalid config served", func(t *testing.T) {
		api := providertest.New(false)
		base, err := api.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer api.Close()
		bad := fileSink(2, "out.jsonl")
		bad["streams"].([]any)[0].(map[string]any)["batch_length"] = 0
		api.Put("sinks", bad, true)
		_, cfg := write(t, "base_url = \""+base+"\"\n")
		var out bytes.Buffer
		err = check(&out, startOptions{config: cfg})
		if err == nil || err.Error() != "check: 1 connector(s) with problems" {
			t.Fatalf("check: %v\n%s", err, &out)
		}
		want := fmt.Sprintf(`ERROR: config provider %s (get_active_configs, sink "out"): streams[0].batch_length: must be at least 1`, base)
		if !strings.Contains(out.String(), "config provider "+base+", state") || !strings.Contains(out.String(), want) {
			t.Fatalf("check output lacks %q:\n%s", want, &out)
		}
	})
}
