package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
)

func TestRootAndHealth(t *testing.T) {
	a := newEnv(t).serve(nil)
	r := a.do("GET", "/", "").want(t, http.StatusOK)
	if string(r.body) != "Connector Runtime API" {
		t.Fatalf("GET / body %q", r.body)
	}
	r = a.do("GET", "/health", "").want(t, http.StatusOK)
	if string(r.body) != `{"status":"healthy"}` || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /health: %q (%s)", r.body, r.header.Get("Content-Type"))
	}
	a.do("GET", "/nope", "").want(t, http.StatusNotFound)
	a.do("POST", "/sinks", "").want(t, http.StatusMethodNotAllowed)
}

// With a Health hook (the embedded server's storage fault), /health says what is wrong.
func TestHealthReportsAFault(t *testing.T) {
	var fault error
	a := newEnv(t).serve(func(o *Options) { o.Health = func() error { return fault } })
	a.do("GET", "/health", "").want(t, http.StatusOK)
	fault = errors.New("storage: disk full: no space left on device")
	r := a.do("GET", "/health", "").want(t, http.StatusServiceUnavailable)
	if string(r.body) != `{"reason":"storage: disk full: no space left on device","status":"unhealthy"}` {
		t.Fatalf("GET /health: %s", r.body)
	}
}

func TestListConnectors(t *testing.T) {
	a := newEnv(t).serve(nil)
	sinks := a.do("GET", "/sinks", "").want(t, http.StatusOK).array(t)
	// The disabled sink "off" is not started, so not listed (as upstream).
	if len(sinks) != 2 || sinks[0]["key"] != "bare" || sinks[1]["key"] != "nsink" {
		t.Fatalf("GET /sinks = %v, want bare and nsink", sinks)
	}
	wantKeys(t, "bare", sinks[0], "id", "key", "name", "path", "enabled", "status")
	wantKeys(t, "nsink", sinks[1], "id", "key", "name", "path", "enabled", "status", "plugin_config_format")
	n := sinks[1]
	if n["name"] != "null sink" || n["path"] != "builtin:null" || n["enabled"] != true || n["status"] != "running" ||
		n["plugin_config_format"] != "json" {
		t.Fatalf("nsink = %v", n)
	}
	if id, ok := n["id"].(float64); !ok || id < 1 {
		t.Fatalf("nsink id = %v", n["id"])
	}
	sources := a.do("GET", "/sources", "").want(t, http.StatusOK).array(t)
	if len(sources) != 1 {
		t.Fatalf("GET /sources = %v", sources)
	}
	wantKeys(t, "gen", sources[0], "id", "key", "name", "path", "enabled", "status")
	if g := sources[0]; g["key"] != "gen" || g["name"] != "generator" || g["path"] != "builtin:random" || g["status"] != "running" {
		t.Fatalf("gen = %v", g)
	}
}

