package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/configjson"
)

const minimalBody = `{"enabled":true,"name":"N","path":"builtin:stdout","streams":[{"stream":"s","topics":["a"],"schema":"json"}]}`

// dirNames lists dir, hidden files included, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCreateSinkWritesNextVersion(t *testing.T) {
	dir := t.TempDir()
	p := &Local{Dir: dir}
	s, err := p.CreateSink("k", []byte(minimalBody))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sink_k_0.toml")
	const want = `type = 'sink'
key = 'k'
enabled = true
version = 0
name = 'N'
path = 'builtin:stdout'

[[streams]]
schema = 'json'
stream = 's'
topics = ['a']
`
	if got := readText(t, path); got != want {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}
	back, err := config.ParseSinkFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.File != path || s.Version != 0 || !reflect.DeepEqual(s, back) {
		t.Fatalf("returned %#v\nread back %#v", s, back)
	}
	// A hand-written version 4 of the key: the next one is 5, whatever the file name.
	writeFile(t, dir, "mine.toml", sinkFile("k", 4, "K4"))
	s, err = p.CreateSink("k", []byte(minimalBody))
	if err != nil || s.Version != 5 || s.File != filepath.Join(dir, "sink_k_5.toml") {
		t.Fatalf("second create: %v %+v", err, s)
	}
	// Sources count their own versions.
	src, err := p.CreateSource("k", []byte(`{"enabled":false,"name":"S","path":"builtin:seq","streams":[{"stream":"s","topic":"t","schema":"text"}]}`))
	if err != nil || src.Version != 0 || src.File != filepath.Join(dir, "source_k_0.toml") || src.Enabled {
		t.Fatalf("source create: %v %+v", err, src)
	}
	if got, want := dirNames(t, dir), []string{"mine.toml", "sink_k_0.toml", "sink_k_5.toml", "source_k_0.toml"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("dir = %v, want %v (no temporary file left)", got, want)
	}
}

