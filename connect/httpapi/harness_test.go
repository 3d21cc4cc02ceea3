package httpapi

import (
	"context"
	"encoding/json"
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
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/provider"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quietLog = slog.New(slog.DiscardHandler)

const testKey = "s3cret-key"

// The config_dir of every fixture: a null sink with a transform and a secret in its
// plugin_config (version 1, pinned in .active_versions.toml, and a version 2 that is not
// active), a null sink without plugin_config, a disabled sink, and a slow random source.
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
	"sink_nsink_2.toml": `type = "sink"
key = "nsink"
enabled = true
version = 2
name = "null sink v2"
path = "builtin:null"

[[streams]]
stream = "s1"
topics = ["t1"]
schema = "text"
`,
	config.ActiveVersionsFile: `[sinks]
nsink = 1
`,
}

// env is one real embedded Iggy server, a real connect.Runtime running the connectors of
// a real config_dir over it, the provider.Local over that same directory (the
// API's ConfigStore, and the runtime's source of configs for a restart), and the admin
// client that created the topics.
type env struct {
	t       *testing.T
	admin   *iggy.Client
	rt      *connect.Runtime
	dir     string // the config_dir
	configs *provider.Local
}

// newEnv starts the server and the runtime and waits until every enabled connector
// runs. Everything is stopped by t.Cleanup.
func newEnv(t *testing.T) *env {
	t.Helper()
	kit := iggykit.Start(t)
	admin := kit.Admin
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
	// The runtime loads the directory as cmd/ferry does, and re-reads a connector's
	// active config from the provider over the same directory when it is restarted.
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := conns.Sink("nsink"); s == nil || s.Version != 1 {
		t.Fatalf("loaded nsink %+v, want version 1 (pinned)", s)
	}
	provider := &provider.Local{Dir: dir}
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	rc.Connectors.ConfigDir = dir // native plugins may load from there (and the test binary's directory)
	rt := runkit.Start(t, connect.Options{Connectors: conns, Runtime: rc, Client: kit.Dial(),
		Builtins: connectors.Registry(), LoadSinkPlugin: connect.NativeSinkLoader, Configs: provider})
	defer func() {
		if t.Failed() {
			for _, st := range rt.Status() {
				t.Logf("%s %s: %s %+v", st.Kind, st.Key, st.State, st.LastError)
			}
		}
	}()
	testkit.WaitFor(t, "every connector running", func() bool {
		sts := rt.Status()
		for _, st := range sts {
			if st.State != connect.StateRunning {
				return false
			}
		}
		return len(sts) == 3
	})
	return &env{t: t, admin: admin, rt: rt, dir: dir, configs: provider}
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

// storedOffset reads a group's stored offset of s1/t1 partition 0 from the server, with
// the admin client; found is false when none is stored.
func (e *env) storedOffset(group string) (offset uint64, found bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, found, err := e.admin.GetOffset(ctx, wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(group)},
		iggy.Name("s1"), iggy.Name("t1"), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return o.StoredOffset, found
}

// status is the runtime's status of one started connector.
func (e *env) status(kind, key string) connect.Status {
	e.t.Helper()
	st, ok := e.rt.Connector(kind, key)
	if !ok {
		e.t.Fatalf("%s %s is not started", kind, key)
	}
	return st
}

// api is one Server serving on a loopback port, and a client for it.
type api struct {
	t      *testing.T
	srv    *Server
	base   string
	client *http.Client
}

// serve builds a Server over e's runtime and provider (mod may change the options) and
// serves it until the test ends.
func (e *env) serve(mod func(*Options)) *api {
	e.t.Helper()
	opts := Options{Runtime: e.rt, Configs: e.configs, Version: "0.5.0", Logger: quietLog,
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

// do sends a request; hdr holds header pairs ("Host" sets the request's Host); a body is
// sent as JSON unless hdr sets Content-Type ("" removes it).
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
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // the client sends req.Host, not a Host header
			continue
		}
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
