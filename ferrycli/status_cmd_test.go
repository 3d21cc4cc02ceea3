package ferrycli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// statusNow is the clock of the status tests: 30 s before the broken sink's next retry.
var statusNow = time.Date(2025, 12, 1, 19, 30, 0, 0, time.UTC)

// Contract-shaped answers of a runtime's HTTP API (GET /sinks, /sources, /{kind}s/{key}/status).
var statusFixture = map[string]string{
	"/sinks": `[
		{"id":1,"key":"out","name":"file out","path":"builtin:file","enabled":true,"status":"running"},
		{"id":7,"key":"broken","name":"broken sink","path":"/p/libb.so","enabled":true,"status":"error",
		 "last_error":{"message":"consume: target unavailable","timestamp":1764615600000000}},
		{"id":9,"key":"old","name":"from a runtime without the status route","path":"builtin:null","enabled":true,"status":"running"}]`,
	"/sources": `[{"id":2,"key":"gen","name":"generator","path":"builtin:random","enabled":true,"status":"running"}]`,
	"/sinks/out/status": `{"key":"out","kind":"sink","name":"file out","id":1,"status":"running","paused":true,
		"restart":{"restarts":0,"total":0,"max_restarts":5,"next_retry":null,"gave_up":false},
		"stats":{"polled":2010,"delivered":2000,"committed":1951,"consume_errors":0,"failed_batches":0,"dead_lettered":7,
		 "skipped":3,"decode_errors":2,"stores":4,"store_errors":0,"stores_refused":0,"commits_accepted":4,"commits_rejected":0,"retries":0,"filtered":0},
		"partitions":[
		 {"stream":"qs","topic":"events","partition_id":0,"state":"owned","polled":1999,"delivered":1999,"done":1950,"stored":1950,
		  "current_offset":1999,"lag":49,"pending":0,"uncommitted":49,"paused":true},
		 {"stream":"qs","topic":"events","partition_id":1,"state":"draining","polled":-1,"delivered":-1,"done":-1,"stored":-1,
		  "current_offset":-1,"lag":0,"pending":0,"uncommitted":0,"paused":false}]}`,
	"/sinks/broken/status": `{"key":"broken","kind":"sink","name":"broken sink","id":7,"status":"error","paused":false,
		"last_error":{"message":"consume: target unavailable","timestamp":1764615600000000},
		"restart":{"restarts":2,"total":3,"max_restarts":5,"next_retry":1764617430000000,"gave_up":false},
		"stats":{"polled":0,"delivered":0,"committed":0,"consume_errors":3,"failed_batches":3,"dead_lettered":0,
		 "skipped":0,"stores":0,"store_errors":0,"stores_refused":0,"commits_accepted":0,"commits_rejected":0,"retries":6,"filtered":0},
		"partitions":[]}`,
	"/sources/gen/status": `{"key":"gen","kind":"source","name":"generator","id":2,"status":"running",
		"restart":{"restarts":1,"total":1,"max_restarts":0,"next_retry":null,"gave_up":false},
		"stats":{"produced":5000,"sent":4990,"acked":4990,"send_errors":0,"failed_batches":0,"retries":0,"state_errors":0,
		 "dead_lettered":0,"skipped":0}}`,
}

// fakeRuntimeAPI serves statusFixture; with key set, every route needs that api-key header.
func fakeRuntimeAPI(key string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if key != "" && r.Header.Get("api-key") != key {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"unauthorized","reason":"invalid api key"}`))
			return
		}
		body, ok := statusFixture[r.URL.Path]
		if r.Method != http.MethodGet || !ok {
			w.WriteHeader(http.StatusNotFound)
			if strings.HasPrefix(r.URL.Path, "/sinks/broken") {
				_, _ = w.Write([]byte(`{"code":"sink_not_found","reason":"no sink"}`))
			}
			return
		}
		_, _ = w.Write([]byte(body))
	}))
}

func runStatus(t *testing.T, f statusFlags) (string, error) {
	t.Helper()
	if f.timeout == 0 {
		f.timeout = 5 * time.Second
	}
	var out bytes.Buffer
	err := status(context.Background(), &out, f, func() time.Time { return statusNow })
	return out.String(), err
}

// TestStatusTable checks every line of `ferry status` against the fixture: the paused sink
// (with the dead-lettered, skipped and decode-error counts that explain why it delivered
// 10 fewer than it polled), the failed sink with its last error and next retry, a sink
// whose status route is missing (only its list entry is known), a source; then the
// partitions of each sink.
func TestStatusTable(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := fakeRuntimeAPI("k1")
	defer srv.Close()
	got, err := runStatus(t, statusFlags{url: srv.URL + "/", apiKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	want := `KIND    KEY     STATUS            POLLED  DELIVERED  COMMITTED  PRODUCED  SENT  DEAD-LETTERED  SKIPPED  DECODE ERRORS  RESTARTS          LAST ERROR
sink    out     running (paused)  2010    2000       1951       -         -     7              3        2              0/5               -
sink    broken  error             0       0          0          -         -     0              0        0              2/5, next in 30s  consume: target unavailable (2025-12-01T19:00:00Z)
sink    old     running           -       -          -          -         -     -              -        -              -                 -
source  gen     running           -       -          -          5000      4990  0              0        0              1                 -

sink out: partitions
STREAM  TOPIC   PARTITION  STATE     CURRENT  STORED  LAG  UNCOMMITTED  PAUSED
qs      events  0          owned     1999     1950    49   49           yes
qs      events  1          draining  -        -       0    0            no

sink broken: no partitions
`
	if got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
	// docs/http-api.md shows this very table: its columns are the ones printed.
	doc, err := os.ReadFile("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```\n"+want+"```\n") {
		t.Errorf("docs/http-api.md's ferry status sample is not the table printed:\n%s", want)
	}
}

// TestStatusJSON: --json prints the status documents as the API sent them (the list entry
// for a connector without a status route), sinks and sources apart.
func TestStatusJSON(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := fakeRuntimeAPI("")
	defer srv.Close()
	got, err := runStatus(t, statusFlags{url: srv.URL, json: true})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sinks, Sources []map[string]any
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	if len(doc.Sinks) != 3 || len(doc.Sources) != 1 {
		t.Fatalf("%d sinks, %d sources:\n%s", len(doc.Sinks), len(doc.Sources), got)
	}
	if doc.Sinks[0]["paused"] != true || len(doc.Sinks[0]["partitions"].([]any)) != 2 {
		t.Fatalf("sink out: %v", doc.Sinks[0])
	}
	if doc.Sinks[2]["path"] != "builtin:null" || doc.Sinks[2]["stats"] != nil {
		t.Fatalf("sink old is not its list entry: %v", doc.Sinks[2])
	}
	if doc.Sources[0]["stats"].(map[string]any)["sent"] != 4990.0 {
		t.Fatalf("source gen: %v", doc.Sources[0])
	}
}

// TestStatusErrors: each way of not getting an answer is an error that says what to do.
func TestStatusErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := fakeRuntimeAPI("k1")
	defer srv.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	notAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot", http.StatusTeapot)
	}))
	defer notAPI.Close()

	for _, tc := range []struct {
		name string
		f    statusFlags
		want string
	}{
		{"no key", statusFlags{url: srv.URL}, "the API needs --api-key (or FERRY_API_KEY): GET /sinks answered 401"},
		{"wrong key", statusFlags{url: srv.URL, apiKey: "k2"}, "the API refused the API key: GET /sinks answered 401"},
		{"unreachable", statusFlags{url: goneURL}, "cannot reach the Ferry API at " + goneURL + ": "},
		{"not the API", statusFlags{url: notAPI.URL}, "GET /sinks: 418 I'm a teapot: teapot"},
		{"bad url", statusFlags{url: "127.0.0.1:8081"}, `--url "127.0.0.1:8081": want http://HOST:PORT or https://HOST:PORT`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runStatus(t, tc.f)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if out != "" {
				t.Fatalf("printed %q before failing", out)
			}
		})
	}
}

