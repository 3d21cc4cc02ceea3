package connect

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestUpstreamTransformsInFileSink: an upstream-style connector file (Iggy's example shape:
// [[streams]] with schema json, [plugin_config], [transforms.add_fields] and
// [transforms.delete_fields]) run by the runtime over the embedded server into the
// built-in file sink: every record's payload is the transformed JSON, byte for byte.
func TestUpstreamTransformsInFileSink(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("example_stream", "example_topic", 1)
	env.Fill("example_stream", "example_topic", 0, 3, func(i int) []byte {
		return fmt.Appendf(nil, `{"id": %d, "password": "secret", "text": "a<b>"}`, i)
	})
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := filepath.Join(dir, "file_sink.toml")
	doc := fmt.Sprintf(`type = "sink"
key = "file"
enabled = true
version = 0
name = "File sink"
path = "builtin:file"
offset_commit = "after_consuming"

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "file_sink_connector"

[plugin_config]
path = %q

[transforms.add_fields]
enabled = true

[[transforms.add_fields.fields]]
key = "message"
value.static = "hello"

[[transforms.add_fields.fields]]
key = "password"
value.static = "again"

[transforms.delete_fields]
enabled = true
fields = ["password"]
`, out)
	rt := startSinkFile(t, env, file, doc)
	testkit.WaitFor(t, "stored 2", func() bool {
		o, ok := env.Stored("file_sink_connector", "example_stream", "example_topic", 0)
		return ok && o == 2
	})
	stopRuntime(t, rt)
	got := fileRecords(t, out)
	// add_fields runs first (file order): password is set, then deleted.
	want := []string{
		`0 {"id":0,"text":"a<b>","message":"hello"}`,
		`1 {"id":1,"text":"a<b>","message":"hello"}`,
		`2 {"id":2,"text":"a<b>","message":"hello"}`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("file holds\n%q\nwant\n%q", got, want)
	}
}

// TestAvroConvertInFileSink: an upstream-style connector file with [transforms.avro_convert]
// (json → avro, inline schema) run by the runtime over the embedded server into the file
// sink: each record holds the Avro datum (base64, the file sink's form for bytes that are
// not JSON); the message the schema refuses is poison, skipped by on_failure, and the
// stored offset moves past it (after_consuming: stored once the sink has written).
func TestAvroConvertInFileSink(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("users", "events", 1)
	payloads := []string{`{"name":"Bob","age":25}`, `{"name":"Bob"}`, `{"age":30,"name":"Alice"}`}
	env.Fill("users", "events", 0, len(payloads), func(i int) []byte { return []byte(payloads[i]) })
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := filepath.Join(dir, "avro_sink.toml")
	doc := fmt.Sprintf(`type = "sink"
key = "avro_file"
enabled = true
version = 0
name = "Avro file sink"
path = "builtin:file"
on_failure = "skip"
offset_commit = "after_consuming"

[[streams]]
stream = "users"
topics = ["events"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "avro_file"

[plugin_config]
path = %q

[transforms.avro_convert]
enabled = true
source_format = "json"
target_format = "avro"
schema_json = '{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}'
conversion_options = { pretty_json = false, include_metadata = false, strict_mode = false }
`, out)
	rt := startSinkFile(t, env, file, doc)
	testkit.WaitFor(t, "stored 2", func() bool {
		o, ok := env.Stored("avro_file", "users", "events", 0)
		return ok && o == 2
	})
	stopRuntime(t, rt)
	got := fileRecords(t, out)
	// 06 "Bob" 32 (25) and 0a "Alice" 3c (30), base64.
	want := []string{`0 "BkJvYjI="`, `2 "CkFsaWNlPA=="`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("file holds\n%q\nwant\n%q", got, want)
	}
}

// startSinkFile writes doc to file, parses it as a connector file, as `ferry run` would, and
// starts a runtime with that sink against env's server.
func startSinkFile(t *testing.T, env *iggyEnv, file, doc string) *Runtime {
	t.Helper()
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseSinkFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := New(Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: env.Dial(), Builtins: connectors.Registry(), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

// fileRecords reads the file sink's output: one "offset payload" string per record.
func fileRecords(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Offset  uint64          `json:"offset"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("record %q: %v", sc.Bytes(), err)
		}
		got = append(got, fmt.Sprintf("%d %s", rec.Offset, rec.Payload))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
