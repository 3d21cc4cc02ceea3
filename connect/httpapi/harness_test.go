package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quietLog = slog.New(slog.DiscardHandler)

const testKey = "s3cret-key"

// The connector files every fixture runs: a null sink with a transform and a secret in
// its plugin_config, a null sink without plugin_config, a disabled sink, and a slow random
// source.
var fixtureFiles = map[string]string{
	"nsink.toml": `type = "sink"
key = "nsink"
enabled = true
version = 1
name = "null sink"
path = "builtin:null"
plugin_config_format = "json"

[[streams]]
stream = "s1"
topics = ["t1"]
schema = "text"
batch_length = 50
poll_interval = "10ms"

[plugin_config]
level = 3
password = "hunter2"

[transforms.delete_fields]
enabled = true
fields = ["secret"]
`,
	"bare.toml": `type = "sink"
key = "bare"
enabled = true
version = 0
name = "bare sink"
path = "builtin:null"

[[streams]]
stream = "s1"
topics = ["t1"]
schema = "raw"
consumer_group = "bare-group"
`,
	"off.toml": `type = "sink"
key = "off"
enabled = false
version = 0
name = "disabled sink"
path = "builtin:null"

[[streams]]
stream = "s1"
topics = ["t1"]
schema = "json"
`,
	"gen.toml": `type = "source"
key = "gen"
enabled = true
version = 4
name = "generator"
path = "builtin:random"

[[streams]]
stream = "s1"
topic = "t2"
schema = "text"
batch_length = 10

[plugin_config]
count = 1000000
messages_per_second = 20
batch_size = 2
`,
}

// env is one real embedded Iggy server, a real connect.Runtime running the fixture's
// connectors over it, and the admin client that created the topics.
type env struct {
	t     *testing.T
	admin *iggy.Client
	rt    *connect.Runtime
	api   Runtime // rt, with the config fields of its Status filled in (filled)
	store *memStore
}

// filled is the runtime as the API sees it in these tests: when the runtime leaves a
// Status's config fields empty (Sink/Source, ID, Enabled, Version, Path: not reported by
// the runtime yet), they are filled in from the loaded configs, so these tests exercise
// the API now; once the runtime reports them, filled changes nothing.
// TestRuntimeReportsConfig checks the runtime itself.
type filled struct {
	*connect.Runtime
	conns *config.Connectors
}

func (f filled) Status() []connect.Status {
	sts := f.Runtime.Status()
	for i := range sts {
		st := &sts[i]
		if st.Sink != nil || st.Source != nil {
			continue
		}
		var c *config.Common
		if sk := f.conns.Sink(st.Key); st.Kind == connect.KindSink && sk != nil {
			st.Sink, c = sk, &sk.Common
		} else if sc := f.conns.Source(st.Key); st.Kind == connect.KindSource && sc != nil {
			st.Source, c = sc, &sc.Common
		} else {
			continue
		}
		if st.ID == 0 {
			st.ID = uint32(i + 1)
		}
		st.Enabled, st.Version = c.Enabled, c.Version
		if st.Path == "" {
			st.Path = c.Path
		}
	}
	return sts
}

func (f filled) Connector(kind, key string) (connect.Status, bool) {
	for _, st := range f.Status() {
		if st.Kind == kind && st.Key == key {
			return st, true
		}
	}
	return connect.Status{}, false
}

