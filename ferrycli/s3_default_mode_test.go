package ferrycli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

// TestS3WithoutOffsetCommitRunsSinkControlled: a builtin:s3 file as upstream's s3_sink
// writes it, with no offset_commit, used to be refused ("the sink runs only with
// offset_commit = sink_controlled"). It now runs with sink_controlled, the sink's only
// mode, against the real S3 server (scripts/s3.sh): one INFO line says so, all 30
// messages reach the bucket as 30 JSON lines, and the group's stored offset is 29.
func TestS3WithoutOffsetCommitRunsSinkControlled(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	kit := iggykit.Start(t)
	kit.Topic("s", "t", 1)
	kit.Fill("s", "t", 0, 30, func(i int) []byte { return fmt.Appendf(nil, `{"i":%d}`, i) })

	dir := t.TempDir()
	file := filepath.Join(dir, "s3_sink.toml")
	text := fmt.Sprintf(`type = "sink"
key = "s3"
enabled = true
version = 0
name = "S3 sink"
path = "builtin:s3"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 10
poll_interval = "5ms"

[plugin_config]
bucket = %q
region = %q
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = "lake"
output_format = "json_lines"
flush_interval = "100ms"
`, bucket, srv.Region, srv.Endpoint, srv.AccessKey, srv.SecretKey)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	rt := runkit.Start(t, connect.Options{Connectors: conns, Runtime: rc, Client: kit.Dial(), Builtins: connectors.Registry(),
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	testkit.WaitFor(t, "offset 29 stored", func() bool { o, ok := kit.Stored("iggy-connect-sink-s3", "s", "t", 0); return ok && o == 29 })
	if st, _ := rt.Connector(connect.KindSink, "s3"); st.State != connect.StateRunning {
		t.Fatalf("sink %s: %+v", st.State, st.LastError)
	}
	lines := 0
	for _, k := range srv.Keys(t, bucket) {
		lines += strings.Count(string(srv.Get(t, bucket, k)), "\n")
	}
	if lines != 30 {
		t.Fatalf("%d lines in the bucket, want 30", lines)
	}
	const line = `sink runs with offset_commit = "sink_controlled": its file sets no offset_commit, and builtin:s3 runs only with that mode`
	n := 0
	for l := range strings.Lines(logs.String()) {
		var rec struct{ Level, Msg, Sink, File string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec.Msg == line {
			n++
			if rec.Level != "INFO" || rec.Sink != "s3" || rec.File != file {
				t.Fatalf("the line is %+v; want INFO, sink s3, file %s", rec, file)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d lines %q, want 1; logs:\n%s", n, line, logs.String())
	}
}
