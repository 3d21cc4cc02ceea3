package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
)

const minimalSink = `type = "sink"
key = "audit"
enabled = true
version = 2
name = "Audit"
path = "builtin:stdout"

[[streams]]
stream = "s1"
topics = ["a", "b"]
schema = "json"
`

func TestSinkDefaults(t *testing.T) {
	p := writeFile(t, t.TempDir(), "audit.toml", minimalSink)
	s, err := ParseSinkFile(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Sink{
		Common: Common{File: p, Key: "audit", Enabled: true, Version: 2, Name: "Audit", Path: "builtin:stdout", PluginConfig: []byte("null"),
			Restart: RestartPolicy{MaxRestarts: 60, InitialBackoff: time.Second, MaxBackoff: 5 * time.Second}},
		Streams: []SinkStream{{Stream: "s1", Topics: []string{"a", "b"}, Schema: sdk.SchemaJSON, BatchLength: 1000,
			PollInterval: 5 * time.Millisecond, ConsumerGroup: "iggy-connect-sink-audit"}},
		OffsetCommit:    CommitAfterPolling,
		Retry:           Retry{MaxRetries: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second},
		OnFailure:       FailureStop,
		Commit:          CommitSettings{Interval: time.Second, Delay: 10 * time.Millisecond, MaxUncommitted: 100000},
		ShutdownTimeout: 10 * time.Second, MaxInFlight: 0, OffsetCommitUnset: true,
	}
	s.PluginKeys = nil // where plugin_config's keys are: TestPluginConfigErrorNamesTheLine
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got  %#v\nwant %#v", s, want)
	}
	if name, ok := s.Builtin(); !ok || name != "stdout" {
		t.Fatalf("Builtin() = %q, %v", name, ok)
	}
}