func TestCreateSinkIgnoresUnknownAndNullKeys(t *testing.T) {
	dir := t.TempDir()
	p := &Local{Dir: dir}
	s, err := p.CreateSink("k", []byte(`{"enabled":true,"name":"N","path":"builtin:stdout","key":"other","version":9,"active":true,"colour":"red",
		"streams":[{"stream":"s","topics":["a"],"schema":"json","batch_length":null,"poll_interval":null,"consumer_group":null,"avro_schema_json":null,"extra":1}],
		"transforms":null,"plugin_config_format":null,"plugin_config":null,"dead_letter":null,"retry":{"max_retries":1,"backoff":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Key != "k" || s.Version != 0 || s.Retry.MaxRetries != 1 || s.Streams[0].BatchLength != config.DefaultBatchLength ||
		s.Streams[0].ConsumerGroup != "iggy-connect-sink-k" || string(s.PluginConfig) != "null" || s.Transforms != nil {
		t.Fatalf("unexpected %#v", s)
	}
	if strings.Contains(readText(t, s.File), "colour") {
		t.Fatal("an unknown key reached the file")
	}
}

func TestCreateBodyErrors(t *testing.T) {
	const streams = `"streams":[{"stream":"s","topics":["a"],"schema":"json"}]`
	const base = `"enabled":true,"name":"N","path":"builtin:stdout",`
	for _, tc := range []struct {
		name, body string
		source     bool
		key, msg   string
	}{
		{name: "not JSON", body: `{"enabled":`, msg: "not valid JSON: unexpected EOF"},
		{name: "trailing data", body: `{"enabled":true} {}`, msg: "not valid JSON: data after the object"},
		{name: "not an object", body: `[1]`, msg: "want a JSON object"},
		{name: "missing enabled", body: `{"name":"N","path":"p",` + streams + `}`, key: "enabled", msg: "required"},
		{name: "null name", body: `{"enabled":true,"name":null,"path":"p",` + streams + `}`, key: "name", msg: "required"},
		{name: "missing path", body: `{"enabled":true,"name":"N",` + streams + `}`, key: "path", msg: "required"},
		{name: "missing streams", body: `{` + strings.TrimSuffix(base, ",") + `}`, key: "streams", msg: "required"},
		{name: "enabled type", body: `{"enabled":"yes","name":"N","path":"p",` + streams + `}`, key: "enabled", msg: "expected a boolean (true or false), got string"},
		{name: "name type", body: `{"enabled":true,"name":5,"path":"p",` + streams + `}`, key: "name", msg: "expected a string, got integer"},
		{name: "stream field missing", body: `{` + base + `"streams":[{"stream":"s","schema":"json"}]}`, key: "streams[0].topics", msg: "required key missing"},
		{name: "batch_length type", body: `{` + base + `"streams":[{"stream":"s","topics":["a"],"schema":"json","batch_length":"big"}]}`,
			key: "streams[0].batch_length", msg: "expected an integer, got string"},
		{name: "bad schema", body: `{` + base + `"streams":[{"stream":"s","topics":["a"],"schema":"xml"}]}`,
			key: "streams[0].schema", msg: `unknown schema "xml" (want json, raw, text, proto, flat_buffer or avro)`},
		{name: "bad duration", body: `{` + base + `"streams":[{"stream":"s","topics":["a"],"schema":"json","poll_interval":"5"}]}`, key: "streams[0].poll_interval"},
		{name: "retry type", body: `{` + base + streams + `,"retry":5}`, key: "retry", msg: "cannot decode JSON integer into an object"},
		{name: "retry order", body: `{` + base + streams + `,"retry":{"initial_backoff":"2s","max_backoff":"1s"}}`,
			key: "retry.max_backoff", msg: "must be at least retry.initial_backoff (2s)"},
		{name: "restart order", body: `{` + base + streams + `,"restart":{"initial_backoff":"20s"}}`,
			key: "restart.max_backoff", msg: "must be at least restart.initial_backoff (20s)"},
		{name: "dead_letter missing", body: `{` + base + streams + `,"on_failure":"dead_letter"}`,
			key: "dead_letter.stream", msg: `required when on_failure = "dead_letter"`},
		{name: "offset_commit", body: `{` + base + streams + `,"offset_commit":"never"}`,
			key: "offset_commit", msg: `unknown value "never" (want after_polling, auto, after_consuming or sink_controlled)`},
		{name: "commit", body: `{` + base + streams + `,"commit":{"max_uncommitted":0}}`, key: "commit.max_uncommitted", msg: "must be at least 1"},
		{name: "shutdown_timeout", body: `{` + base + streams + `,"shutdown_timeout":"0"}`, key: "shutdown_timeout", msg: "must be positive"},
		{name: "plugin_config_format", body: `{` + base + streams + `,"plugin_config_format":"xml"}`,
			key: "plugin_config_format", msg: `unknown value "xml" (want json, yaml, toml or text)`},
		{name: "null in plugin_config", body: `{` + base + streams + `,"plugin_config":{"a":[1,{"b":null}]}}`,
			key: "plugin_config.a[1].b", msg: "null cannot be written to a connector file; leave the key out"},
		{name: "unknown transform", body: `{` + base + streams + `,"transforms":{"explode":{"enabled":true}}}`, key: "transforms.explode"},
		{name: "transform without enabled", body: `{` + base + streams + `,"transforms":{"delete_fields":{"fields":["a"]}}}`,
			key: "transforms.delete_fields.enabled", msg: "required key missing"},
		{name: "source topic missing", source: true, body: `{` + base + `"streams":[{"stream":"s","schema":"json"}]}`, key: "streams[0].topic", msg: "required key missing"},
		{name: "source on_failure", source: true, body: `{` + base + `"streams":[],"on_failure":"panic"}`,
			key: "on_failure", msg: `unknown value "panic" (want stop, dead_letter or skip)`},
		{name: "source ignores sink keys", source: true, body: `{` + base + `"streams":[],"commit":{"max_uncommitted":0},"restart":{"max_restarts":1,"max_backoff":"0"}}`,
			key: "restart.max_backoff", msg: "must be positive when restart.max_restarts > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := &Local{Dir: dir}
			var err error
			if tc.source {
				_, err = p.CreateSource("k", []byte(tc.body))
			} else {
				_, err = p.CreateSink("k", []byte(tc.body))
			}
			if !errors.Is(err, config.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
			ce := wantErr(t, err, configjson.BodyFile, 0, tc.key, "")
			if tc.msg != "" && ce.Msg != tc.msg {
				t.Errorf("msg = %q, want %q", ce.Msg, tc.msg)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("files written: %v", names)
			}
		})
	}
}

func TestCreateRejectsUnsafeKeys(t *testing.T) {
	dir := t.TempDir()
	p := &Local{Dir: dir}
	for _, key := range []string{"", "a/b", "../x", ".hidden", `a\b`, "a\x00b"} {
		if _, err := p.CreateSink(key, []byte(minimalBody)); !errors.Is(err, config.ErrInvalidConfig) {
			t.Errorf("CreateSink(%q) = %v, want ErrInvalidConfig", key, err)
		}
		if _, err := p.CreateSource(key, []byte(minimalBody)); !errors.Is(err, config.ErrInvalidConfig) {
			t.Errorf("CreateSource(%q) = %v, want ErrInvalidConfig", key, err)
		}
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("files written: %v", names)
	}
	if _, err := p.CreateSink("a.b-c", []byte(minimalBody)); err != nil {
		t.Fatalf("a dotted key is a fine file name part: %v", err)
	}
}

func TestCreateRefusesToOverwriteAnotherConfig(t *testing.T) {
	dir := t.TempDir()
	// sink_k_0.toml holds key "other": creating k version 0 must not replace it.
	other := writeFile(t, dir, "sink_k_0.toml", sinkFile("other", 3, "O"))
	p := &Local{Dir: dir}
	_, err := p.CreateSink("k", []byte(minimalBody))
	if err == nil || err.Error() != `cannot create sink version 0 of "k": `+other+` exists and holds another config` {
		t.Fatalf("err = %v", err)
	}
	if readText(t, other) != sinkFile("other", 3, "O") {
		t.Fatal("file replaced")
	}
}

func TestCreateSinkConcurrent(t *testing.T) {
	dir := t.TempDir()
	p := &Local{Dir: dir}
	const n = 8
	var wg sync.WaitGroup
	versions := make([]uint64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := p.CreateSink("k", []byte(minimalBody))
			errs[i] = err
			if err == nil {
				versions[i] = s.Version
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	if !reflect.DeepEqual(versions, []uint64{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("versions = %v", versions)
	}
}

func TestCreateAppliesEnv(t *testing.T) {
	dir := t.TempDir()
	p := &Local{Dir: dir, Env: []string{"IGGY_CONNECTORS_SINK_K_NAME=from-env"}}
	s, err := p.CreateSink("k", []byte(minimalBody))
	if err != nil || s.Name != "from-env" {
		t.Fatalf("%v %+v", err, s)
	}
	if !strings.Contains(readText(t, s.File), "name = 'N'") {
		t.Fatal("the file must hold the body's value, not the override")
	}
	// An override that makes the body invalid is the body's error, and nothing is written.
	dir = t.TempDir()
	p = &Local{Dir: dir, Env: []string{"IGGY_CONNECTORS_SINK_K_ON_FAILURE=explode"}}
	_, err = p.CreateSink("k", []byte(minimalBody))
	ce := wantErr(t, err, configjson.BodyFile, 0, "on_failure", "IGGY_CONNECTORS_SINK_K_ON_FAILURE")
	if !errors.Is(err, config.ErrInvalidConfig) || ce.Msg != `unknown value "explode" (want stop, dead_letter or skip)` {
		t.Fatalf("err = %v", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("files written: %v", names)
	}
}

// A GET (configjson.SinkJSON) then POST (CreateSink) gives back the same config.
func TestSinkJSONCreateRoundTrip(t *testing.T) {
	jsonCreateRoundTrip(t, "../configjson/testdata/full_sink.toml", config.ParseSinkFile,
		func(s *config.Sink) any { return configjson.SinkJSON(s) }, (*Local).CreateSink,
		func(s *config.Sink) *config.Common { return &s.Common })
}

func TestSourceJSONCreateRoundTrip(t *testing.T) {
	jsonCreateRoundTrip(t, "../configjson/testdata/full_source.toml", config.ParseSourceFile,
		func(s *config.Source) any { return configjson.SourceJSON(s) }, (*Local).CreateSource,
		func(s *config.Source) *config.Common { return &s.Common })
}

// jsonCreateRoundTrip parses the connector file, marshals its JSON form (the API's GET) and
// creates a connector from that body (the API's POST): the result must be the parsed config
// but for the file it was written to and its version.
func jsonCreateRoundTrip[C any](t *testing.T, src string, parse func(string, []string) (*C, error), form func(*C) any,
	create func(*Local, string, []byte) (*C, error), common func(*C) *config.Common) {
	t.Helper()
	orig, err := parse(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(form(orig))
	if err != nil {
		t.Fatal(err)
	}
	got, err := create(&Local{Dir: t.TempDir()}, common(orig).Key, body)
	if err != nil {
		t.Fatal(err)
	}
	want := *orig
	w := common(&want)
	w.File, w.Version = common(got).File, 0
	w.PluginKeys = common(got).PluginKeys // lines in the file written, not the one read
	// A JSON body's transforms are an object, whose order the body cannot keep: they come
	// back in type order (docs/iggy-compatibility.md, "Differences from Iggy's runtime").
	w.Transforms = slices.Clone(w.Transforms)
	slices.SortFunc(w.Transforms, func(a, b config.Transform) int { return strings.Compare(a.Type, b.Type) })
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("got  %#v\nwant %#v", got, &want)
	}
}

// The runtime re-reads restarted connectors through this interface (connect.ConfigSource).
var _ interface {
	ActiveSink(key string) (*config.Sink, error)
	ActiveSource(key string) (*config.Source, error)
} = (*Local)(nil)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sinkFile is a minimal sink connector file of key, version and name.
func sinkFile(key string, version int, name string) string {
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = %d
name = %q
path = "builtin:stdout"

[[streams]]
stream = "s1"
topics = ["a", "b"]
schema = "json"
`, key, version, name)
}

// wantErr checks that err is a *config.Error with exactly file, line and key.
func wantErr(t *testing.T, err error, file string, line int, key, env string) *config.Error {
	t.Helper()
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not *config.Error", err, err)
	}
	if ce.File != file || ce.Line != line || ce.Key != key || ce.Env != env {
		t.Fatalf("error %q: got file=%q line=%d key=%q env=%q; want file=%q line=%d key=%q env=%q",
			ce.Error(), ce.File, ce.Line, ce.Key, ce.Env, file, line, key, env)
	}
	return ce
}
