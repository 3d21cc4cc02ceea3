package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/provider"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

// activeAPI is a config API whose answer to GET /configs/active the test sets.
type activeAPI struct {
	mu   sync.Mutex
	body []byte
}

func (a *activeAPI) set(body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.body = []byte(body)
}

func (a *activeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/configs/active" {
		http.NotFound(w, r)
		return
	}
	a.mu.Lock()
	body := a.body
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

const activeS1 = `{"sinks": {"s1": {"key": "s1", "enabled": true, "version": 0, "name": "null s1", "path": "builtin:null",
	"streams": [{"stream": "s1", "topics": ["t1"], "schema": "text", "poll_interval": "5ms"}]}}, "sources": {}}`

// TestReloadRefusesActiveConfigsOfAnotherShape: a config API that answers 200 with
// something that is not {"sinks": {…}, "sources": {…}} (a maintenance object, null,
// null lists, one list missing, a list that is an array) or with more than 16 MiB makes
// POST /reload answer 500 naming what was wrong and change nothing: the running sink
// keeps its instance. Before, each of those bodies read as "no connectors" and the reload
// stopped every one ({"stopped":["sink s1"]}), and the 17 MiB answer was cut and
// reported as "not JSON". An explicitly empty {"sinks": {}, "sources": {}} is a valid
// answer and stops the sink.
func TestReloadRefusesActiveConfigsOfAnotherShape(t *testing.T) {
	kit := iggykit.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kit.Admin.EnsureTopic(ctx, "s1", "t1", 1); err != nil {
		t.Fatal(err)
	}
	cfgAPI := &activeAPI{}
	cfgAPI.set(activeS1)
	srv := httptest.NewServer(cfgAPI)
	t.Cleanup(srv.Close)
	p, err := provider.NewHTTP(config.Provider{ConfigType: config.ProviderHTTP, BaseURL: srv.URL, Timeout: 5 * time.Second,
		Retry: config.ProviderRetry{Enabled: true, MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, BackoffMultiplier: 2}},
		provider.HTTPOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	conns, err := p.Load(ctx)
	if err != nil || len(conns.Sinks) != 1 {
		t.Fatalf("load: %v, %v", conns, err)
	}
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	rt := runkit.Start(t, connect.Options{Connectors: conns, Runtime: rc, Client: kit.Dial(),
		Builtins: connectors.Registry(), Configs: p, Logger: quietLog})
	testkit.WaitFor(t, "s1 running", func() bool {
		st, ok := rt.Connector(connect.KindSink, "s1")
		return ok && st.State == connect.StateRunning
	})
	before, _ := rt.Connector(connect.KindSink, "s1")
	a := serveOpts(t, Options{Runtime: rt, Version: "0.5.0", Logger: quietLog,
		HTTP: config.HTTP{Enabled: true, Address: "127.0.0.1:0"}})

	const want = `{"sinks": {KEY: SinkConfig, …}, "sources": {KEY: SourceConfig, …}}`
	prefix := "reload: config provider request failed: GET " + srv.URL + "/configs/active: "
	cases := []struct{ name, body, reason string }{
		{"maintenance", `{"status": "maintenance"}`,
			`the active configs lack "sinks" and "sources" (the answer is an object with keys status), want ` + want},
		{"null", `null`, "the active configs are a null, not " + want},
		{"null lists", `{"sinks": null, "sources": null}`,
			`the active configs' "sinks" is a null, not an object of key → config ({} for none)`},
		{"sources missing", `{"sinks": {}}`,
			`the active configs lack "sources" (the answer is an object with keys sinks), want ` + want},
		{"an array", `{"sinks": [], "sources": {}}`,
			`the active configs' "sinks" is an array of 0 items, not an object of key → config ({} for none)`},
		{"a string", `"ok"`, "the active configs are a string, not " + want},
		{"too large", `{"sinks": {}, "sources": {}, "pad": "` + strings.Repeat("x", 17<<20) + `"}`,
			"HTTP 200: the response is too large: over the 16 MiB (16777216 bytes) a config answer may hold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfgAPI.set(tc.body)
			a.do(http.MethodPost, "/reload", "").wantError(t, http.StatusInternalServerError, "error", prefix+tc.reason)
			st, ok := rt.Connector(connect.KindSink, "s1")
			if !ok || st.State != connect.StateRunning || st.ID != before.ID {
				t.Fatalf("after the reload s1 is %v (found %v, id %d, was %d), want the same instance running", st.State, ok, st.ID, before.ID)
			}
		})
	}

	cfgAPI.set(activeS1)
	if got := string(a.do(http.MethodPost, "/reload", "").want(t, http.StatusOK).body); got !=
		`{"started":[],"restarted":[],"stopped":[],"unchanged":["sink s1"],"refused":[]}` {
		t.Fatalf("the same configs again: %s", got)
	}
	cfgAPI.set(`{"sinks": {}, "sources": {}}`)
	if got := string(a.do(http.MethodPost, "/reload", "").want(t, http.StatusOK).body); got !=
		`{"started":[],"restarted":[],"stopped":["sink s1"],"unchanged":[],"refused":[]}` {
		t.Fatalf("no connectors: %s", got)
	}
}