func TestSinkFullFile(t *testing.T) {
	p := writeFile(t, t.TempDir(), "full.toml", `offset_commit = "sink_controlled"
on_failure = "dead_letter"
shutdown_timeout = "2 s"
verbose = true
plugin_config_format = "json"
`+minimalSink+`batch_length = 50
poll_interval = "1m 30s"
consumer_group = "g"

[retry]
max_retries = 0
initial_backoff = "10ms"
max_backoff = "1s"

[dead_letter]
stream = "dlq"
topic = "failed"

[commit]
interval = "250ms"
delay = "20ms"
max_uncommitted = 7

[plugin_config]
zeta = 1
alpha = { nested = [1, 2.5, "x<y"], b = true }

[transforms.delete_fields]
enabled = true
fields = ["password"]
[transforms.add_fields]
enabled = false
`)
	s, err := ParseSinkFile(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Streams[0].BatchLength != 50 || s.Streams[0].PollInterval != 90*time.Second || s.Streams[0].ConsumerGroup != "g" ||
		s.OffsetCommit != CommitSinkControlled || s.OnFailure != FailureDeadLetter || s.ShutdownTimeout != 2*time.Second ||
		s.Retry != (Retry{0, 10 * time.Millisecond, time.Second}) || s.DeadLetter != (DeadLetter{"dlq", "failed"}) ||
		s.Commit != (CommitSettings{250 * time.Millisecond, 20 * time.Millisecond, 7, true}) || !s.Verbose || s.PluginConfigFormat != "json" {
		t.Fatalf("unexpected %#v", s)
	}
	if got := string(s.PluginConfig); got != `{"alpha":{"b":true,"nested":[1,2.5,"x<y"]},"zeta":1}` {
		t.Fatalf("plugin_config = %s", got)
	}
	// File order: delete_fields is written first.
	if len(s.Transforms) != 2 || s.Transforms[0].Type != "delete_fields" || !s.Transforms[0].Enabled ||
		s.Transforms[1].Type != "add_fields" || s.Transforms[1].Enabled {
		t.Fatalf("transforms = %+v", s.Transforms)
	}
}

func TestOffsetCommitAuto(t *testing.T) {
	p := writeFile(t, t.TempDir(), "a.toml", strings.Replace(minimalSink, "[[streams]]", "offset_commit = \"auto\"\n[[streams]]", 1))
	s, err := ParseSinkFile(p, nil)
	if err != nil || s.OffsetCommit != CommitAfterPolling {
		t.Fatalf("%v %v", s, err)
	}
}

func TestSourceDefaults(t *testing.T) {
	p := writeFile(t, t.TempDir(), "src.toml", `type = "source"
key = "rnd"
enabled = false
version = 0
name = "Random"
path = "builtin:random"
[plugin_config]
count = 10
[[streams]]
stream = "s"
topic = "t"
schema = "raw"
`)
	s, err := ParseSourceFile(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Source{
		Common: Common{File: p, Key: "rnd", Name: "Random", Path: "builtin:random", PluginConfig: []byte(`{"count":10}`),
			Restart: RestartPolicy{MaxRestarts: 60, InitialBackoff: time.Second, MaxBackoff: 5 * time.Second}},
		Streams:     []SourceStream{{Stream: "s", Topic: "t", Schema: sdk.SchemaRaw, BatchLength: 1000, LingerTime: 5 * time.Millisecond}},
		OnFailure:   FailureStop,
		Retry:       Retry{MaxRetries: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second},
		MaxInFlight: 0,
	}
	if got := s.PluginKeys["count"]; got.Line != 8 || s.PluginKeys[""].Line != 7 {
		t.Fatalf("plugin_config keys at %+v", s.PluginKeys)
	}
	s.PluginKeys = nil
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got  %#v\nwant %#v", s, want)
	}
	if _, err := ParseSinkFile(p, nil); err == nil {
		t.Fatal("ParseSinkFile accepted a source")
	}
}

func TestSinkEnvOverrides(t *testing.T) {
	p := writeFile(t, t.TempDir(), "audit.toml", minimalSink+"[plugin_config]\nkeep = \"x\"\n")
	env := []string{
		"IGGY_CONNECTORS_SINK_AUDIT_ENABLED=false",
		"IGGY_CONNECTORS_SINK_AUDIT_NAME=12345", // numeric text for a string field stays text
		"IGGY_CONNECTORS_SINK_AUDIT_OFFSET_COMMIT=after_consuming",
		"IGGY_CONNECTORS_SINK_AUDIT_RETRY_MAX_RETRIES=9",
		"IGGY_CONNECTORS_SINK_AUDIT_COMMIT_INTERVAL=3s",
		"IGGY_CONNECTORS_SINK_AUDIT_PLUGIN_CONFIG_PASSWORD=1234",
		"IGGY_CONNECTORS_SINK_AUDIT_PLUGIN_CONFIG_HOSTS=[a, \"b\", 3]",
		"iggy_connectors_sink_audit_plugin_config_Flag=TRUE",
		"IGGY_CONNECTORS_SINK_AUDIT_PLUGIN_CONFIG_FORMAT=yaml",
		"IGGY_CONNECTORS_SINK_AUDIT_NOPE=1",
		"IGGY_CONNECTORS_SINK_OTHER_NAME=x",
	}
	s, err := ParseSinkFile(p, env)
	if err != nil {
		t.Fatal(err)
	}
	if s.Enabled || s.Name != "12345" || s.OffsetCommit != CommitAfterConsuming || s.Retry.MaxRetries != 9 ||
		s.Commit.Interval != 3*time.Second || s.PluginConfigFormat != "yaml" {
		t.Fatalf("unexpected %#v", s)
	}
	if got := string(s.PluginConfig); got != `{"flag":true,"hosts":["a","b",3],"keep":"x","password":1234}` {
		t.Fatalf("plugin_config = %s", got)
	}
	if len(s.Streams) != 1 || s.Streams[0].Stream != "s1" {
		t.Fatalf("streams changed without STREAMS_ variables: %+v", s.Streams)
	}
	if !reflect.DeepEqual(s.Warnings, []string{"unknown environment variable IGGY_CONNECTORS_SINK_AUDIT_NOPE ignored"}) {
		t.Fatalf("warnings = %q", s.Warnings)
	}
	if strings.Contains(s.String(), "1234") || !strings.Contains(s.String(), `"password":"***"`) {
		t.Fatalf("String() = %s", s.String())
	}
}

func TestSinkEnvStreamsReplaceWhole(t *testing.T) {
	p := writeFile(t, t.TempDir(), "audit.toml", minimalSink+"[[streams]]\nstream = \"s2\"\ntopics = [\"c\"]\nschema = \"text\"\n")
	env := []string{
		"IGGY_CONNECTORS_SINK_AUDIT_STREAMS_0_STREAM=env_stream",
		"IGGY_CONNECTORS_SINK_AUDIT_STREAMS_0_TOPICS=[t1, t2]",
		"IGGY_CONNECTORS_SINK_AUDIT_STREAMS_0_SCHEMA=raw",
		"IGGY_CONNECTORS_SINK_AUDIT_STREAMS_0_BATCH_LENGTH=7",
		"IGGY_CONNECTORS_SINK_AUDIT_STREAMS_0_POLL_INTERVAL=1 s",
	}
	s, err := ParseSinkFile(p, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []SinkStream{{Stream: "env_stream", Topics: []string{"t1", "t2"}, Schema: sdk.SchemaRaw, BatchLength: 7,
		PollInterval: time.Second, ConsumerGroup: "iggy-connect-sink-audit"}}
	if !reflect.DeepEqual(s.Streams, want) {
		t.Fatalf("streams = %+v", s.Streams)
	}
	// Setting one field replaces the file's streams: the other required fields are missing.
	_, err = ParseSinkFile(p, []string{"IGGY_CONNECTORS_SINK_AUDIT_STREAMS_1_BATCH_LENGTH=5"})
	ce := wantErr(t, err, p, 0, "streams[0].stream", "IGGY_CONNECTORS_SINK_AUDIT_STREAMS_*")
	if ce.Msg != "required key missing" {
		t.Fatalf("msg %q", ce.Msg)
	}
}

func TestSourceEnvOverrides(t *testing.T) {
	p := writeFile(t, t.TempDir(), "src.toml", "type = \"source\"\nkey = \"rnd\"\nenabled = true\nversion = 1\nname = \"R\"\npath = \"builtin:random\"\n")
	s, err := ParseSourceFile(p, []string{
		"IGGY_CONNECTORS_SOURCE_RND_STREAMS_0_STREAM=s", "IGGY_CONNECTORS_SOURCE_RND_STREAMS_0_TOPIC=t",
		"IGGY_CONNECTORS_SOURCE_RND_STREAMS_0_SCHEMA=text", "IGGY_CONNECTORS_SOURCE_RND_STREAMS_0_LINGER_TIME=20ms",
		"IGGY_CONNECTORS_SOURCE_RND_PLUGIN_CONFIG_COUNT=5",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Streams, []SourceStream{{Stream: "s", Topic: "t", Schema: sdk.SchemaText, BatchLength: 1000, LingerTime: 20 * time.Millisecond}}) ||
		string(s.PluginConfig) != `{"count":5}` {
		t.Fatalf("%+v %s", s.Streams, s.PluginConfig)
	}
}

func TestConnectorErrors(t *testing.T) {
	const hdr = "type = \"sink\"\nkey = \"k\"\nenabled = true\nversion = 1\nname = \"n\"\npath = \"builtin:null\"\n"
	const st = "[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"json\"\n" // lines 7-10 after hdr
	for _, tc := range []struct {
		name, body string
		env        []string
		line       int
		key, envv  string
		msg        string
	}{
		{name: "missing type", body: "key = \"k\"\n", line: 1, key: "type", msg: "required (sink or source)"},
		{name: "bad type", body: "type = \"pipe\"\nkey = \"k\"\n", line: 1, key: "type", msg: `unknown value "pipe" (want sink or source)`},
		{name: "missing key", body: "type = \"sink\"\n", line: 1, key: "key", msg: "required"},
		{name: "missing enabled", body: "type = \"sink\"\nkey = \"k\"\nversion = 1\nname = \"n\"\npath = \"p\"\n", line: 1, key: "enabled", msg: "required key missing"},
		{name: "unknown top key", body: hdr + "colour = 1\n" + st, line: 7, key: "colour", msg: "unknown key"},
		{name: "unknown stream key", body: hdr + st + "[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"json\"\nbatch_lenght = 5\n", line: 15, key: "streams[1].batch_lenght", msg: "unknown key"},
		{name: "wrong type", body: hdr + st + "batch_length = \"big\"\n", line: 11, key: "streams[0].batch_length", msg: "expected an integer, got string"},
		{name: "wrong type second stream", body: hdr + st + "[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"json\"\nbatch_length = -1\n", line: 15, key: "streams[1].batch_length"},
		{name: "missing stream field", body: hdr + st + "\n[[streams]]\nstream = \"s2\"\nschema = \"json\"\n", line: 12, key: "streams[1].topics", msg: "required key missing"},
		{name: "inline streams wrong type", body: hdr + "streams = [{stream = \"s\", topics = [\"t\"], schema = \"json\"}, {stream = 5}]\n", line: 7, key: "streams"},
		{name: "bad schema", body: hdr + "[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"xml\"\n", line: 10, key: "streams[0].schema",
			msg: `unknown schema "xml" (want json, raw, text, proto, flat_buffer or avro)`},
		{name: "bad duration", body: hdr + st + "poll_interval = \"5\"\n", line: 11, key: "streams[0].poll_interval"},
		{name: "zero batch", body: hdr + st + "batch_length = 0\n", line: 11, key: "streams[0].batch_length", msg: "must be at least 1"},
		{name: "bad offset_commit", body: hdr + "offset_commit = \"sometimes\"\n" + st, line: 7, key: "offset_commit",
			msg: `unknown value "sometimes" (want after_polling, auto, after_consuming or sink_controlled)`},
		{name: "bad on_failure", body: hdr + "on_failure = \"retry\"\n" + st, line: 7, key: "on_failure", msg: `unknown value "retry" (want stop, dead_letter or skip)`},
		{name: "dead_letter without table", body: hdr + "on_failure = \"dead_letter\"\n" + st, line: 7, key: "dead_letter.stream",
			msg: `required when on_failure = "dead_letter"`},
		{name: "dead_letter without topic", body: hdr + "on_failure = \"dead_letter\"\n" + st + "[dead_letter]\nstream = \"d\"\n", line: 12, key: "dead_letter.topic"},
		{name: "backoff order", body: hdr + st + "[retry]\ninitial_backoff = \"2s\"\nmax_backoff = \"1s\"\n", line: 13, key: "retry.max_backoff"},
		{name: "bad plugin_config_format", body: hdr + "plugin_config_format = \"xml\"\n" + st, line: 7, key: "plugin_config_format"},
		{name: "unknown transform", body: hdr + st + "[transforms.explode]\nenabled = true\n", line: 11, key: "transforms.explode"},
		{name: "transform without enabled", body: hdr + st + "[transforms.delete_fields]\nfields = [\"a\"]\n", line: 11, key: "transforms.delete_fields.enabled", msg: "required key missing"},
		{name: "transform field missing", body: hdr + st + "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"a\" }]\n", line: 13,
			key: "transforms.add_fields.fields[0].value", msg: "required key missing (want value.static or value.computed)"},
		{name: "transform unknown key", body: hdr + st + "[transforms.unwrap_envelope]\nenabled = true\nfield = \"p\"\nfeild = 1\n", line: 14,
			key: "transforms.unwrap_envelope.feild", msg: "unknown key"},
		{name: "offset_commit in a source", body: "type = \"source\"\nkey = \"k\"\nenabled = true\nversion = 1\nname = \"n\"\npath = \"p\"\noffset_commit = \"auto\"\n", line: 7, key: "offset_commit", msg: "unknown key"},
		{name: "empty builtin", body: strings.Replace(hdr, "builtin:null", "builtin:", 1) + st, line: 6, key: "path"},
		{name: "env wrong type", body: hdr + st, env: []string{"IGGY_CONNECTORS_SINK_K_VERSION=two"}, key: "version", envv: "IGGY_CONNECTORS_SINK_K_VERSION",
			msg: `want an unsigned integer of 64 bits, got "two"`},
		{name: "env bad enum", body: hdr + st, env: []string{"IGGY_CONNECTORS_SINK_K_ON_FAILURE=explode"}, key: "on_failure", envv: "IGGY_CONNECTORS_SINK_K_ON_FAILURE"},
		{name: "env topics syntax", body: hdr + st, env: []string{"IGGY_CONNECTORS_SINK_K_STREAMS_0_TOPICS=t"}, key: "streams[0].topics", envv: "IGGY_CONNECTORS_SINK_K_STREAMS_0_TOPICS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "c.toml", tc.body)
			_, err := ParseSinkFile(p, tc.env)
			if tc.name == "offset_commit in a source" {
				_, err = ParseSourceFile(p, tc.env)
			}
			ce := wantErr(t, err, p, tc.line, tc.key, tc.envv)
			if tc.msg != "" && ce.Msg != tc.msg {
				t.Errorf("msg = %q, want %q", ce.Msg, tc.msg)
			}
		})
	}
}

func sinkFile(key string, version int, name string) string {
	return strings.NewReplacer("audit", key, "version = 2", "version = "+strconv.Itoa(version), "Audit", name).Replace(minimalSink)
}

func TestLoadConnectorsDiscovery(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a_v1.toml", sinkFile("a", 1, "A1"))
	writeFile(t, dir, "a_v3.toml", sinkFile("a", 3, "A3"))
	writeFile(t, dir, "a_v2.toml", sinkFile("a", 2, "A2"))
	writeFile(t, dir, "b.toml", sinkFile("b", 1, "B"))
	writeFile(t, dir, "c.toml", sinkFile("c", 4, "C"))
	writeFile(t, dir, ".hidden.toml", "garbage")
	writeFile(t, dir, "Cargo.toml", "garbage")
	writeFile(t, dir, "CARGO.toml", "garbage")
	writeFile(t, dir, "notes.TOML", "garbage")
	writeFile(t, dir, "readme.md", "garbage")
	if err := os.Mkdir(filepath.Join(dir, "sub.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub.toml"), "deep.toml", "garbage")
	if err := os.Symlink(filepath.Join(dir, "a_v1.toml"), filepath.Join(dir, "link.toml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "src.toml", "type = \"source\"\nkey = \"r\"\nenabled = true\nversion = 0\nname = \"R\"\npath = \"builtin:random\"\n")
	writeFile(t, dir, ActiveVersionsFile, "[sinks]\na = 2\nc = 9\n[sources]\n")

	c, err := LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.Sinks {
		got = append(got, s.Key+":"+s.Name)
	}
	if want := []string{"a:A2", "b:B"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sinks = %v, want %v", got, want)
	}
	if len(c.Sources) != 1 || c.Source("r") == nil || c.Sink("a").Version != 2 {
		t.Fatalf("sources = %+v", c.Sources)
	}
	if !reflect.DeepEqual(c.Warnings, []string{"sink c not loaded: active version 9 has no config file"}) {
		t.Fatalf("warnings = %q", c.Warnings)
	}

	// Without pins the highest version wins; a broken .active_versions.toml is ignored with a warning.
	writeFile(t, dir, ActiveVersionsFile, "[sinks\n")
	c, err = LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sink("a").Name != "A3" || c.Sink("c") == nil || len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], ".active_versions.toml ignored") {
		t.Fatalf("sinks %v warnings %q", c.Sinks, c.Warnings)
	}
}

func TestLoadConnectorsErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.toml", minimalSink)
	bad := writeFile(t, dir, "b.toml", strings.Replace(minimalSink, `key = "audit"`, `key = "b"`, 1)+"batch_length = true\n")
	c, err := LoadConnectors(dir, nil)
	if err != nil || len(c.Sinks) != 1 || c.Sinks[0].Key != "audit" || len(c.Invalid) != 1 {
		t.Fatalf("LoadConnectors = %+v, %v; want sink audit and one invalid", c, err)
	}
	if inv := c.Invalid[0]; inv.Type != TypeSink || inv.Key != "b" || inv.File != bad || !inv.Enabled {
		t.Fatalf("invalid = %+v", inv)
	}
	wantErr(t, c.Invalid[0].Err, bad, 12, "streams[0].batch_length", "")
	// A file that cannot be told apart (a TOML syntax error) fails the whole load.
	syntax := writeFile(t, dir, "c.toml", "type = \"sink\"\nkey = [\n")
	_, err = LoadConnectors(dir, nil)
	wantErr(t, err, syntax, 2, "", "")

	// A missing config_dir is an error, and loading does not create it; EnsureConfigDir does.
	missing := filepath.Join(t.TempDir(), "new")
	_, err = LoadConnectors(missing, nil)
	if !errors.Is(err, ErrConfigDirMissing) || err.Error() != "connectors.config_dir "+missing+": does not exist" {
		t.Fatalf("missing dir: err = %v", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("LoadConnectors created the missing dir: %v", err)
	}
	if err := EnsureConfigDir(missing); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConnectors(missing, nil); err != nil || len(c.Sinks)+len(c.Sources) != 0 {
		t.Fatalf("created dir: %v %+v", err, c)
	}
}

// Two files defining the same (type, key, version) fail the load, naming both files.
func TestLoadConnectorsDuplicateKey(t *testing.T) {
	dir := t.TempDir()
	first := writeFile(t, dir, "b.toml", sinkFile("b", 1, "B"))
	second := writeFile(t, dir, "b_copy.toml", sinkFile("b", 1, "B again"))
	c, err := LoadConnectors(dir, nil)
	want := second + ": key: sink \"b\" version 1 is also defined in " + first + "; remove one of the two files or change its version"
	if err != nil || len(c.Sinks) != 0 || len(c.Invalid) != 1 || c.Invalid[0].Key != "b" || c.Invalid[0].Err.Error() != want {
		t.Fatalf("LoadConnectors = %+v, %v\nwant sink b invalid: %s", c, err, want)
	}
	// Another version of the same key is how versions are kept: no error.
	writeFile(t, dir, "b_copy.toml", sinkFile("b", 2, "B2"))
	if c, err := LoadConnectors(dir, nil); err != nil || c.Sink("b").Name != "B2" {
		t.Fatalf("two versions: %v", err)
	}
}

func TestResolvePluginPath(t *testing.T) {
	dir := t.TempDir()
	lib := writeFile(t, dir, "libx.so", "")
	other := t.TempDir()
	writeFile(t, other, "liby.so", "")
	for _, tc := range []struct {
		path, want string
	}{
		{lib, lib},
		{strings.TrimSuffix(lib, ".so"), lib},
		{"plugins/liby", filepath.Join(other, "liby.so")},
		{"liby.so", filepath.Join(other, "liby.so")},
	} {
		got, err := ResolvePluginPath(tc.path, []string{dir + "/nope", other})
		if err != nil || got != tc.want {
			t.Errorf("ResolvePluginPath(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	_, err := ResolvePluginPath("plugins/libz", []string{"/d1", "/d2"})
	if !errors.Is(err, ErrPluginNotFound) || err.Error() != `Plugin library not found: plugins/libz.so (from path "plugins/libz") not found relative to the working directory, nor as libz.so in: /d1, /d2` {
		t.Fatalf("err = %v", err)
	}
	if _, err := ResolvePluginPath("/abs/libz.dylib", nil); !errors.Is(err, ErrPluginNotFound) {
		t.Fatalf("abs err = %v", err)
	}
}

func TestValidateHandBuilt(t *testing.T) {
	s := &Sink{Common: Common{File: "api", Key: "k", Name: "n", Path: "builtin:null", PluginConfig: []byte("null")},
		OffsetCommit: CommitAfterPolling, OnFailure: FailureSkip, Retry: Retry{3, time.Millisecond, time.Second},
		Commit: CommitSettings{Interval: time.Second, Delay: time.Millisecond, MaxUncommitted: 1}, ShutdownTimeout: time.Second}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := s.Commit.StoreDelay(); d != time.Millisecond {
		t.Fatalf("StoreDelay = %v, want the delay 1ms", d)
	}
	s.Commit.Interval = 500 * time.Microsecond
	if d := s.Commit.StoreDelay(); d != 500*time.Microsecond {
		t.Fatalf("StoreDelay = %v, want the interval 500µs (the upper bound)", d)
	}
	s.Commit.Delay = 0
	wantErr(t, s.Validate(), "api", 0, "commit.delay", "")
	s.Commit.Delay = time.Millisecond
	s.OffsetCommit = "weekly"
	wantErr(t, s.Validate(), "api", 0, "offset_commit", "")
}

// TestLoadConnectorsIsolates: a mistake inside a file that names its connector is that
// connector's (Invalid, with upstream's words for the durations its users match on); an
// invalid file of a version that is not active is a warning; the others load.
func TestLoadConnectorsIsolates(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "ok.toml", minimalSink)
	sink := writeFile(t, dir, "bad_sink.toml", strings.Replace(minimalSink, `key = "audit"`, `key = "bad"`, 1)+"poll_interval = \"not-a-valid-duration\"\n")
	src := writeFile(t, dir, "bad_src.toml", "type = \"source\"\nkey = \"gen\"\nenabled = false\nversion = 0\nname = \"g\"\npath = \"builtin:random\"\n\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"json\"\nlinger_time = \"soon\"\n")
	old := writeFile(t, dir, "audit_v1.toml", strings.Replace(minimalSink, "version = 2", "version = 1", 1)+"bogus = 1\n")
	c, err := LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sinks) != 1 || c.Sinks[0].Key != "audit" || c.Sinks[0].Version != 2 || len(c.Invalid) != 2 {
		t.Fatalf("sinks %+v invalid %+v", c.Sinks, c.Invalid)
	}
	if got, want := c.Invalid[0].Err.Error(), sink+`:12: streams[0].poll_interval: Invalid poll interval: invalid duration "not-a-valid-duration": expected a number at "not-a-valid-duration"`; got != want {
		t.Fatalf("sink error %q\nwant %q", got, want)
	}
	if got, want := c.Invalid[1].Err.Error(), src+`:12: streams[0].linger_time: Invalid linger time: invalid duration "soon": expected a number at "soon"`; got != want || c.Invalid[1].Enabled || c.Invalid[1].Type != TypeSource {
		t.Fatalf("source %+v error %q\nwant %q", c.Invalid[1], got, want)
	}
	want := "sink audit version 1 ignored (not the active version): " + old + ":12: streams[0].bogus: unknown key"
	if !slices.Contains(c.Warnings, want) {
		t.Fatalf("warnings %q lack %q", c.Warnings, want)
	}
}

// TestSourceMaxInFlight: a source's max_in_flight is read (default 1) and 0 or more than
// MaxMaxInFlight is refused naming the field.
func TestSourceMaxInFlight(t *testing.T) {
	base := `type = "source"
key = "rnd"
enabled = true
version = 0
name = "Random"
path = "builtin:random"
%s
[[streams]]
stream = "s"
topic = "t"
schema = "raw"
`
	for _, c := range []struct {
		line    string
		want    uint32
		wantErr string
	}{
		{"", 0, ""}, // unset: the runtime chooses (sdk.DefaultMaxInFlight or 1)
		{"max_in_flight = 4", 4, ""},
		{"max_in_flight = 0", 0, "max_in_flight: must be between 1 and 1024"},
		{"max_in_flight = 1025", 0, "max_in_flight: must be between 1 and 1024"},
	} {
		p := writeFile(t, t.TempDir(), "src.toml", fmt.Sprintf(base, c.line))
		s, err := ParseSourceFile(p, nil)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), p) {
				t.Fatalf("%q: error %v, want one naming %s and %q", c.line, err, p, c.wantErr)
			}
		case err != nil:
			t.Fatalf("%q: %v", c.line, err)
		case s.MaxInFlight != c.want:
			t.Fatalf("%q: MaxInFlight %d, want %d", c.line, s.MaxInFlight, c.want)
		}
	}
}

