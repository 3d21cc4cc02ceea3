package ferrycli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/server/servertest"
)

// TestStatusShowsDegraded runs a real runtime (a null sink on s1/t1 over the embedded
// server) with its HTTP API and deletes the sink's topic: `ferry status` prints the sink
// degraded, with the poll's TopicIdNotFound as its last error.
func TestStatusShowsDegraded(t *testing.T) {
	srv := servertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, srv.Addr(), iggy.WithCredentials(servertest.Username, servertest.Password),
		iggy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.EnsureTopic(ctx, "s1", "t1", 1); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := "type = \"sink\"\nkey = \"nsink\"\nenabled = true\nversion = 0\nname = \"null sink\"\npath = \"builtin:null\"\n" +
		"\n[[streams]]\nstream = \"s1\"\ntopics = [\"t1\"]\nschema = \"raw\"\npoll_interval = \"5ms\"\n" +
		"\n[retry]\nmax_retries = 1\ninitial_backoff = \"10ms\"\nmax_backoff = \"50ms\"\n"
	if err := os.WriteFile(filepath.Join(dir, "nsink.toml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := connect.New(connect.Options{Connectors: conns, Client: c,
		Builtins: connectors.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
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
	state := func() connect.State { st, _ := rt.Connector(connect.KindSink, "nsink"); return st.State }
	waitState(t, state, connect.StateRunning)
	if err := c.DeleteTopic(ctx, iggy.Name("s1"), iggy.Name("t1")); err != nil {
		t.Fatal(err)
	}
	waitState(t, state, connect.StateDegraded)
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

// waitState polls state until it is want, for up to 20 s.
func waitState(t *testing.T, state func() connect.State, want connect.State) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for state() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %s, want %s", state(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