func dial(t *testing.T, addr string) *iggy.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, addr, iggy.WithCredentials(servertest.Username, servertest.Password), iggy.WithLogger(quietLog))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newEnv starts the server and the runtime and waits until every enabled connector
// runs. Everything is stopped by t.Cleanup.
func newEnv(t *testing.T) *env {
	t.Helper()
	srv := servertest.Start(t)
	admin := dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, topic := range []string{"t1", "t2"} {
		if err := admin.EnsureTopic(ctx, "s1", topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	for name, body := range fixtureFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	rt, err := connect.New(connect.Options{Connectors: conns, Runtime: rc, Client: dial(t, srv.Addr()),
		Builtins: connectors.Registry(), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Stop(sctx); err != nil {
			t.Errorf("runtime stop: %v", err)
		}
	})
	defer func() {
		if t.Failed() {
			for _, st := range rt.Status() {
				t.Logf("%s %s: %s %+v", st.Kind, st.Key, st.State, st.LastError)
			}
		}
	}()
	waitFor(t, 10*time.Second, "every connector running", func() bool {
		sts := rt.Status()
		for _, st := range sts {
			if st.State != connect.StateRunning {
				return false
			}
		}
		return len(sts) == 3
	})
	return &env{t: t, admin: admin, rt: rt, api: filled{rt, conns}, store: newMemStore(conns)}
}

// fill sends n messages to s1/t1.
func (e *env) fill(n int) {
	e.t.Helper()
	msgs := make([]iggy.Message, n)
	for i := range msgs {
		msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "m%d", i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.admin.SendMessages(ctx, iggy.Name("s1"), iggy.Name("t1"), wire.ToPartition(0), msgs); err != nil {
		e.t.Fatal(err)
	}
}

// api is one Server serving on a loopback port, and a client for it.
type api struct {
	t      *testing.T
	srv    *Server
	base   string
	client *http.Client
}

// serve builds a Server over e (with e's store unless opts sets its own Configs via
// noStore) and serves it until the test ends.
func (e *env) serve(mod func(*Options)) *api {
	e.t.Helper()
	opts := Options{Runtime: e.api, Configs: e.store, Version: "0.5.0", Logger: quietLog,
		HTTP: config.HTTP{Enabled: true, Address: "127.0.0.1:0", Metrics: config.Metrics{Endpoint: "/metrics"}}}
	if mod != nil {
		mod(&opts)
	}
	return serveOpts(e.t, opts)
}

func serveOpts(t *testing.T, opts Options) *api {
	t.Helper()
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tr := &http.Transport{}
	a := &api{t: t, srv: srv, base: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return a
}

// reply is one answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; hdr holds header pairs; a body is sent as JSON unless hdr sets
// Content-Type ("" removes it).
func (a *api) do(method, path, body string, hdr ...string) reply {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

// want fails unless the answer has status code.
func (r reply) want(t *testing.T, code int) reply {
	t.Helper()
	if r.status != code {
		t.Fatalf("status %d, want %d; body %q", r.status, code, r.body)
	}
	return r
}

// object decodes the body as a JSON object.
func (r reply) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// array decodes the body as a JSON array of objects.
func (r reply) array(t *testing.T) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("body %q is not a JSON array of objects: %v", r.body, err)
	}
	return a
}

// wantError checks a {"code","reason"} answer exactly.
func (r reply) wantError(t *testing.T, status int, code, reason string) {
	t.Helper()
	r.want(t, status)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	m := r.object(t)
	want := map[string]any{"code": code, "reason": reason}
	if !maps.Equal(m, want) {
		t.Fatalf("error body %v, want %v", m, want)
	}
}

// wantText checks a plain-text answer (an extractor rejection, as axum's).
func (r reply) wantText(t *testing.T, status int, body string) {
	t.Helper()
	r.want(t, status)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want text/plain", ct)
	}
	if string(r.body) != body {
		t.Fatalf("body %q, want %q", r.body, body)
	}
}

// wantKeys fails unless m has exactly keys.
func wantKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	got := slices.Sorted(maps.Keys(m))
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		t.Fatalf("%s keys %v, want %v", what, got, keys)
	}
}

// waitFor polls cond every 10ms until it holds or timeout passes (then the test fails).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// needsControl skips a test of the connect control methods while they are stubs
// (errors.ErrUnsupported); probe must be harmless (an unknown key).
func needsControl(t *testing.T, probe error) {
	t.Helper()
	if errors.Is(probe, errors.ErrUnsupported) {
		t.Skip("needs connect control methods")
	}
}

// memStore is an in-memory ConfigStore over the loaded connector configs (the real
// config.LocalProvider lives in connect/config): each loaded config, plus version+1 of
// each sink as a second version.
type memStore struct {
	mu      sync.Mutex
	sinks   map[string][]*config.Sink
	sources map[string][]*config.Source
	active  map[string]uint64 // "sink/key" → version
}

func newMemStore(c *config.Connectors) *memStore {
	m := &memStore{sinks: map[string][]*config.Sink{}, sources: map[string][]*config.Source{}, active: map[string]uint64{}}
	for _, s := range c.Sinks {
		next := *s
		next.Version++
		next.Name += " v2"
		m.sinks[s.Key] = []*config.Sink{s, &next}
	}
	for _, s := range c.Sources {
		m.sources[s.Key] = []*config.Source{s}
	}
	return m
}

