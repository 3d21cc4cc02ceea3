package native

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
	"github.com/ferryio/ferry/sdk"
)

// TestHungPluginNotReopened is issue 22's thread leak: each restart of a sink whose native
// plugin hangs in iggy_sink_consume opened a new instance whose consume hung too, leaving
// one more OS thread behind every time (20 restarts: 11 → 30 threads). Now a connector is
// not reopened while a call into its stopped instance still runs: five restarts leave one
// instance opened and one call blocked (the plugin counts them), and the status says
// waiting_for_plugin. Once the plugin returns, the stopped instance is closed and a new
// one opened, which delivers everything.
func TestHungPluginNotReopened(t *testing.T) {
	so := buildC(t, "hang", "tests/native/testdata/hang.c")
	e := newEnv(t)
	e.Topic("s", "t", 1)
	e.Fill("s", "t", 0, 10, func(i int) []byte { return []byte(strconv.Itoa(i)) })
	dir := t.TempDir()
	out, release := filepath.Join(dir, "out.log"), filepath.Join(dir, "release")
	cfg := sinkConfig("hang", so, config.CommitAfterConsuming, jsonConfig("out", strconv.Quote(out), "release", strconv.Quote(release)), 10)
	cfg.ShutdownTimeout = 50 * time.Millisecond
	rt := e.runtime(nil, cfg)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) }) // a failed test must not leave the call blocked
	testkit.WaitFor(t, "the first consume to block", func() bool { return len(testkit.ReadLines(t, out)) == 2 })
	first := testkit.ReadLines(t, out)
	id := strings.TrimPrefix(first[0], "open ")
	if want := []string{"open " + id, "consume " + id + " blocked=1"}; !slices.Equal(first, want) {
		t.Fatalf("plugin events %q, want %q", first, want)
	}
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := rt.Restart(ctx, connect.KindSink, "hang")
		cancel()
		if err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		testkit.WaitFor(t, "status waiting_for_plugin", func() bool { return status(t, rt, "hang").Restart.WaitingForPlugin })
	}
	if got := testkit.ReadLines(t, out); !slices.Equal(got, first) {
		t.Fatalf("after 5 restarts the plugin saw %q, want only %q (no new instance while its call hangs)", got, first)
	}
	if st := status(t, rt, "hang"); st.Restart.Total != 5 {
		t.Fatalf("restarts counted %d, want 5", st.Restart.Total)
	}

	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "stored offset 9", func() bool { o, ok := e.Stored("g-hang", "s", "t", 0); return ok && o == 9 })
	st := status(t, rt, "hang")
	if st.State != connect.StateRunning || st.Restart.WaitingForPlugin {
		t.Fatalf("status %s waiting_for_plugin %v, want running and not waiting", st.State, st.Restart.WaitingForPlugin)
	}
	runkit.Stop(t, rt)
	got := testkit.ReadLines(t, out)
	if len(got) < 7 {
		t.Fatalf("plugin events %q: want the old instance returned and closed, then a new one", got)
	}
	next := strings.TrimPrefix(got[4], "open ")
	want := []string{"open " + id, "consume " + id + " blocked=1", "returned " + id, "close " + id, "open " + next, "consume " + next + " blocked=1"}
	if next == id || !slices.Equal(got[:6], want) {
		t.Fatalf("plugin events %q, want them to begin %q", got, want)
	}
	for _, l := range got[6:] {
		if strings.HasPrefix(l, "consume ") && !strings.HasSuffix(l, " blocked=1") {
			t.Fatalf("plugin events %q: a call ran beside another", got)
		}
	}
}

// TestHungSourceCloseNotReopened: the same for a source whose iggy_source_close hangs.
// Five restarts leave one instance opened and one close blocked; once it returns, a new
// instance opens.
func TestHungSourceCloseNotReopened(t *testing.T) {
	so := buildC(t, "hang", "tests/native/testdata/hang.c")
	e := newEnv(t)
	e.Topic("s", "t", 1)
	dir := t.TempDir()
	out, release := filepath.Join(dir, "out.log"), filepath.Join(dir, "release")
	cfg := &config.Source{Common: config.Common{Key: "hang", Enabled: true, Name: "hang", Path: so,
		PluginConfig: []byte(jsonConfig("out", strconv.Quote(out), "release", strconv.Quote(release)))},
		Streams:   []config.SourceStream{{Stream: "s", Topic: "t", Schema: sdk.SchemaRaw, BatchLength: 10, LingerTime: 5 * time.Millisecond}},
		OnFailure: config.FailureStop, Retry: config.Retry{MaxRetries: 2, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rt := runkit.New(t, connect.Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Client: e.Dial(),
		LoadSourcePlugin: connect.NativeSourceLoader, Runtime: &config.Runtime{State: config.State{Path: t.TempDir()},
			Plugins: config.Plugins{Directories: []string{filepath.Dir(so)}}}})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	testkit.WaitFor(t, "the source to open", func() bool { return len(testkit.ReadLines(t, out)) == 1 })
	id := strings.TrimPrefix(testkit.ReadLines(t, out)[0], "open ")
	for i := range 5 {
		// A short bound: the stop is abandoned while the plugin's close hangs.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := rt.Restart(ctx, connect.KindSource, "hang")
		cancel()
		if err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		testkit.WaitFor(t, "status waiting_for_plugin", func() bool { return status(t, rt, "hang").Restart.WaitingForPlugin })
	}
	want := []string{"open " + id, "close " + id + " blocked=1"}
	if got := testkit.ReadLines(t, out); !slices.Equal(got, want) {
		t.Fatalf("after 5 restarts the plugin saw %q, want %q", got, want)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a new instance", func() bool { return len(testkit.ReadLines(t, out)) == 4 })
	testkit.WaitFor(t, "running", func() bool {
		st := status(t, rt, "hang")
		return st.State == connect.StateRunning && !st.Restart.WaitingForPlugin
	})
	got := testkit.ReadLines(t, out)
	next := strings.TrimPrefix(got[3], "open ")
	if want := append(want, "returned "+id, "open "+next); next == id || !slices.Equal(got, want) {
		t.Fatalf("plugin events %q, want %q", got, want)
	}
	runkit.Stop(t, rt)
}
