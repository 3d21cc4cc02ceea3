package httpapi

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/provider"
)

// The keys of a config answer: upstream's (Iggy's SinkConfig, with offset_commit of PR
// #3954; SourceConfig), then Ferry's, which upstream clients ignore, and "active".
var (
	upstreamSinkConfigKeys = []string{"key", "enabled", "version", "name", "path", "transforms", "streams",
		"plugin_config_format", "plugin_config", "verbose", "benchmark", "offset_commit"}
	ferrySinkConfigKeys      = []string{"on_failure", "retry", "dead_letter", "commit", "shutdown_timeout", "max_in_flight", "restart"}
	upstreamSourceConfigKeys = []string{"key", "enabled", "version", "name", "path", "transforms", "streams",
		"plugin_config_format", "plugin_config", "verbose", "benchmark"}
	ferrySourceConfigKeys = []string{"on_failure", "retry", "dead_letter", "max_in_flight", "restart"}
)

// wantConfigKeys fails unless m, a config answer of kind, has every key of upstream's
// form, and exactly upstream's keys, Ferry's and "active".
func wantConfigKeys(t *testing.T, what string, m map[string]any, kind string) {
	t.Helper()
	upstream, ferry := upstreamSinkConfigKeys, ferrySinkConfigKeys
	if kind == connect.KindSource {
		upstream, ferry = upstreamSourceConfigKeys, ferrySourceConfigKeys
	}
	for _, k := range upstream {
		if _, ok := m[k]; !ok {
			t.Fatalf("%s lacks upstream's key %q: %v", what, k, m)
		}
	}
	wantKeys(t, what, m, slices.Concat(upstream, ferry, []string{"active"})...)
}

