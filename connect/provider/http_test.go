package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/configjson"
	"github.com/ferryio/ferry/internal/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream's fixtures: the stdout sink (version 0) and the random source (version 1) of
// Iggy's http provider tests, the shapes its documentation gives.
func stdoutSink(version int) map[string]any {
	return map[string]any{
		"key": "stdout", "enabled": true, "version": version, "name": "Stdout sink",
		"path": "../../target/debug/libiggy_connector_stdout_sink",
		"transforms": map[string]any{"add_fields": map[string]any{"enabled": true,
			"fields": []any{map[string]any{"key": "message", "value": map[string]any{"static": "hello"}}}}},
		"streams": []any{map[string]any{"stream": "test_stream", "topics": []any{"test_topic"}, "schema": "json",
			"batch_length": 100, "poll_interval": "5ms", "consumer_group": "stdout_sink_connector"}},
		"plugin_config_format": nil,
		"plugin_config":        map[string]any{"print_payload": false},
	}
}

func randomSource(version int) map[string]any {
	return map[string]any{
		"key": "random", "enabled": true, "version": version, "name": "Random source",
		"path": "../../target/debug/libiggy_connector_random_source",
		"streams": []any{map[string]any{"stream": "test_stream", "topic": "test_topic", "schema": "json",
			"batch_length": 1000, "linger_time": "5ms"}},
		"plugin_config_format": "json",
		"plugin_config":        map[string]any{"interval": "1000ms", "max_count": 1000000},
	}
}

// logs collects a logger's output.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// settings is a [connectors] section for base, wrapped or not, with fast retries.
func settings(base string, wrapped bool) config.Provider {
	c := config.Provider{ConfigType: config.ProviderHTTP, BaseURL: base, Timeout: 5 * time.Second,
		RequestHeaders: map[string]config.Secret{"api-key": "s3cret-api-key-42"},
		Retry:          config.ProviderRetry{Enabled: true, MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, BackoffMultiplier: 2}}
	if wrapped {
		c.Response = config.ProviderResponse{DataPath: "data", ErrorPath: "error"}
	}
	return c
}

func newProvider(t *testing.T, c config.Provider) (*HTTP, *logs) {
	t.Helper()
	l := &logs{}
	p, err := NewHTTP(c, HTTPOptions{Logger: slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})), PluginDirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, l
}

func startServer(t *testing.T, wrapped bool) (*providertest.Server, string) {
	t.Helper()
	s := providertest.New(wrapped)
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, base
}

func mustNotContainSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, "s3cret-api-key-42") {
		t.Fatalf("%s holds the API key: %s", what, s)
	}
}