// TestStatusExitCode runs the command through the CLI: 0 when the API answered, 1 when not.
func TestStatusExitCode(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := fakeRuntimeAPI("")
	defer srv.Close()
	t.Setenv(envAPIURL, srv.URL)
	if code := New().Run([]string{"status", "--json"}); code != 0 {
		t.Fatalf("exit code %d with a reachable API", code)
	}
	if code := New().Run([]string{"status", "--url", srv.URL + "/nothing-here"}); code != 1 {
		t.Fatalf("exit code %d with a 404 on /sinks", code)
	}
}

// TestDiscoverURL: without --url, status asks the URL a running ferry run wrote to its state
// dir (the bound port, for http.address port 0), else [http] address (every interface is
// asked on loopback), else upstream's default; a named config that does not load is an error.
func TestDiscoverURL(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "config.toml")
	write := func(addr string) {
		body := fmt.Sprintf("[connectors]\nconfig_dir = %q\n[state]\npath = %q\n[http]\nenabled = true\naddress = %q\n", dir, state, addr)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ addr, file, want string }{
		{"127.0.0.1:0", "", "http://127.0.0.1:8081"},
		{"0.0.0.0:9181", "", "http://127.0.0.1:9181"},
		{"[::1]:9182", "", "http://[::1]:9182"},
		{"127.0.0.1:0", "http://127.0.0.1:41234\n", "http://127.0.0.1:41234"},
	} {
		write(tc.addr)
		if err := os.RemoveAll(state); err != nil {
			t.Fatal(err)
		}
		if tc.file != "" {
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(state, apiURLFile), []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rc, err := loadStatusConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := apiURLOf(rc); got != tc.want {
			t.Errorf("address %s, file %q: %q; want %q", tc.addr, tc.file, got, tc.want)
		}
	}
	if _, err := loadStatusConfig(filepath.Join(dir, "missing.toml")); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("missing named config: %v", err)
	}
}

// TestStatusKeyFromConfig: without --api-key, status sends the config's [http] api_key when
// the URL comes from that config or the config is named, and never a key found by
// discovery to a URL given by hand.
func TestStatusKeyFromConfig(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := fakeRuntimeAPI("k1")
	defer srv.Close()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf("[connectors]\nconfig_dir = %q\n[state]\npath = %q\n[http]\nenabled = true\naddress = \"127.0.0.1:0\"\napi_key = \"k1\"\n", dir, state)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, apiURLFile), []byte(srv.URL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    statusFlags
		want string // "" : the table is printed
	}{
		{"url and key from the config", statusFlags{config: cfg}, ""},
		{"url by hand, config named", statusFlags{url: srv.URL, config: cfg}, ""},
		{"--api-key wins", statusFlags{config: cfg, apiKey: "k2"}, "the API refused the API key: GET /sinks answered 401"},
		{"url by hand, no config named", statusFlags{url: srv.URL}, "the API needs --api-key (or FERRY_API_KEY): GET /sinks answered 401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(dir) // a config.toml in the working directory is not a named one
			out, err := runStatus(t, tc.f)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want == "" && !strings.HasPrefix(out, "KIND") || tc.want == "" && !strings.Contains(out, "sink    out"):
				t.Fatalf("printed %q", out)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
