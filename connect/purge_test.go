package connect

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

// TestPurgedTopicDeliveredFromZero is the regression test of "a purged topic is skipped":
// a caught-up builtin:file sink (sink_controlled) on a topic of 100 messages; the topic
// purged (PurgeTopic, or PurgeStream) and 110 messages sent: only the last 10 were written
// (the sink resumed at its position 100 on a partition that had started again at 0), the
// offsets said lag 0 and nothing was logged. Now the file holds the 100 lines before and
// the 110 after, the group's offset is 109 with lag 0, the rewind is counted once and
// logged once at WARN with the stream, topic, partition and positions. The cases: the
// sink polling throughout (the purge lands between two polls, whichever they are); the
// sink's poll held across the purge and the sends, so that the poll after them finds the
// partition's current offset (109) above its position (100), which the current offset
// alone cannot tell from new messages (the server holds the sink's next poll until the
// 110 are sent); and the runtime stopped across them.
func TestPurgedTopicDeliveredFromZero(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream bool // PurgeStream rather than PurgeTopic
		during string
	}{
		{"topic/running", false, "running"},
		{"topic/held", false, "held"},
		{"topic/stopped", false, "stopped"},
		{"stream/held", true, "held"},
		{"stream/stopped", true, "stopped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &pollGate{}
			env := newIggyEnv(t, servertest.WithReplyDelay(g.hold))
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 100, func(i int) []byte { return fmt.Appendf(nil, `{"old":%d}`, i) })
			dir := t.TempDir()
			out := filepath.Join(dir, "out.jsonl")
			doc := fmt.Sprintf(`type = "sink"
key = "file"
enabled = true
version = 0
name = "File sink"
path = "builtin:file"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 30
poll_interval = "5ms"
consumer_group = "g"

[plugin_config]
path = %q
flush_interval = "50ms"
`, out)
			file := filepath.Join(dir, "file.toml")
			rt, logs := startSinkFileLogged(t, env, file, doc)
			defer func() { stopRuntime(t, rt) }()
			waitStored(t, rt, 99)
			env.WantStored("g", "s", "t", 0, 99)
			switch c.during {
			case "held":
				g.close(t)
			case "stopped":
				stopRuntime(t, rt)
			}
			if c.stream {
				if err := env.Admin.PurgeStream(bg(t), iggy.Name("s")); err != nil {
					t.Fatal(err)
				}
			} else if err := env.Admin.PurgeTopic(bg(t), iggy.Name("s"), iggy.Name("t")); err != nil {
				t.Fatal(err)
			}
			env.Fill("s", "t", 0, 110, func(i int) []byte { return fmt.Appendf(nil, `{"new":%d}`, i) })
			switch c.during {
			case "held":
				g.open()
			case "stopped":
				rt, logs = startSinkFileLogged(t, env, file, doc)
			}
			waitStored(t, rt, 109)
			env.WantStored("g", "s", "t", 0, 109)
			var want []string
			for i := range 100 {
				want = append(want, fmt.Sprintf(`%d {"old":%d}`, i, i))
			}
			for i := range 110 {
				want = append(want, fmt.Sprintf(`%d {"new":%d}`, i, i))
			}
			if got := fileRecords(t, out); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("file holds %d lines (first after the purge %q); want the 100 before and the 110 after",
					len(got), got[min(100, len(got)-1)])
			}
			offs, err := rt.Offsets(bg(t), "file")
			if err != nil {
				t.Fatal(err)
			}
			if len(offs) != 1 || offs[0].Current != 109 || offs[0].Stored != 109 || offs[0].Lag != 0 || offs[0].Uncommitted != 0 {
				t.Fatalf("offsets %+v; want current 109, stored 109, lag 0, uncommitted 0", offs)
			}
			st := rt.Status()[0].Stats
			rewinds, delivered := uint64(1), uint64(210)
			if c.during == "stopped" {
				// The new instance resumes from the cleared offset (0): nothing went back
				// under it. Counters belong to the slot, but this is a new runtime.
				rewinds, delivered = 0, 110
			}
			if st.PartitionRewinds != rewinds || st.Delivered != delivered || st.StoresRefused != 0 {
				t.Fatalf("stats: rewinds %d, delivered %d, stores refused %d; want %d, %d, 0",
					st.PartitionRewinds, st.Delivered, st.StoresRefused, rewinds, delivered)
			}
			msg := `level=WARN msg="partition went back to an earlier offset (its messages were purged); it is delivered again from offset 0" sink=file instance=`
			tail := ` stream=s topic=t partition=0 position=100 current_offset=109 reason=`
			if c.during == "running" { // the poll that notices may come before, during or after the sends
				tail = ` stream=s topic=t partition=0 position=100 current_offset=`
			}
			n := 0
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, msg) && strings.Contains(l, tail) {
					n++
				}
			}
			if n != int(rewinds) {
				t.Fatalf("%d lines %s…%s; want %d; logs:\n%s", n, msg, tail, rewinds, logs.String())
			}
		})
	}
}

// pollGate holds poll requests at the server before they are handled, once closed; close
// returns when one is held (every poll handled before it was handled before close
// returned), open lets it and the later ones through.
type pollGate struct {
	mu     sync.Mutex
	gate   chan struct{} // non-nil while closed
	held   chan struct{} // closed when a poll waits at the gate
	holdOn sync.Once
}

func (g *pollGate) hold(code wire.Code) time.Duration {
	if code != wire.CodePollMessages {
		return 0
	}
	g.mu.Lock()
	gate, held := g.gate, g.held
	g.mu.Unlock()
	if gate != nil {
		g.holdOn.Do(func() { close(held) })
		<-gate
	}
	return 0
}

func (g *pollGate) close(t *testing.T) {
	g.mu.Lock()
	g.gate, g.held = make(chan struct{}), make(chan struct{})
	held := g.held
	g.mu.Unlock()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no poll reached the server in 10 s")
	}
}

func (g *pollGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

// waitStored waits until the runtime's own figures for partition 0 show offset stored
// (the table records a store once its reply is handled, just after the server has it).
func waitStored(t *testing.T, rt *Runtime, offset int64) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("the sink's partition 0 stored at %d", offset), func() bool {
		offs, err := rt.Offsets(context.Background(), "file")
		return err == nil && len(offs) == 1 && offs[0].Stored == offset && offs[0].Uncommitted == 0
	})
}

// startSinkFileLogged is startSinkFile with the runtime's logs in a buffer.
func startSinkFileLogged(t *testing.T, env *iggyEnv, file, doc string) (*Runtime, *syncbuf.Buffer) {
	t.Helper()
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseSinkFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	rt, err := New(Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: env.Dial(), Builtins: connectors.Registry(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt, logs
}
