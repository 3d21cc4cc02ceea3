package runkit

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
)

// TestStartFilesDeliversToAFileSink is the kit end to end: an embedded server, messages
// produced to it, a runtime started from a connector file, the file sink's lines read back.
func TestStartFilesDeliversToAFileSink(t *testing.T) {
	env := iggykit.Start(t)
	env.Topic("s", "t", 1)
	env.Produce("s", "t", 0, "one", "two", "three")
	out := filepath.Join(t.TempDir(), "out.jsonl")
	rt := StartFiles(t, env.Dial(), map[string]string{"out.toml": `type = "sink"
key = "out"
enabled = true
version = 0
name = "out"
path = "builtin:file"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "text"
poll_interval = "5ms"

[commit]
interval = "10ms"

[plugin_config]
path = "` + out + `"
`})
	testkit.WaitFor(t, "three lines in the file and offset 2 stored", func() bool {
		o, ok := env.Stored("iggy-connect-sink-out", "s", "t", 0)
		return len(testkit.ReadLines(t, out)) == 3 && ok && o == 2
	})
	lines := testkit.ReadLines(t, out)
	for i, want := range []string{"one", "two", "three"} {
		if !strings.Contains(lines[i], want) {
			t.Fatalf("line %d is %s, want the payload %q", i, lines[i], want)
		}
	}
	Stop(t, rt)
	if st := rt.Status(); len(st) != 1 || st[0].State != connect.StateStopped {
		t.Fatalf("status after Stop: %+v", st)
	}
}
