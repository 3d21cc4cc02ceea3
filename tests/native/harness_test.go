package native

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/plugintest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server/servertest"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// plugins builds the C plugins; its Dir is set by TestMain.
var plugins = &plugintest.Builder{Root: "../.."}

// buildC compiles src (relative to the repository root) into a shared library named name,
// once per test binary. It skips the test when gcc is missing.
func buildC(t testing.TB, name, src string, defines ...string) string {
	t.Helper()
	return plugins.C(t, name, filepath.Join("../..", src), defines...)
}

// env is one real embedded server and an admin client.
type env struct {
	t     testing.TB
	addr  string
	admin *iggy.Client
}

func newEnv(t testing.TB, opts ...servertest.Option) *env {
	t.Helper()
	s := servertest.Start(t, opts...)
	e := &env{t: t, addr: s.Addr()}
	e.admin = e.dial()
	return e
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) dial() *iggy.Client {
	e.t.Helper()
	c, err := iggy.Dial(e.ctx(), e.addr, iggy.WithCredentials(servertest.Username, servertest.Password),
		iggy.WithHeartbeat(50*time.Millisecond), iggy.WithLogger(quietLog))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (e *env) topic(stream, topic string, partitions uint32) {
	e.t.Helper()
	if err := e.admin.EnsureTopic(e.ctx(), stream, topic, partitions); err != nil {
		e.t.Fatal(err)
	}
}

// fill appends n messages with payload(i) to one partition.
func (e *env) fill(stream, topic string, partition uint32, n int, payload func(i int) []byte) {
	e.t.Helper()
	msgs := make([]iggy.Message, 0, 1000)
	for i := 0; i < n; {
		msgs = msgs[:0]
		for ; i < n && len(msgs) < 1000; i++ {
			msgs = append(msgs, iggy.Message{Payload: payload(i)})
		}
		if _, err := e.admin.SendMessages(e.ctx(), iggy.Name(stream), iggy.Name(topic), wire.ToPartition(partition), msgs); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) stored(group, stream, topic string, partition uint32) (uint64, bool) {
	e.t.Helper()
	o, found, err := e.admin.GetOffset(e.ctx(), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(group)},
		iggy.Name(stream), iggy.Name(topic), partition)
	if err != nil {
		e.t.Fatal(err)
	}
	return o.StoredOffset, found
}

func (e *env) wantStored(group, stream, topic string, partition uint32, want uint64) {
	e.t.Helper()
	if got, ok := e.stored(group, stream, topic, partition); !ok || got != want {
		e.t.Fatalf("stored offset of %s/%s/%d = %d (found %t), want %d", stream, topic, partition, got, ok, want)
	}
}

// sinkConfig reads stream s topic t in group g with batches of batch.
func sinkConfig(key, path string, mode config.CommitMode, pluginConfig string, batch uint32) *config.Sink {
	return &config.Sink{
		Common: config.Common{Key: key, Enabled: true, Name: key, Path: path, PluginConfig: []byte(pluginConfig)},
		Streams: []config.SinkStream{{Stream: "s", Topics: []string{"t"}, Schema: sdk.SchemaRaw, BatchLength: batch,
			PollInterval: time.Millisecond, ConsumerGroup: "g-" + key}},
		OffsetCommit: mode, OnFailure: config.FailureStop,
		Retry:           config.Retry{MaxRetries: 2, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		Commit:          config.CommitSettings{Interval: 10 * time.Millisecond, Delay: config.DefaultCommitDelay, MaxUncommitted: config.DefaultMaxUncommitted},
		ShutdownTimeout: 5 * time.Second,
	}
}

// runtime builds a Runtime over its own client, with the native loader and builtins.
func (e *env) runtime(builtins *sdk.Registry, sinks ...*config.Sink) *connect.Runtime {
	e.t.Helper()
	return e.runtimeWith(e.dial(), builtins, sinks...)
}

// runtimeWith builds a Runtime over client c.
func (e *env) runtimeWith(c *iggy.Client, builtins *sdk.Registry, sinks ...*config.Sink) *connect.Runtime {
	e.t.Helper()
	for _, s := range sinks {
		if err := s.Validate(); err != nil {
			e.t.Fatal(err)
		}
	}
	// The plugins are built into plugins.Dir: the one directory they may be loaded from.
	rc := config.DefaultRuntime()
	rc.State.Path = ""
	rc.Plugins.Directories = []string{plugins.Dir}
	rt, err := connect.New(connect.Options{Connectors: &config.Connectors{Sinks: sinks}, Client: c, Runtime: rc,
		Builtins: builtins, LoadSinkPlugin: connect.NativeSinkLoader, Logger: quietLog})
	if err != nil {
		e.t.Fatal(err)
	}
	return rt
}

func stop(t testing.TB, rt *connect.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func status(t testing.TB, rt *connect.Runtime, key string) connect.Status {
	t.Helper()
	for _, s := range rt.Status() {
		if s.Key == key {
			return s
		}
	}
	t.Fatalf("no connector %q", key)
	return connect.Status{}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func jsonConfig(kv ...string) string {
	s := "{"
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q: %s", kv[i], kv[i+1])
	}
	return s + "}"
}
