package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/promtooltest"
	"github.com/ferryio/ferry/internal/testkit"
)

const apiKey = "s3cret-key"

// apiClient calls a running ferry's HTTP API.
type apiClient struct {
	t    *testing.T
	base string
	key  string
}

// do sends a request and returns the status code and body.
func (a apiClient) do(method, path, body string) (int, []byte) {
	a.t.Helper()
	code, b, err := a.try(method, path, body)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, b
}

// try is do that returns a transport error (the API not listening yet).
func (a apiClient) try(method, path, body string) (int, []byte, error) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if a.key != "" {
		req.Header.Set("api-key", a.key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// getJSON GETs path, expects 200 and decodes the body into v.
func (a apiClient) getJSON(path string, v any) {
	a.t.Helper()
	code, b := a.do(http.MethodGet, path, "")
	if code != http.StatusOK {
		a.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		a.t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

type sinkStatus struct {
	Status       string `json:"status"`
	OffsetsError string `json:"offsets_error"`
	ID           uint32 `json:"id"`
	Paused       bool   `json:"paused"`
	LastError    *struct {
		Message string `json:"message"`
	} `json:"last_error"`
	Restart struct {
		Restarts  uint32  `json:"restarts"`
		Total     uint64  `json:"total"`
		NextRetry *uint64 `json:"next_retry"`
		GaveUp    bool    `json:"gave_up"`
	} `json:"restart"`
}

type offsetJSON struct {
	Stream      string `json:"stream"`
	Topic       string `json:"topic"`
	PartitionID uint32 `json:"partition_id"`
	Current     *int64 `json:"current_offset"`
	Stored      *int64 `json:"stored_offset"`
	Lag         uint64 `json:"lag"`
	Uncommitted uint64 `json:"uncommitted"`
	Owned       bool   `json:"owned"`
}

// apiRuntimeConfig is a config.toml against the Iggy server at addr with the HTTP API on
// apiAddr (api key, metrics).
func apiRuntimeConfig(t *testing.T, dir, conns, addr, apiAddr string) string {
	t.Helper()
	return remoteConfigWith(t, dir, addr, conns, fmt.Sprintf(`[http]
enabled = true
address = %q
api_key = %q

[http.metrics]
enabled = true
endpoint = "/metrics"
`, apiAddr, apiKey))
}

// TestAPIOperatesARunningFerry drives a real `ferry run` through its HTTP API, against a
// real `ferry server`: a sink started before its stream exists shows error with its next
// retry and runs within 10 s of the stream being created (default [restart] policy);
// routes need the api key but / and /health; pause keeps the lag growing and resume
// drains it; the metrics after the run are exactly the counters.
func TestAPIOperatesARunningFerry(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.jsonl")
	iggyAddr, apiAddr := freeAddr(t), freeAddr(t)
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("late", "t", "after_consuming", out, 100, 100000))
	startFerry(t, "server", dir, nil, "server", "--addr", iggyAddr, "--data", filepath.Join(dir, "data"))
	p := startFerry(t, "run", dir, nil, "run", "--config", apiRuntimeConfig(t, dir, conns, iggyAddr, apiAddr), "--progress", "0")
	api := apiClient{t: t, base: "http://" + apiAddr, key: apiKey}
	anon := apiClient{t: t, base: api.base}

	var st sinkStatus
	testkit.WaitFor(t, "the API and three restarts", func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		code, b, err := api.try(http.MethodGet, "/sinks/out/status", "")
		if err != nil || code != http.StatusOK {
			return false
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		// After three restarts (1 s, 2 s, 4 s) the next wait is max_backoff, 5 s.
		return st.Status == "error" && st.Restart.NextRetry != nil && st.Restart.Total >= 3
	})
	if st.LastError == nil || !strings.Contains(st.LastError.Message, "stream late topic t") {
		t.Fatalf("last_error %+v", st.LastError)
	}
	// Its offsets cannot be read either (no such stream), and the status says why.
	if !strings.HasPrefix(st.OffsetsError, "stream late topic t: ") {
		t.Fatalf("offsets_error %q, want the stream and topic named", st.OffsetsError)
	}
	for path, want := range map[string]int{"/": 200, "/health": 200, "/sinks": 401, "/stats": 401, "/metrics": 401, "/sinks/out/status": 401} {
		if code, _ := anon.do(http.MethodGet, path, ""); code != want {
			t.Fatalf("GET %s without the key: %d, want %d", path, code, want)
		}
	}
	if code, b := anon.do(http.MethodGet, "/health", ""); string(b) != `{"status":"healthy"}` {
		t.Fatalf("/health: %d %s", code, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := iggy.Dial(ctx, iggyAddr, iggy.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.EnsureTopic(ctx, "late", "t", 1); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	testkit.WaitFor(t, "the sink running", func() bool {
		api.getJSON("/sinks/out/status", &st)
		return st.Status == "running"
	})
	if took := time.Since(created); took > 10*time.Second {
		t.Fatalf("running %v after the stream was created, want within 10 s", took)
	}
	t.Logf("running %v after the stream was created, after %d restarts", time.Since(created).Round(time.Millisecond), st.Restart.Total)

	send := func(from, n int) {
		msgs := make([]iggy.Message, n)
		for i := range msgs {
			msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "m%d", from+i)}
		}
		if _, err := admin.SendMessages(ctx, iggy.Name("late"), iggy.Name("t"), wire.ToPartition(0), msgs); err != nil {
			t.Fatal(err)
		}
	}
	offsets := func() offsetJSON {
		var o []offsetJSON
		api.getJSON("/sinks/out/offsets", &o)
		if len(o) != 1 {
			t.Fatalf("offsets %+v, want one partition", o)
		}
		return o[0]
	}
	stored := func(want int64) func() bool {
		return func() bool { o := offsets(); return o.Stored != nil && *o.Stored == want && o.Lag == 0 }
	}
	send(0, 100)
	testkit.WaitFor(t, "100 stored", stored(99))

	if code, b := api.do(http.MethodPost, "/sinks/out/pause", ""); code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", code, b)
	}
	api.getJSON("/sinks/out/status", &st)
	if !st.Paused || st.Status != "running" {
		t.Fatalf("after pause: %+v", st)
	}
	send(100, 50)
	// Offsets are read from Iggy at most once a second per topic: wait for a read after
	// the send.
	var o offsetJSON
	testkit.WaitFor(t, "offsets read after the send", func() bool {
		o = offsets()
		return o.Current != nil && *o.Current == 149
	})
	if o.Stored == nil || *o.Stored != 99 || o.Lag != 50 || !o.Owned {
		t.Fatalf("offsets while paused: %+v", o)
	}
	if code, b := api.do(http.MethodPost, "/sinks/out/resume", ""); code != http.StatusNoContent {
		t.Fatalf("resume: %d %s", code, b)
	}
	testkit.WaitFor(t, "150 stored after resume", stored(149))
	if o := offsets(); o.Lag != 0 || *o.Current != 149 {
		t.Fatalf("after resume: %+v", o)
	}

	code, b := api.do(http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	metrics := string(b)
	for _, line := range []string{
		`iggy_connector_messages_consumed_total{connector_key="out",connector_type="sink"} 150`,
		`iggy_connector_messages_processed_total{connector_key="out",connector_type="sink"} 150`,
		`iggy_connectors_sinks_total 1`,
		`iggy_connectors_sinks_running 1`,
		`ferry_sink_stored_offset{connector_key="out",partition="0",stream="late",topic="t"} 149`,
		`ferry_sink_lag{connector_key="out",partition="0",stream="late",topic="t"} 0`,
		fmt.Sprintf(`ferry_connector_restarts_total{connector_key="out",connector_type="sink"} %d`, st.Restart.Total),
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Fatalf("metrics lack %q", line)
		}
	}
	// A plain request gets the Prometheus text format, which promtool accepts as it is.
	promtooltest.Check(t, b)
	p.stop(30 * time.Second)
	if n := countLines(out); n != 150 {
		t.Fatalf("the file sink wrote %d lines, want 150", n)
	}
}