// TestPluginConfigErrorNamesTheLine: a plugin_config problem the sdk finds names the file,
// the key and its line; a missing key the line of the table that should hold it; a key set
// by the environment the variable.
func TestPluginConfigErrorNamesTheLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.toml")
	body := `type = "sink"
key = "s"
enabled = true
version = 0
name = "s"
path = "builtin:x"

[[streams]]
stream = "a"
topics = ["b"]
schema = "json"

[plugin_config]
bucket = "x"

[[plugin_config.columns]]
name = "c"

[[plugin_config.columns]]
type = "date"
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ParseSinkFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := errors.Join(&sdk.FieldError{Field: "bucket", Msg: "bad"}, &sdk.FieldError{Field: "columns[1].type", Msg: "unknown type"},
		&sdk.FieldError{Field: "columns[1].name", Msg: "required field is missing"}, &sdk.FieldError{Field: "region", Msg: "required field is missing"},
		errors.New("plugin_config: want a table"))
	want := path + ":14: plugin_config.bucket: bad\n" +
		path + ":20: plugin_config.columns[1].type: unknown type\n" +
		path + ":19: plugin_config.columns[1].name: required field is missing\n" +
		path + ":13: plugin_config.region: required field is missing\n" +
		path + ":13: plugin_config: want a table"
	if got := s.PluginConfigError(errs).Error(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if s.PluginConfigError(nil) != nil {
		t.Fatal("nil")
	}
	// A permanent problem (sdk.Permanent wraps its cause and ErrPermanent) is one problem in
	// its cause's words, not "permanent error" and the cause on a line of its own.
	perm := errors.Join(sdk.Permanent(errors.New("the server refused the credentials")), sdk.Permanent(&sdk.FieldError{Field: "bucket", Msg: "no such bucket"}))
	want = path + ":13: plugin_config: the server refused the credentials\n" + path + ":14: plugin_config.bucket: no such bucket"
	if got := s.PluginConfigError(perm).Error(); got != want {
		t.Fatalf("permanent: got\n%s\nwant\n%s", got, want)
	}
}