func TestGetConnector(t *testing.T) {
	a := newEnv(t).serve(nil)
	m := a.do("GET", "/sinks/nsink", "").want(t, http.StatusOK).object(t)
	wantKeys(t, "sink details", m, "id", "key", "name", "path", "enabled", "status", "plugin_config_format", "streams")
	streams := m["streams"].([]any)
	if len(streams) != 1 {
		t.Fatalf("streams = %v", streams)
	}
	st := streams[0].(map[string]any)
	wantKeys(t, "stream", st, "stream", "topics", "schema", "avro_schema_json", "avro_schema_path", "batch_length", "poll_interval", "consumer_group")
	if st["stream"] != "s1" || st["schema"] != "text" || st["batch_length"] != 50.0 || st["poll_interval"] != "10ms" ||
		st["consumer_group"] != "iggy-connect-sink-nsink" || st["avro_schema_json"] != nil || st["avro_schema_path"] != nil {
		t.Fatalf("stream = %v", st)
	}
	if topics := st["topics"].([]any); len(topics) != 1 || topics[0] != "t1" {
		t.Fatalf("topics = %v", topics)
	}

	m = a.do("GET", "/sources/gen", "").want(t, http.StatusOK).object(t)
	wantKeys(t, "source details", m, "id", "key", "name", "path", "enabled", "status", "streams")
	st = m["streams"].([]any)[0].(map[string]any)
	wantKeys(t, "source stream", st, "stream", "topic", "schema", "avro_schema_json", "avro_schema_path", "batch_length", "linger_time")
	if st["topic"] != "t2" || st["batch_length"] != 10.0 || st["linger_time"] != "5ms" {
		t.Fatalf("source stream = %v", st)
	}

	a.do("GET", "/sinks/nope", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	a.do("GET", "/sources/nope", "").wantError(t, http.StatusNotFound, "source_not_found", "Source not found with key: nope")
	// A disabled connector is not loaded: 404 as upstream.
	a.do("GET", "/sinks/off", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: off")
	// A sink key is not a source key.
	a.do("GET", "/sources/nsink", "").wantError(t, http.StatusNotFound, "source_not_found", "Source not found with key: nsink")
}

func TestTransforms(t *testing.T) {
	a := newEnv(t).serve(nil)
	got := string(a.do("GET", "/sinks/nsink/transforms", "").want(t, http.StatusOK).body)
	if want := `[{"type":"delete_fields","config":{"enabled":true,"fields":["secret"]}}]`; got != want {
		t.Fatalf("transforms = %s, want %s", got, want)
	}
	if got := string(a.do("GET", "/sources/gen/transforms", "").want(t, http.StatusOK).body); got != "[]" {
		t.Fatalf("source transforms = %s, want []", got)
	}
	a.do("GET", "/sinks/nope/transforms", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
}

func TestStatusRoutes(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	e.fill(10)
	testkit.WaitFor(t, "nsink polled its partition", func() bool {
		st, _ := e.rt.Connector("sink", "nsink")
		return len(st.Partitions) == 1 && st.Stats.Polled == 10
	})
	m := a.do("GET", "/sinks/nsink/status", "").want(t, http.StatusOK).object(t)
	wantKeys(t, "sink status", m, "key", "kind", "name", "id", "status", "paused", "restart", "stats", "partitions")
	if m["key"] != "nsink" || m["kind"] != "sink" || m["name"] != "null sink" || m["status"] != "running" || m["paused"] != false {
		t.Fatalf("sink status = %v", m)
	}
	rs := m["restart"].(map[string]any)
	wantKeys(t, "restart", rs, "restarts", "total", "max_restarts", "next_retry", "gave_up", "waiting_for_plugin")
	if rs["next_retry"] != nil || rs["gave_up"] != false || rs["waiting_for_plugin"] != false {
		t.Fatalf("restart = %v", rs)
	}
	stats := m["stats"].(map[string]any)
	wantKeys(t, "sink stats", stats, "polled", "delivered", "committed", "consume_errors", "failed_batches", "dead_lettered",
		"skipped", "stores", "store_errors", "stores_refused", "commits_accepted", "commits_rejected", "retries", "filtered", "decoded", "decode_errors", "transform_errors",
		"poll_errors", "topics_recreated", "partition_rewinds", "errors")
	if stats["polled"] != 10.0 || stats["consume_errors"] != 0.0 {
		t.Fatalf("sink stats = %v", stats)
	}
	parts := m["partitions"].([]any)
	if len(parts) != 1 {
		t.Fatalf("partitions = %v", parts)
	}
	p := parts[0].(map[string]any)
	wantKeys(t, "partition", p, "stream", "topic", "partition_id", "state", "polled", "delivered", "done", "stored",
		"current_offset", "lag", "pending", "uncommitted", "paused", "offsets_age_ms")
	p = withoutAge(t, p)
	if p["stream"] != "s1" || p["topic"] != "t1" || p["partition_id"] != 0.0 || p["state"] != "owned" || p["polled"] != 9.0 {
		t.Fatalf("partition = %v", p)
	}

	m = a.do("GET", "/sources/gen/status", "").want(t, http.StatusOK).object(t)
	wantKeys(t, "source status", m, "key", "kind", "name", "id", "status", "restart", "stats")
	if m["kind"] != "source" || m["key"] != "gen" {
		t.Fatalf("source status = %v", m)
	}
	wantKeys(t, "source stats", m["stats"].(map[string]any), "produced", "sent", "acked", "send_errors", "failed_batches",
		"retries", "state_errors", "dead_lettered", "skipped", "decode_errors", "transform_errors", "errors")

	a.do("GET", "/sinks/nope/status", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	a.do("GET", "/sources/nope/status", "").wantError(t, http.StatusNotFound, "source_not_found", "Source not found with key: nope")
}

func TestBodyNeverHoldsSecrets(t *testing.T) {
	a := newEnv(t).serve(nil)
	for _, path := range []string{"/sinks", "/sinks/nsink", "/sinks/nsink/configs", "/sinks/nsink/configs/1",
		"/sinks/nsink/configs/active", "/sinks/nsink/configs/plugin", "/sinks/nsink/configs/plugin?format=toml",
		"/sinks/nsink/configs/plugin?format=yaml", "/sinks/nsink/configs/plugin?format=text",
		"/sources/gen/configs", "/sources/gen/configs/active", "/sources/gen/configs/plugin", "/stats"} {
		r := a.do("GET", path, "").want(t, http.StatusOK)
		for _, secret := range []string{"hunter2"} {
			if strings.Contains(string(r.body), secret) {
				t.Errorf("GET %s answers a secret: %s", path, r.body)
			}
		}
	}
}

// TestRuntimeReportsConfig checks the fields of the runtime's Status that the API renders
// against the loaded config files.
func TestRuntimeReportsConfig(t *testing.T) {
	e := newEnv(t)
	st := e.status("sink", "nsink")
	if st.ID == 0 || !st.Enabled || st.Version != 1 || st.Path != "builtin:null" || st.PluginVersion != "builtin" ||
		st.Sink == nil || st.Sink.Key != "nsink" || st.Sink.Version != 1 || st.Source != nil {
		t.Fatalf("runtime status = %+v", st)
	}
	src := e.status("source", "gen")
	if src.Source == nil || src.Sink != nil || src.ID == 0 || src.ID == st.ID || src.Version != 4 || src.Path != "builtin:random" {
		t.Fatalf("runtime source status = %+v", src)
	}
}