// TestHTTPProviderOperations runs every operation against a real config API that answers
// with upstream's direct and wrapped shapes, checking what is sent and what is read.
func TestHTTPProviderOperations(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "wrapped"}[wrapped], func(t *testing.T) {
			srv, base := startServer(t, wrapped)
			srv.Put("sinks", stdoutSink(0), true)
			srv.Put("sources", randomSource(0), false)
			srv.Put("sources", randomSource(1), true)
			p, logged := newProvider(t, settings(base, wrapped))

			conns, err := p.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(conns.Sinks) != 1 || len(conns.Sources) != 1 || len(conns.Invalid) != 0 {
				t.Fatalf("loaded %d sinks, %d sources, %d invalid", len(conns.Sinks), len(conns.Sources), len(conns.Invalid))
			}
			s := conns.Sinks[0]
			st := s.Streams[0]
			if s.Key != "stdout" || s.Version != 0 || !s.Enabled || s.Name != "Stdout sink" || st.Stream != "test_stream" ||
				len(st.Topics) != 1 || st.Topics[0] != "test_topic" || st.BatchLength != 100 || st.PollInterval != 5*time.Millisecond ||
				st.ConsumerGroup != "stdout_sink_connector" || s.Transforms == nil {
				t.Fatalf("sink read as %+v, stream %+v", s, st)
			}
			src := conns.Sources[0]
			if src.Key != "random" || src.Version != 1 || src.Streams[0].Topic != "test_topic" || src.Streams[0].LingerTime != 5*time.Millisecond || src.PluginConfigFormat != "json" {
				t.Fatalf("source read as %+v", src)
			}

			created, err := p.CreateSink("stdout", []byte(`{"enabled": true, "name": "Stdout sink", "path": "builtin:null",
				"streams": [{"stream": "test_stream", "topics": ["other_topic"], "schema": "json"}], "plugin_config": null}`))
			if err != nil {
				t.Fatal(err)
			}
			if created.Version != 1 || created.Path != "builtin:null" || created.Streams[0].Topics[0] != "other_topic" {
				t.Fatalf("created %+v", created)
			}
			all, err := p.SinkConfigs("stdout")
			if err != nil || len(all) != 2 || all[0].Version != 0 || all[1].Version != 1 {
				t.Fatalf("versions: %v %v", all, err)
			}
			if one, err := p.SinkConfig("stdout", 1); err != nil || one.Streams[0].Topics[0] != "other_topic" {
				t.Fatalf("version 1: %+v %v", one, err)
			}
			if _, err := p.SinkConfig("stdout", 7); !errors.Is(err, ErrConfigNotFound) {
				t.Fatalf("version 7: %v, want ErrConfigNotFound", err)
			}
			if err := p.SetActiveSink("stdout", 1); err != nil {
				t.Fatal(err)
			}
			if err := p.SetActiveSink("stdout", 9); !errors.Is(err, ErrConfigNotFound) {
				t.Fatalf("activate 9: %v", err)
			}
			if a, err := p.ActiveSink("stdout"); err != nil || a.Version != 1 {
				t.Fatalf("active: %+v %v", a, err)
			}
			v0 := uint64(0)
			if err := p.DeleteSinkConfig("stdout", &v0); err != nil {
				t.Fatal(err)
			}
			if err := p.DeleteSinkConfig("stdout", nil); err != nil { // the active one, 1
				t.Fatal(err)
			}
			if _, err := p.ActiveSink("stdout"); !errors.Is(err, ErrConfigNotFound) {
				t.Fatalf("active after deleting it: %v", err)
			}
			if all, err := p.SourceConfigs("random"); err != nil || len(all) != 2 {
				t.Fatalf("source versions: %v %v", all, err)
			}
			if a, err := p.ActiveSource("random"); err != nil || a.Version != 1 {
				t.Fatalf("active source: %+v %v", a, err)
			}

			want := []string{
				"GET /configs/active ",
				"POST /sinks/stdout/configs ",
				"GET /sinks/stdout/configs ",
				"GET /sinks/stdout/configs/1 ",
				"GET /sinks/stdout/configs/7 ",
				`PUT /sinks/stdout/configs/active  {"version":1}`,
				`PUT /sinks/stdout/configs/active  {"version":9}`,
				"GET /sinks/stdout/configs/active ",
				"DELETE /sinks/stdout/configs version=0",
				"DELETE /sinks/stdout/configs ",
				"GET /sinks/stdout/configs/active ",
				"GET /sources/random/configs ",
				"GET /sources/random/configs/active ",
			}
			reqs := srv.Requests()
			var got []string
			for _, r := range reqs {
				line := r.Method + " " + r.Path + " " + r.Query
				if r.Method == "PUT" {
					line += " " + string(r.Body)
				}
				got = append(got, line)
				if r.Header.Get("api-key") != "s3cret-api-key-42" {
					t.Errorf("%s %s without the api-key header", r.Method, r.Path)
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if !strings.Contains(string(reqs[1].Body), `"other_topic"`) || reqs[1].Header.Get("Content-Type") != "application/json" {
				t.Fatalf("create sent %q (%s)", reqs[1].Body, reqs[1].Header.Get("Content-Type"))
			}
			mustNotContainSecret(t, "the logs", logged.String())
		})
	}
}