func findVersion[T any](list []*T, version uint64, v func(*T) uint64) (*T, int) {
	for i, c := range list {
		if v(c) == version {
			return c, i
		}
	}
	return nil, -1
}

func sinkVersion(s *config.Sink) uint64     { return s.Version }
func sourceVersion(s *config.Source) uint64 { return s.Version }

func (m *memStore) SinkConfigs(key string) ([]*config.Sink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sinks[key]), nil
}

func (m *memStore) SinkConfig(key string, version uint64) (*config.Sink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sinks[key], version, sinkVersion); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("sink %s version %d: %w", key, version, errConfigNotFound)
}

// createBody is the part of CreateSinkConfig the store checks.
type createBody struct {
	Enabled *bool   `json:"enabled"`
	Name    *string `json:"name"`
	Path    *string `json:"path"`
}

func (b createBody) check() error {
	switch {
	case b.Enabled == nil:
		return fmt.Errorf("enabled: required: %w", errInvalidConfig)
	case b.Name == nil || *b.Name == "":
		return fmt.Errorf("name: must not be empty: %w", errInvalidConfig)
	case b.Path == nil || *b.Path == "":
		return fmt.Errorf("path: must not be empty: %w", errInvalidConfig)
	}
	return nil
}

func (m *memStore) CreateSink(key string, body []byte) (*config.Sink, error) {
	var b createBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", err, errInvalidConfig)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.sinks[key]
	c := &config.Sink{}
	if len(list) > 0 {
		*c = *list[len(list)-1]
		c.Version++
	}
	c.Key, c.Enabled, c.Name, c.Path = key, *b.Enabled, *b.Name, *b.Path
	m.sinks[key] = append(list, c)
	return c, nil
}

func (m *memStore) DeleteSinkConfig(key string, version *uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.active["sink/"+key]
	if version != nil {
		v, ok = *version, true
	}
	if !ok {
		return fmt.Errorf("sink %s: no active version: %w", key, errConfigNotFound)
	}
	_, i := findVersion(m.sinks[key], v, sinkVersion)
	if i < 0 {
		return fmt.Errorf("sink %s version %d: %w", key, v, errConfigNotFound)
	}
	m.sinks[key] = slices.Delete(m.sinks[key], i, i+1)
	return nil
}

func (m *memStore) SetActiveSink(key string, version uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sinks[key], version, sinkVersion); c == nil {
		return fmt.Errorf("sink %s version %d: %w", key, version, errConfigNotFound)
	}
	m.active["sink/"+key] = version
	return nil
}

func (m *memStore) SourceConfigs(key string) ([]*config.Source, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sources[key]), nil
}

func (m *memStore) SourceConfig(key string, version uint64) (*config.Source, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sources[key], version, sourceVersion); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("source %s version %d: %w", key, version, errConfigNotFound)
}

func (m *memStore) CreateSource(key string, body []byte) (*config.Source, error) {
	var b createBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", err, errInvalidConfig)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.sources[key]
	c := &config.Source{}
	if len(list) > 0 {
		*c = *list[len(list)-1]
		c.Version++
	}
	c.Key, c.Enabled, c.Name, c.Path = key, *b.Enabled, *b.Name, *b.Path
	m.sources[key] = append(list, c)
	return c, nil
}

func (m *memStore) DeleteSourceConfig(key string, version *uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.active["source/"+key]
	if version != nil {
		v, ok = *version, true
	}
	if !ok {
		return fmt.Errorf("source %s: no active version: %w", key, errConfigNotFound)
	}
	_, i := findVersion(m.sources[key], v, sourceVersion)
	if i < 0 {
		return fmt.Errorf("source %s version %d: %w", key, v, errConfigNotFound)
	}
	m.sources[key] = slices.Delete(m.sources[key], i, i+1)
	return nil
}

func (m *memStore) SetActiveSource(key string, version uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sources[key], version, sourceVersion); c == nil {
		return fmt.Errorf("source %s version %d: %w", key, version, errConfigNotFound)
	}
	m.active["source/"+key] = version
	return nil
}

func httpLoopback() config.HTTP { return config.HTTP{Enabled: true, Address: "127.0.0.1:0"} }
