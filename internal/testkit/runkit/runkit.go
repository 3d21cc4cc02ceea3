// Package runkit starts a connectors runtime (connect.Runtime) for a test and stops it when
// the test ends, failing the test if it does not stop cleanly in time.
//
// connect's own tests cannot import it (it imports connect); they have the same two steps
// in their harness.
package runkit

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
)

// StopTimeout bounds a runtime's Stop: its connectors' shutdown timeouts in tests are
// shorter.
const StopTimeout = 10 * time.Second

// New builds a runtime from opts (logs discarded when opts.Logger is nil) without starting
// it; the test starts it, and stops it with Stop.
func New(t testing.TB, opts connect.Options) *connect.Runtime {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	rt, err := connect.New(opts)
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	return rt
}

// Start builds and starts a runtime from opts and stops it when the test ends (an error
// of that Stop fails the test).
func Start(t testing.TB, opts connect.Options) *connect.Runtime {
	t.Helper()
	rt := New(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		t.Fatalf("start runtime: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := rt.Stop(ctx); err != nil {
			t.Errorf("stop runtime: %v", err)
		}
	})
	return rt
}

// Stop stops rt now (within StopTimeout), failing the test on an error.
func Stop(t testing.TB, rt *connect.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("stop runtime: %v", err)
	}
}

// StartFiles runs connector files as `ferry run` would: files (a name and its TOML) are
// written into a fresh config directory and loaded from there, the built-in connectors are
// available, the runtime's state goes to a fresh directory, and c is its Iggy client. The
// runtime is started, and stopped when the test ends.
func StartFiles(t testing.TB, c *iggy.Client, files map[string]string) *connect.Runtime {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatalf("load connector files: %v", err)
	}
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	return Start(t, connect.Options{Connectors: conns, Runtime: rc, Client: c, Builtins: connectors.Registry()})
}
