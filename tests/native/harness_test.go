package native

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/plugintest"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server/servertest"
)

// plugins builds the C plugins; its Dir is set by TestMain.
var plugins = &plugintest.Builder{Root: "../.."}

// buildC compiles src (relative to the repository root) into a shared library named name,
// once per test binary. It skips the test when gcc is missing.
func buildC(t testing.TB, name, src string, defines ...string) string {
	t.Helper()
	return plugins.C(t, name, filepath.Join("../..", src), defines...)
}

// env is one real embedded server and an admin client (iggykit).
type env struct{ *iggykit.Env }

func newEnv(t testing.TB, opts ...servertest.Option) *env {
	t.Helper()
	return &env{iggykit.Start(t, opts...)}
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
	e.T.Helper()
	return e.runtimeWith(e.Dial(), builtins, sinks...)
}

// runtimeWith builds a Runtime over client c.
func (e *env) runtimeWith(c *iggy.Client, builtins *sdk.Registry, sinks ...*config.Sink) *connect.Runtime {
	e.T.Helper()
	for _, s := range sinks {
		if err := s.Validate(); err != nil {
			e.T.Fatal(err)
		}
	}
	// The plugins are built into plugins.Dir: the one directory they may be loaded from.
	rc := config.DefaultRuntime()
	rc.State.Path = ""
	rc.Plugins.Directories = []string{plugins.Dir}
	return runkit.New(e.T, connect.Options{Connectors: &config.Connectors{Sinks: sinks}, Client: c, Runtime: rc,
		Builtins: builtins, LoadSinkPlugin: connect.NativeSinkLoader})
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