// TestHTTPProviderErrorPath: the error a wrapped API puts at error_path is the error's
// text, with a failing status or with 200; a data_path that is absent is named; without
// error_path the body's text is the error. None of these is retried (only one request).
func TestHTTPProviderErrorPath(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		wrapped    bool
		call       func(p *HTTP) error
		want       string // the error's end
	}{
		{"error with 200", `{"data": {"sinks": {}, "sources": {}}, "error": {"code": "quota", "reason": "over quota"}}`, 200, true,
			func(p *HTTP) error { _, err := p.Load(context.Background()); return err },
			`/configs/active: the provider answered with an error at error: {"code":"quota","reason":"over quota"}`},
		{"error with 409", `{"data": null, "error": "key \"x\" is reserved"}`, 409, true,
			func(p *HTTP) error { _, err := p.SinkConfigs("x"); return err },
			`/sinks/x/configs: HTTP 409: key "x" is reserved`},
		{"data_path absent", `{"payload": {}, "error": null}`, 200, true,
			func(p *HTTP) error { _, err := p.Load(context.Background()); return err },
			`/configs/active: response.data_path "data" is not in the response (an object with keys error, payload)`},
		{"direct 400", `sink store unavailable`, 400, false,
			func(p *HTTP) error { _, err := p.ActiveSink("k"); return err },
			`/sinks/k/configs/active: HTTP 400: sink store unavailable`},
		{"direct 403 on delete", `{"error": "forbidden"}`, 403, false,
			func(p *HTTP) error { return p.DeleteSinkConfig("k", nil) },
			`/sinks/k/configs: HTTP 403: {"error": "forbidden"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, count := fixedAPI(t, tc.body, tc.status)
			p, _ := newProvider(t, settings(base, tc.wrapped))
			err := tc.call(p)
			if !errors.Is(err, ErrProviderRequest) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Fatalf("err %v\nwant ErrProviderRequest ending with %s", err, tc.want)
			}
			if n := count(); n != 1 {
				t.Fatalf("%d requests, want 1 (not retried)", n)
			}
			mustNotContainSecret(t, "the error", err.Error())
		})
	}
}

// fixedAPI answers body with status to every request; count returns how many it got.
func fixedAPI(t *testing.T, body string, status int) (base string, count func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestHTTPProviderRetries: transient failures (503) are retried with backoff, each retry
// logged; max_attempts bounds the retries; with retry disabled one failure is final.
func TestHTTPProviderRetries(t *testing.T) {
	srv, base := startServer(t, true)
	srv.Put("sinks", stdoutSink(0), true)
	p, logged := newProvider(t, settings(base, true))
	srv.FailNext(2, "restarting")
	conns, err := p.Load(context.Background())
	if err != nil || len(conns.Sinks) != 1 {
		t.Fatalf("after two 503s: %v, %v", conns, err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	out := logged.String()
	for _, want := range []string{
		`level=WARN msg="config provider: request failed, retrying" method=GET url=` + base + `/configs/active attempt=1 of=4`,
		`attempt=2 of=4`, `error="config provider request failed: GET ` + base + `/configs/active: HTTP 503: restarting"`,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("logs lack %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "retrying") != 2 {
		t.Fatalf("want 2 retries logged:\n%s", out)
	}

	srv.FailNext(10, "down for maintenance")
	_, err = p.Load(context.Background())
	if !errors.Is(err, ErrProviderRequest) || !strings.HasSuffix(err.Error(), "HTTP 503: down for maintenance (after 4 attempts)") {
		t.Fatalf("exhausted: %v", err)
	}
	if n := len(srv.Requests()); n != 3+4 {
		t.Fatalf("%d requests, want 7", n)
	}

	c := settings(base, true)
	c.Retry.Enabled = false
	p2, _ := newProvider(t, c)
	srv.FailNext(1, "once")
	if _, err := p2.Load(context.Background()); !errors.Is(err, ErrProviderRequest) || !strings.HasSuffix(err.Error(), "HTTP 503: once") {
		t.Fatalf("retry disabled: %v", err)
	}
	srv.FailNext(0, "")
}

// TestHTTPProviderDownAtStart: nothing listens at base_url when the first request is sent
// (connection refused); the provider waits its backoff, the API comes up meanwhile, and
// the next attempt reads the configs.
func TestHTTPProviderDownAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	p, logged := newProvider(t, settings("http://"+addr, false))
	srv := providertest.New(false)
	srv.Put("sinks", stdoutSink(0), true)
	defer srv.Close()
	var waits []time.Duration
	p.sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		if len(waits) == 2 { // down for two attempts, up before the third
			if _, err := srv.Start(addr); err != nil {
				return err
			}
		}
		return nil
	}
	conns, err := p.Load(context.Background())
	if err != nil || len(conns.Sinks) != 1 || conns.Sinks[0].Key != "stdout" {
		t.Fatalf("load: %v %v", conns, err)
	}
	// Backoff 1ms then 2ms, less up to half (jitter).
	if len(waits) != 2 || waits[0] < 500*time.Microsecond || waits[0] > time.Millisecond || waits[1] < time.Millisecond || waits[1] > 2*time.Millisecond {
		t.Fatalf("waits %v", waits)
	}
	if n := strings.Count(logged.String(), "connection refused"); n != 2 {
		t.Fatalf("want 2 retries for connection refused in the logs:\n%s", logged)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("the API got %d requests, want 1", n)
	}
}

// TestHTTPProviderTimeout: an API that does not answer within connectors.timeout fails the
// request (each attempt bounded, then retried), and Close ends a request in flight.
func TestHTTPProviderTimeout(t *testing.T) {
	srv, base := startServer(t, false)
	srv.Hold()
	c := settings(base, false)
	c.Timeout = 100 * time.Millisecond
	c.Retry.MaxAttempts = 1
	p, _ := newProvider(t, c)
	start := time.Now()
	_, err := p.ActiveSink("stdout")
	took := time.Since(start)
	if !errors.Is(err, ErrProviderRequest) || !strings.Contains(err.Error(), "GET "+base+"/sinks/stdout/configs/active: timed out") ||
		!strings.HasSuffix(err.Error(), "(after 2 attempts)") {
		t.Fatalf("err %v", err)
	}
	if took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("two attempts of 100ms took %s", took)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}

	p2, _ := newProvider(t, settings(base, false)) // 5s timeout
	done := make(chan error, 1)
	go func() { _, err := p2.SinkConfigs("stdout"); done <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Requests()) < 3 { // the held request has arrived
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the API")
		}
		runtime.Gosched()
	}
	p2.Close()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestHTTPProviderInvalidConfigs: a config the API serves that is not valid is that
// connector's error (the others load), at start and at a reload; a create body that is not
// valid is refused before any request.
func TestHTTPProviderInvalidConfigs(t *testing.T) {
	srv, base := startServer(t, false)
	bad := stdoutSink(3)
	bad["key"] = "broken"
	bad["streams"].([]any)[0].(map[string]any)["schema"] = "yaml"
	srv.Put("sinks", bad, true)
	srv.Put("sinks", stdoutSink(0), true)
	p, _ := newProvider(t, settings(base, false))
	conns, err := p.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(conns.Sinks) != 1 || len(conns.Invalid) != 1 {
		t.Fatalf("%d sinks, %d invalid", len(conns.Sinks), len(conns.Invalid))
	}
	inv := conns.Invalid[0]
	wantErr := fmt.Sprintf(`config provider %s (get_active_configs, sink "broken"): streams[0].schema: unknown schema "yaml" (want json, raw, text, proto, flat_buffer or avro)`, base)
	if inv.Key != "broken" || inv.Version != 3 || !inv.Enabled || inv.Name != "Stdout sink" || !strings.HasPrefix(inv.Err.Error(), wantErr) || !errors.Is(inv.Err, config.ErrInvalidConfig) {
		t.Fatalf("invalid %+v: %v\nwant %s", inv, inv.Err, wantErr)
	}
	_, fes, err := p.Scan()
	if err != nil || len(fes) != 1 || fes[0].Key != "broken" || fes[0].Type != config.TypeSink || !strings.HasPrefix(fes[0].Err.Error(), wantErr) {
		t.Fatalf("scan: %v %v", fes, err)
	}
	before := len(srv.Requests())
	_, err = p.CreateSink("stdout", []byte(`{"enabled": true, "name": "n", "path": "builtin:null", "streams": [{"stream": "s", "topics": ["t"], "schema": "json", "batch_length": -1}]}`))
	var ce *config.Error
	if !errors.Is(err, config.ErrInvalidConfig) || !errors.As(err, &ce) || ce.File != configjson.BodyFile || ce.Key != "streams[0].batch_length" {
		t.Fatalf("bad body: %v", err)
	}
	evil := filepath.Join(t.TempDir(), "libevil.so") // outside the plugin directories
	if err := os.WriteFile(evil, []byte("not a library"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = p.CreateSource("gen", []byte(`{"enabled": true, "name": "n", "path": "`+evil+`", "streams": [{"stream": "s", "topic": "t", "schema": "json"}]}`))
	if !errors.Is(err, config.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Key != "path" {
		t.Fatalf("plugin outside the plugin directories: %v", err)
	}
	later := p.pluginDirs[0] + "/../../evil" // not there yet, outside once it is
	_, err = p.CreateSink("gen", []byte(`{"enabled": true, "name": "n", "path": "`+later+`", "streams": [{"stream": "s", "topics": ["t"], "schema": "json"}]}`))
	if !errors.Is(err, config.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Key != "path" || !strings.Contains(err.Error(), `plugin path "`+later+`" points to `) ||
		!strings.Contains(err.Error(), "evil.so (which does not exist), outside the plugin directories") {
		t.Fatalf("a plugin path that will point outside: %v", err)
	}
	if n := len(srv.Requests()); n != before {
		t.Fatalf("a refused body was sent (%d requests, want %d)", n, before)
	}
}

// TestHTTPProviderSecrets: the request headers (the API key) reach the API on every
// request and appear nowhere else: not in the logs of retries, not in errors, not in the
// runtime config's rendering.
func TestHTTPProviderSecrets(t *testing.T) {
	srv, base := startServer(t, true)
	p, logged := newProvider(t, settings(base, true))
	srv.FailNext(3, "busy")
	if _, err := p.SinkConfigs("x"); err != nil {
		t.Fatal(err)
	}
	srv.FailNext(4, "busy")
	_, err := p.SinkConfigs("x")
	if err == nil {
		t.Fatal("4 failures with 3 retries succeeded")
	}
	for _, r := range srv.Requests() {
		if r.Header.Get("Api-Key") != "s3cret-api-key-42" {
			t.Fatalf("request %s %s without the key", r.Method, r.Path)
		}
	}
	mustNotContainSecret(t, "the logs", logged.String())
	mustNotContainSecret(t, "the error", err.Error())
	mustNotContainSecret(t, "String", p.String())
	if !strings.Contains(logged.String(), "retrying") {
		t.Fatal("no retry was logged")
	}
}
