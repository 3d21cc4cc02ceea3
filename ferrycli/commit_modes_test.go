package ferrycli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

// sinkControlledFile is a connector file of builtin:NAME with offset_commit =
// "sink_controlled" on stream s, topic t, in batches of 10.
func sinkControlledFile(key, name string) string {
	return "type = \"sink\"\nkey = \"" + key + "\"\nenabled = true\nversion = 0\nname = \"n\"\npath = \"builtin:" + name + "\"\n" +
		"offset_commit = \"sink_controlled\"\n\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"text\"\nbatch_length = 10\npoll_interval = \"5ms\"\n" +
		"\n[commit]\ninterval = \"20ms\"\n"
}

// TestStdoutAndNullCommitUnderSinkControlled: builtin:stdout and builtin:null under
// offset_commit = "sink_controlled" used to pass `ferry check`, deliver, and commit
// nothing, so every start delivered everything again. Each now commits each batch once
// written (sdk.CommitsEachBatch): `ferry check` accepts the files, a run on the embedded
// server stores exactly the last offset of each partition (24 and 6 of 25 and 7
// messages) for both groups, and a second start delivers only the one message sent after
// the first stopped (offset 25), nothing of the first 32.
func TestStdoutAndNullCommitUnderSinkControlled(t *testing.T) {
	files := map[string]string{"out.toml": sinkControlledFile("out", "stdout"), "drop.toml": sinkControlledFile("drop", "null")}

	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	if err := os.Mkdir(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(conns, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte("[connectors]\nconfig_type = \"local\"\nconfig_dir = \""+conns+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := check(&out, startOptions{config: cfg}); err != nil {
		t.Fatalf("check: %v\n%s", err, out.String())
	}
	oks := 0
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "sink" && (f[1] == "out" || f[1] == "drop") &&
			strings.HasSuffix(line, "offset_commit=sink_controlled on_failure=stop ← s/[t]  ok\n") {
			oks++
		}
	}
	if oks != 2 {
		t.Fatalf("check output:\n%s\nwant both sinks ok with offset_commit=sink_controlled", out.String())
	}

	kit := iggykit.Start(t)
	kit.Topic("s", "t", 2)
	kit.Fill("s", "t", 0, 25, nil)
	kit.Fill("s", "t", 1, 7, nil)
	stored := func(group string, partition uint32, want uint64) func() bool {
		return func() bool { o, ok := kit.Stored(group, "s", "t", partition); return ok && o == want }
	}
	groups := []string{"iggy-connect-sink-out", "iggy-connect-sink-drop"}
	rt := runkit.StartFiles(t, kit.Dial(), files)
	for _, g := range groups {
		testkit.WaitFor(t, g+" stored 24 on partition 0", stored(g, 0, 24))
		testkit.WaitFor(t, g+" stored 6 on partition 1", stored(g, 1, 6))
	}
	runkit.Stop(t, rt)
	for _, st := range rt.Status() {
		if st.Stats.Delivered != 32 || st.Stats.CommitsAccepted == 0 || st.Stats.CommitsStale+st.Stats.CommitsOutOfRange+st.Stats.CommitsUnknown != 0 {
			t.Fatalf("%s: %+v; want 32 delivered, only accepted commits", st.Key, st.Stats)
		}
	}

	kit.Produce("s", "t", 0, "late")
	rt = runkit.StartFiles(t, kit.Dial(), files)
	for _, g := range groups {
		testkit.WaitFor(t, g+" stored 25 on partition 0", stored(g, 0, 25))
	}
	runkit.Stop(t, rt)
	for _, st := range rt.Status() {
		if st.Stats.Delivered != 1 {
			t.Fatalf("%s after a restart: %d delivered, want 1 (offset 25 only)", st.Key, st.Stats.Delivered)
		}
		if st.State == connect.StateError {
			t.Fatalf("%s: %+v", st.Key, st.LastError)
		}
	}
	kit.WantStored(groups[0], "s", "t", 1, 6)
	kit.WantStored(groups[1], "s", "t", 1, 6)
}
