package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/internal/plugintest"
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "ferry-plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	plugins.Dir = d
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(d) }))
}

// buildMu and buildMemo make buildRust run cargo once per test binary.
var (
	buildMu   sync.Mutex
	buildMemo = map[string]string{}
)

// plugins builds the C test plugins; its Dir is set by TestMain.
var plugins = &plugintest.Builder{Root: "../.."}

// buildC compiles one C file (relative to this package) into a shared library named name,
// once per test binary, and returns its path. Skips when gcc is missing.
func buildC(t testing.TB, name, src string, defines ...string) string {
	t.Helper()
	return plugins.C(t, name, src, defines...)
}

func probe(t *testing.T, name string, defines ...string) string {
	return buildC(t, name, "testdata/c/probe.c", defines...)
}

// buildRust builds testdata/plugins/rust with cargo (once per test binary). Skips when cargo
// is missing.
func buildRust(t *testing.T) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildMemo["rust"]; ok {
		return p
	}
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		t.Skip("cargo not found: the Rust golden plugin needs cargo (CI has it)")
	}
	manifest, _ := filepath.Abs("../../testdata/plugins/rust/Cargo.toml")
	cmd := exec.Command(cargo, "build", "--release", "--locked", "--quiet", "--manifest-path", manifest)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cargo build: %v\n%s", err, b)
	}
	p := filepath.Join(filepath.Dir(manifest), "target", "release", "libferry_test_plugin.so")
	buildMemo["rust"] = p
	return p
}

// logRecorder is a slog.Handler that keeps every record with its attributes flattened.
type logRecorder struct {
	mu    *sync.Mutex
	recs  *[]logRec
	attrs []slog.Attr
}

type logRec struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: &sync.Mutex{}, recs: &[]logRec{}}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { rec.Attrs[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	*h.recs = append(*h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{mu: h.mu, recs: h.recs, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

func (h *logRecorder) find(substr string) (logRec, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.recs {
		if strings.Contains(r.Msg, substr) {
			return r, true
		}
	}
	return logRec{}, false
}
