package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

// nullSinkFile is a null sink of s1/t1 with key and batch_length.
func nullSinkFile(key string, batch int) string {
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "null %s"
path = "builtin:null"

[[streams]]
stream = "s1"
topics = ["t1"]
schema = "text"
batch_length = %d
poll_interval = "5ms"
`, key, key, batch)
}

// fileSinkFile is a file sink of s1/t1 writing to path, storing its offsets after each
// batch.
func fileSinkFile(path string) string {
	return fmt.Sprintf(`type = "sink"
key = "out"
enabled = true
version = 0
name = "file out"
path = "builtin:file"
offset_commit = "after_consuming"

[[streams]]
stream = "s1"
topics = ["t1"]
schema = "text"
batch_length = 100
poll_interval = "5ms"

[plugin_config]
path = %q
flush_interval = "10ms"
`, path)
}

// reloadEnv starts a real runtime over a real embedded server with the connector files
// of files in a fresh config_dir, and serves the API over it; it waits for want running
// connectors.
func reloadEnv(t *testing.T, files map[string]string, want int) (*env, *api) {
	t.Helper()
	kit := iggykit.Start(t)
	admin := kit.Admin
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.EnsureTopic(ctx, "s1", "t1", 1); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, body := range files {
		writeConnector(t, dir, name, body)
	}
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	provider := &provider.Local{Dir: dir}
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	rt := runkit.Start(t, connect.Options{Connectors: conns, Runtime: rc, Client: kit.Dial(),
		Builtins: connectors.Registry(), Configs: provider})
	e := &env{t: t, admin: admin, rt: rt, dir: dir, configs: provider}
	testkit.WaitFor(t, "every connector running", func() bool {
		sts := rt.Status()
		for _, st := range sts {
			if st.State != connect.StateRunning {
				return false
			}
		}
		return len(sts) == want
	})
	return e, e.serve(nil)
}

func writeConnector(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fileLines counts the complete lines of a file sink's output (0 when it does not exist).
func fileLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte{'\n'})
}

// fileOffsets returns the offsets of the records of a file sink's output, in order.
func fileOffsets(t *testing.T, path string) []uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte{'\n'}) {
		var r struct{ Offset uint64 }
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		out = append(out, r.Offset)
	}
	return out
}

func seqOffsets(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

// reloadAnswer decodes POST /reload's 200 answer.
func (a *api) reloadAnswer() reloadJSON {
	a.t.Helper()
	r := a.do("POST", "/reload", "").want(a.t, http.StatusOK)
	var out reloadJSON
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.DisallowUnknownFields()
	if err := d.Decode(&out); err != nil {
		a.t.Fatalf("reload answer %s: %v", r.body, err)
	}
	return out
}

// TestReload: POST /reload applies the edited config_dir to the running runtime without
// a process restart. Before the reload: sinks keep, out (a file sink writing to a.jsonl),
// gone and broken, 10 messages delivered to each. Then out.toml writes to b.jsonl,
// gone.toml is deleted, new.toml is added and broken.toml no longer parses. Asserts: the
// answer lists exactly started [sink new], restarted [sink out], stopped [sink gone],
// unchanged [sink keep], refused broken.toml with its error (file, line, field); keep
// runs the same instance with its counters (delivered 10, then 15 after 5 more
// messages); out runs a new instance that writes the 5 new messages (offsets 10..14) to
// b.jsonl while a.jsonl keeps exactly offsets 0..9; gone is no longer listed; new
// consumes all 15; broken keeps its old instance and counters. A second reload with
// nothing changed restarts nothing.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	e, api := reloadEnv(t, map[string]string{
		"keep.toml":   nullSinkFile("keep", 100),
		"out.toml":    fileSinkFile(a),
		"gone.toml":   nullSinkFile("gone", 100),
		"broken.toml": nullSinkFile("broken", 100),
	}, 4)
	e.fill(10)
	testkit.WaitFor(t, "10 messages delivered to every sink", func() bool {
		for _, key := range []string{"keep", "gone", "broken"} {
			if e.status(connect.KindSink, key).Stats.Delivered != 10 {
				return false
			}
		}
		return fileLines(a) == 10
	})
	before := map[string]connect.Status{}
	for _, key := range []string{"keep", "out", "broken"} {
		before[key] = e.status(connect.KindSink, key)
	}

	writeConnector(t, e.dir, "out.toml", fileSinkFile(b))
	if err := os.Remove(filepath.Join(e.dir, "gone.toml")); err != nil {
		t.Fatal(err)
	}
	writeConnector(t, e.dir, "new.toml", nullSinkFile("new", 100))
	writeConnector(t, e.dir, "broken.toml", strings.Replace(nullSinkFile("broken", 100), "batch_length = 100", `batch_length = "many"`, 1))

	got := api.reloadAnswer()
	brokenFile := filepath.Join(e.dir, "broken.toml")
	want := reloadJSON{Started: []string{"sink new"}, Restarted: []string{"sink out"}, Stopped: []string{"sink gone"},
		Unchanged: []string{"sink keep"}, Refused: []refusedJSON{{Type: "sink", Key: "broken", File: brokenFile,
			Error: brokenFile + ":12: streams[0].batch_length: expected an integer, got string"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reload answer\n got %+v\nwant %+v", got, want)
	}
	if _, ok := e.rt.Connector(connect.KindSink, "gone"); ok {
		t.Fatal("sink gone is still listed after its file was removed")
	}
	if sinks, sources := e.rt.Configured(); sinks != 3 || sources != 0 {
		t.Fatalf("configured %d sinks, %d sources; want 3 (keep, out, new) and 0", sinks, sources)
	}
	for _, key := range []string{"keep", "broken"} {
		st := e.status(connect.KindSink, key)
		if st.ID != before[key].ID || st.State != connect.StateRunning || st.Stats.Delivered != 10 || st.Restart.Total != 0 {
			t.Fatalf("sink %s after the reload: instance %d, %s, delivered %d, restarts %d; want its instance %d running with delivered 10 and no restart",
				key, st.ID, st.State, st.Stats.Delivered, st.Restart.Total, before[key].ID)
		}
	}
	if st := e.status(connect.KindSink, "out"); st.ID == before["out"].ID {
		t.Fatalf("sink out kept instance %d: not restarted with its new config", st.ID)
	}

	testkit.WaitFor(t, "sinks out and new running", func() bool {
		return e.status(connect.KindSink, "out").State == connect.StateRunning && e.status(connect.KindSink, "new").State == connect.StateRunning
	})
	e.fill(5)
	testkit.WaitFor(t, "the 5 new messages everywhere", func() bool {
		return e.status(connect.KindSink, "keep").Stats.Delivered == 15 && e.status(connect.KindSink, "broken").Stats.Delivered == 15 &&
			e.status(connect.KindSink, "new").Stats.Delivered == 15 && fileLines(b) == 5
	})
	if got := fileOffsets(t, a); !reflect.DeepEqual(got, seqOffsets(0, 9)) {
		t.Fatalf("a.jsonl has offsets %v, want 0..9 (written before the reload only)", got)
	}
	if got := fileOffsets(t, b); !reflect.DeepEqual(got, seqOffsets(10, 14)) {
		t.Fatalf("b.jsonl has offsets %v, want 10..14 (the new path, from the stored offset on)", got)
	}

	again := api.reloadAnswer()
	want = reloadJSON{Started: []string{}, Restarted: []string{}, Stopped: []string{},
		Unchanged: []string{"sink keep", "sink new", "sink out"}, Refused: want.Refused}
	if !reflect.DeepEqual(again, want) {
		t.Fatalf("second reload answer\n got %+v\nwant %+v", again, want)
	}
}

// TestReloadFixedFile: a file refused by one reload and fixed before the next is applied
// by the next one (the connector restarts with it), and a new file that does not parse
// starts nothing.
func TestReloadFixedFile(t *testing.T) {
	e, api := reloadEnv(t, map[string]string{"keep.toml": nullSinkFile("keep", 100)}, 1)
	id := e.status(connect.KindSink, "keep").ID
	writeConnector(t, e.dir, "keep.toml", "type = \"sink\"\nkey = \"keep\"\nversion = 0\nenabled = tru\n")
	writeConnector(t, e.dir, "junk.toml", "not toml at all")
	got := api.reloadAnswer()
	// keep.toml's header does not parse either: the refusal names no key, and keep is
	// kept because the refused file is the one its running config came from.
	junk, keep := filepath.Join(e.dir, "junk.toml"), filepath.Join(e.dir, "keep.toml")
	if !reflect.DeepEqual(got, reloadJSON{Started: []string{}, Restarted: []string{}, Stopped: []string{}, Unchanged: []string{},
		Refused: []refusedJSON{{File: junk, Error: junk + ":1: expected '=' after key"}, {File: keep, Error: keep + `:4: expected keyword "true"`}}}) {
		t.Fatalf("reload answer %+v: want keep.toml and junk.toml refused, nothing else", got)
	}
	if st := e.status(connect.KindSink, "keep"); st.ID != id || st.State != connect.StateRunning {
		t.Fatalf("sink keep: instance %d %s, want %d running", st.ID, st.State, id)
	}
	if err := os.Remove(filepath.Join(e.dir, "junk.toml")); err != nil {
		t.Fatal(err)
	}
	writeConnector(t, e.dir, "keep.toml", nullSinkFile("keep", 7))
	got = api.reloadAnswer()
	if !reflect.DeepEqual(got, reloadJSON{Started: []string{}, Restarted: []string{"sink keep"}, Stopped: []string{},
		Unchanged: []string{}, Refused: []refusedJSON{}}) {
		t.Fatalf("reload answer after the fix %+v: want sink keep restarted", got)
	}
	st := e.status(connect.KindSink, "keep")
	if st.ID == id || st.Sink == nil || st.Sink.Streams[0].BatchLength != 7 {
		t.Fatalf("sink keep after the fix: instance %d (was %d), config %+v; want a new instance with batch_length 7", st.ID, id, st.Sink)
	}
}
