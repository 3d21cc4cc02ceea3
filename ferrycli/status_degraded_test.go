package ferrycli

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

// TestStatusShowsDegraded runs a real runtime (a null sink on s1/t1 over the embedded
// server) with its HTTP API and deletes the sink's topic: `ferry status` prints the sink
// degraded, with the poll's TopicIdNotFound as its last error.
func TestStatusShowsDegraded(t *testing.T) {
	kit := iggykit.Start(t)
	c := kit.Admin
	ctx := kit.Ctx()
	kit.Topic("s1", "t1", 1)
	rt := runkit.StartFiles(t, kit.Dial(), map[string]string{"nsink.toml": "type = \"sink\"\nkey = \"nsink\"\nenabled = true\nversion = 0\nname = \"null sink\"\npath = \"builtin:null\"\n" +
		"\n[[streams]]\nstream = \"s1\"\ntopics = [\"t1\"]\nschema = \"raw\"\npoll_interval = \"5ms\"\n" +
		"\n[retry]\nmax_retries = 1\ninitial_backoff = \"10ms\"\nmax_backoff = \"50ms\"\n"})
	rc := config.DefaultRuntime()
	rc.HTTP.Address = "127.0.0.1:0"
	ln, err := listenAPI(rc)
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := serveAPI(ctx, rc, ln, t.TempDir(), rt, nil, "0.5.0", nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	state := func(want connect.State) func() bool {
		return func() bool { st, _ := rt.Connector(connect.KindSink, "nsink"); return st.State == want }
	}
	testkit.WaitFor(t, "nsink running", state(connect.StateRunning))
	if err := c.DeleteTopic(ctx, iggy.Name("s1"), iggy.Name("t1")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "nsink degraded", state(connect.StateDegraded))
	out, err := runStatus(t, statusFlags{url: url})
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "sink" && f[1] == "nsink" {
			if f[2] != "degraded" || !strings.Contains(line, "poll s1/t1: ") || !strings.Contains(line, "TopicIdNotFound") {
				t.Fatalf("status line %q: want degraded with the poll's TopicIdNotFound", line)
			}
			return
		}
	}
	t.Fatalf("no line of sink nsink in:\n%s", out)
}