func TestListConfigs(t *testing.T) {
	a := newEnv(t).serve(nil)
	list := a.do("GET", "/sinks/nsink/configs", "").want(t, http.StatusOK).array(t)
	if len(list) != 2 {
		t.Fatalf("configs = %v", list)
	}
	for i, c := range list {
		wantConfigKeys(t, "config", c, connect.KindSink)
		if c["version"] != float64(i+1) || c["key"] != "nsink" {
			t.Fatalf("config %d = %v", i, c)
		}
	}
	// "active" is the version the sink runs (1), not a recorded choice.
	if list[0]["active"] != true || list[1]["active"] != false || list[1]["name"] != "null sink v2" {
		t.Fatalf("active flags: %v / %v", list[0], list[1])
	}
	c := list[0]
	if c["plugin_config_format"] != "json" || c["offset_commit"] != "after_polling" || c["verbose"] != false {
		t.Fatalf("config = %v", c)
	}
	pc := c["plugin_config"].(map[string]any)
	if len(pc) != 2 || pc["level"] != 3.0 || pc["password"] != "***" {
		t.Fatalf("plugin_config = %v, want the password redacted", pc)
	}
	tr := c["transforms"].(map[string]any)
	if len(tr) != 1 || tr["delete_fields"] == nil {
		t.Fatalf("transforms = %v", tr)
	}

	bare := a.do("GET", "/sinks/bare/configs", "").want(t, http.StatusOK).array(t)
	if bare[0]["transforms"] != nil || bare[0]["plugin_config"] != nil || bare[0]["plugin_config_format"] != nil {
		t.Fatalf("bare config = %v, want null transforms, plugin_config and format", bare[0])
	}
	src := a.do("GET", "/sources/gen/configs", "").want(t, http.StatusOK).array(t)
	if len(src) != 1 || src[0]["active"] != true || src[0]["version"] != 4.0 {
		t.Fatalf("source configs = %v", src)
	}
	wantConfigKeys(t, "source config", src[0], connect.KindSource)

	a.do("GET", "/sinks/nope/configs", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	a.do("GET", "/sources/nope/configs", "").wantError(t, http.StatusNotFound, "source_not_found", "Source not found with key: nope")
}

func TestGetConfigVersion(t *testing.T) {
	a := newEnv(t).serve(nil)
	m := a.do("GET", "/sinks/nsink/configs/1", "").want(t, http.StatusOK).object(t)
	if m["version"] != 1.0 || m["active"] != true {
		t.Fatalf("version 1 = %v", m)
	}
	m = a.do("GET", "/sinks/nsink/configs/2", "").want(t, http.StatusOK).object(t)
	if m["version"] != 2.0 || m["active"] != false {
		t.Fatalf("version 2 = %v", m)
	}
	// Upstream answers an unknown version with 500 [quirk], kept for compatibility.
	a.do("GET", "/sinks/nsink/configs/9", "").wantError(t, http.StatusInternalServerError, "sink_config_not_found",
		"Sink config not found with key: nsink, version: 9")
	a.do("GET", "/sources/gen/configs/9", "").wantError(t, http.StatusInternalServerError, "source_config_not_found",
		"Source config not found with key: gen, version: 9")
	a.do("GET", "/sinks/nsink/configs/abc", "").wantText(t, http.StatusBadRequest, "Invalid URL: Cannot parse value at index 1 with value `abc` to a `u64`")
	a.do("GET", "/sinks/nope/configs/1", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
}

func TestActiveConfig(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	m := a.do("GET", "/sinks/nsink/configs/active", "").want(t, http.StatusOK).object(t)
	wantConfigKeys(t, "active config", m, connect.KindSink)
	if m["version"] != 1.0 || m["active"] != true || m["name"] != "null sink" {
		t.Fatalf("active = %v", m)
	}
	m = a.do("GET", "/sources/gen/configs/active", "").want(t, http.StatusOK).object(t)
	if m["version"] != 4.0 || m["active"] != true {
		t.Fatalf("source active = %v", m)
	}
	a.do("GET", "/sinks/nope/configs/active", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")

	a.do("PUT", "/sinks/nsink/configs/active", `{"version":2}`).want(t, http.StatusNoContent)
	if c, err := e.configs.ActiveSink("nsink"); err != nil || c.Version != 2 {
		t.Fatalf("provider's active nsink = %+v, %v; want version 2", c, err)
	}
	// Recording a version restarts nothing: the running config stays version 1.
	if m := a.do("GET", "/sinks/nsink/configs/active", "").want(t, http.StatusOK).object(t); m["version"] != 1.0 {
		t.Fatalf("running version = %v", m["version"])
	}
	a.do("PUT", "/sources/gen/configs/active", `{"version":4}`).want(t, http.StatusNoContent)
	a.do("PUT", "/sinks/nsink/configs/active", `{"version":9}`).wantError(t, http.StatusInternalServerError,
		"sink_config_not_found", "Sink config not found with key: nsink, version: 9")
	a.do("PUT", "/sinks/nsink/configs/active", `{"version":`).wantText(t, http.StatusBadRequest,
		"Failed to parse the request body as JSON: unexpected end of JSON input")
	a.do("PUT", "/sinks/nsink/configs/active", `{"version":"x"}`).wantText(t, http.StatusUnprocessableEntity,
		"Failed to deserialize the JSON body into the target type: version: expected u64")
	a.do("PUT", "/sinks/nsink/configs/active", `{}`).wantText(t, http.StatusUnprocessableEntity,
		"Failed to deserialize the JSON body into the target type: missing field `version`")
	a.do("PUT", "/sinks/nsink/configs/active", `{"version":2}`, "Content-Type", "").wantText(t, http.StatusUnsupportedMediaType,
		"Expected request with `Content-Type: application/json`")
}

func TestCreateConfig(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	body := `{"enabled":true,"name":"third","path":"builtin:null","streams":[{"stream":"s1","topics":["t1"],"schema":"json"}]}`
	m := a.do("POST", "/sinks/nsink/configs", body).want(t, http.StatusOK).object(t)
	wantConfigKeys(t, "created", m, connect.KindSink)
	if m["version"] != 3.0 || m["active"] != false || m["name"] != "third" || m["key"] != "nsink" {
		t.Fatalf("created = %v", m)
	}
	if list := a.do("GET", "/sinks/nsink/configs", "").want(t, http.StatusOK).array(t); len(list) != 3 || list[2]["version"] != 3.0 {
		t.Fatalf("configs after create: %v", list)
	}
	// The provider wrote it to the config_dir, where the next load finds it.
	if c, err := e.configs.SinkConfig("nsink", 3); err != nil || c.Name != "third" || c.Streams[0].Schema != "json" {
		t.Fatalf("provider's nsink version 3 = %+v, %v", c, err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "sink_nsink_3.toml")); err != nil {
		t.Fatal(err)
	}
	// Creating needs no running connector, as upstream.
	m = a.do("POST", "/sources/newsrc/configs", `{"enabled":false,"name":"n","path":"builtin:random","streams":[]}`).
		want(t, http.StatusOK).object(t)
	wantConfigKeys(t, "created source", m, connect.KindSource)
	if m["version"] != 0.0 || m["key"] != "newsrc" || m["active"] != false || m["enabled"] != false {
		t.Fatalf("created source = %v", m)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "source_newsrc_0.toml")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, body, reason string }{
		{"/sinks/nsink/configs", `{"enabled":true,"name":"","path":"x","streams":[]}`, "request body: name: must not be empty"},
		{"/sinks/nsink/configs", `{"enabled":true,"name":"n","path":"x"}`, "request body: streams: required"},
		{"/sinks/nsink/configs", `{"enabled":"yes","name":"n","path":"x","streams":[]}`, "request body: enabled: expected a boolean (true or false), got string"},
		{"/sinks/nsink/configs", `{"enabled":true,"name":"n","path":"x","streams":[{"stream":"s1","topics":["t1"],"schema":"nope"}]}`,
			`request body: streams[0].schema: unknown schema "nope" (want json, raw, text, proto, flat_buffer or avro)`},
		{"/sources/gen/configs", `{"enabled":true,"name":"n","path":"x","streams":[{"stream":"s1","schema":"json"}]}`,
			"request body: streams[0].topic: required key missing"},
		{"/sinks/.hidden/configs", body, `invalid connector config: connector key ".hidden" starts with '.'`},
	} {
		a.do("POST", tc.path, tc.body).wantError(t, http.StatusBadRequest, "invalid_configuration", "Invalid configuration: "+tc.reason)
	}
	if list, err := e.configs.SinkConfigs("nsink"); err != nil || len(list) != 3 {
		t.Fatalf("nsink versions after refused creates: %d, %v", len(list), err)
	}
	a.do("POST", "/sinks/nsink/configs", `not json`).wantText(t, http.StatusBadRequest,
		"Failed to parse the request body as JSON: invalid character 'o' in literal null (expecting 'u')")
	a.do("POST", "/sinks/nsink/configs", `[1]`).wantText(t, http.StatusUnprocessableEntity,
		"Failed to deserialize the JSON body into the target type: expected a JSON object")
	a.do("POST", "/sinks/nsink/configs", body, "Content-Type", "text/plain").wantText(t, http.StatusUnsupportedMediaType,
		"Expected request with `Content-Type: application/json`")
	a.do("POST", "/sinks/nsink/configs", body, "Content-Type", "application/vnd.ferry+json; charset=utf-8").want(t, http.StatusOK)
}

func TestDeleteConfig(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	a.do("DELETE", "/sinks/nsink/configs?version=2", "").want(t, http.StatusNoContent)
	if list := a.do("GET", "/sinks/nsink/configs", "").want(t, http.StatusOK).array(t); len(list) != 1 || list[0]["version"] != 1.0 {
		t.Fatalf("configs after delete: %v", list)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "sink_nsink_2.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sink_nsink_2.toml after its delete: %v", err)
	}
	a.do("DELETE", "/sinks/nsink/configs?version=2", "").wantError(t, http.StatusInternalServerError,
		"sink_config_not_found", "Sink config not found with key: nsink, version: 2")
	// Without a version: the one recorded active (.active_versions.toml); bare has none.
	a.do("DELETE", "/sinks/bare/configs", "").wantError(t, http.StatusInternalServerError,
		"sink_config_not_found", "Sink config not found with key: bare, version: 0")
	a.do("DELETE", "/sinks/nsink/configs?version=abc", "").wantText(t, http.StatusBadRequest,
		"Failed to deserialize query string: version: invalid digit found in string")
	// nsink's recorded version is 1: deleted, and its pin with it. What runs is unchanged.
	a.do("DELETE", "/sinks/nsink/configs", "").want(t, http.StatusNoContent)
	if list := a.do("GET", "/sinks/nsink/configs", "").want(t, http.StatusOK).array(t); len(list) != 0 {
		t.Fatalf("configs after deleting the active one: %v", list)
	}
	if c, err := e.configs.ActiveSink("nsink"); !errors.Is(err, provider.ErrConfigNotFound) {
		t.Fatalf("provider's active nsink after the delete = %+v, %v; want ErrConfigNotFound", c, err)
	}
	if m := a.do("GET", "/sinks/nsink/configs/active", "").want(t, http.StatusOK).object(t); m["version"] != 1.0 {
		t.Fatalf("running nsink after the delete = %v", m)
	}
	a.do("DELETE", "/sinks/nsink/configs", "").wantError(t, http.StatusInternalServerError,
		"sink_config_not_found", "Sink config not found with key: nsink, version: 0")

	a.do("PUT", "/sources/gen/configs/active", `{"version":4}`).want(t, http.StatusNoContent)
	a.do("DELETE", "/sources/gen/configs", "").want(t, http.StatusNoContent)
	if list := a.do("GET", "/sources/gen/configs", "").want(t, http.StatusOK).array(t); len(list) != 0 {
		t.Fatalf("source configs after delete: %v", list)
	}
}

func TestConfigsWithoutStore(t *testing.T) {
	a := newEnv(t).serve(func(o *Options) { o.Configs = nil })
	const reason = "no connector config provider is configured"
	a.do("GET", "/sinks/nsink/configs", "").wantError(t, http.StatusInternalServerError, "error", reason)
	a.do("GET", "/sinks/nsink/configs/1", "").wantError(t, http.StatusInternalServerError, "error", reason)
	a.do("POST", "/sinks/nsink/configs", `{"enabled":true,"name":"x","path":"y","streams":[]}`).wantError(t, http.StatusInternalServerError, "error", reason)
	a.do("DELETE", "/sinks/nsink/configs?version=1", "").wantError(t, http.StatusInternalServerError, "error", reason)
	a.do("PUT", "/sources/gen/configs/active", `{"version":4}`).wantError(t, http.StatusInternalServerError, "error", reason)
	// Unknown connectors are still 404, and the routes of the running config still work.
	a.do("GET", "/sinks/nope/configs", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	a.do("GET", "/sinks/nsink/configs/active", "").want(t, http.StatusOK)
	a.do("GET", "/sinks/nsink/configs/plugin", "").want(t, http.StatusOK)
}

func TestPluginConfig(t *testing.T) {
	a := newEnv(t).serve(nil)
	for _, tc := range []struct {
		query, contentType, body string
	}{
		{"", "application/json", `{"level":3,"password":"***"}`}, // the file's plugin_config_format
		{"?format=json", "application/json", `{"level":3,"password":"***"}`},
		{"?format=text", "text/plain", `{"level":3,"password":"***"}`},
		{"?format=toml", "application/toml", "level = 3\npassword = '***'\n"},
	} {
		r := a.do("GET", "/sinks/nsink/configs/plugin"+tc.query, "").want(t, http.StatusOK)
		if ct := r.header.Get("Content-Type"); ct != tc.contentType || string(r.body) != tc.body {
			t.Errorf("plugin%s: %s %q, want %s %q", tc.query, ct, r.body, tc.contentType, tc.body)
		}
	}
	r := a.do("GET", "/sinks/nsink/configs/plugin?format=yaml", "").want(t, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/yaml" || !strings.Contains(string(r.body), "level") {
		t.Errorf("yaml: %s %q", ct, r.body)
	}
	// No plugin_config_format: toml, as upstream's default.
	r = a.do("GET", "/sources/gen/configs/plugin", "").want(t, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/toml" || !strings.Contains(string(r.body), "batch_size = 2") {
		t.Errorf("source plugin: %s %q", ct, r.body)
	}
	// No plugin_config: 404 with an empty body.
	if r := a.do("GET", "/sinks/bare/configs/plugin", "").want(t, http.StatusNotFound); len(r.body) != 0 {
		t.Errorf("bare plugin body %q, want empty", r.body)
	}
	a.do("GET", "/sinks/nsink/configs/plugin?format=xml", "").wantText(t, http.StatusBadRequest,
		"Failed to deserialize query string: format: unknown variant `xml`, expected one of `json`, `yaml`, `toml`, `text`")
	a.do("GET", "/sinks/nope/configs/plugin", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
}
