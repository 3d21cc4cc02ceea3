package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

var (
	rustOnce sync.Once
	rustLib  string
	rustErr  error
)

// rustPlugin builds the Rust test plugin (testdata/plugins/rust, which commits through the
// ferry-commit crate of rust/ferry-commit) with cargo once per test binary and copies it
// next to the C plugins. cargo is part of the toolchain CI has: its absence fails the test.
func rustPlugin(t *testing.T) string {
	t.Helper()
	rustOnce.Do(func() {
		manifest := filepath.Join(repoRoot, "testdata", "plugins", "rust", "Cargo.toml")
		cmd := exec.Command("cargo", "build", "--release", "--locked", "--quiet", "--manifest-path", manifest)
		if out, err := cmd.CombinedOutput(); err != nil {
			rustErr = fmt.Errorf("cargo build %s: %w\n%s", manifest, err, out)
			return
		}
		built := filepath.Join(filepath.Dir(manifest), "target", "release", "libferry_test_plugin.so")
		dir := filepath.Join(filepath.Dir(ferryBin), "plugins")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			rustErr = err
			return
		}
		rustLib = filepath.Join(dir, "rust_committing_sink.so")
		rustErr = copyFile(built, rustLib)
	})
	if rustErr != nil {
		t.Fatal(rustErr)
	}
	return rustLib
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// TestRustCommittingSinkSurvivesSIGKILL runs the SIGKILL scenario of
// TestNativeCommittingSinkSurvivesSIGKILL (same source, same kill, same exact checks: nothing
// lost, nothing committed before it was fsynced, duplicates exactly the uncommitted window)
// with the Rust test plugin's committing sink, which commits by stream and topic NAME through
// the ferry-commit crate's CommitHandle, as a plugin built with Iggy's SDK must. Its first
// accepted commit of each run is followed by the refused cases, answered by the real runtime
// and mapped by the crate: the same offset again (Stale, -2), an offset far beyond what was
// delivered (OutOfRange, -3), a partition the sink does not own (Gone, -1), and a topic the
// runtime never announced (UnknownTopic, never sent).
func TestRustCommittingSinkSurvivesSIGKILL(t *testing.T) {
	lib := rustPlugin(t)
	codes := filepath.Join(t.TempDir(), "codes.jsonl")
	committingSinkSurvivesSIGKILL(t, lib, fmt.Sprintf("codes_out = %q\n", codes),
		" writes to %s, fsync every "+fmt.Sprint(nativeFlushMs)+" ms")

	// codes_out holds the last run's attempts (each run rewrites it).
	b, err := os.ReadFile(codes)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		Case  string `json:"case"`
		Error string `json:"error"`
		Code  *int   `json:"code"`
	}
	var got []attempt
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a attempt
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("codes line %q: %v", l, err)
		}
		got = append(got, a)
	}
	code := func(c int) *int { return &c }
	want := []attempt{
		{"same_offset", "Stale", code(-2)},
		{"beyond_delivered", "OutOfRange", code(-3)},
		{"unowned_partition", "Gone", code(-1)},
		{"unknown_topic", "UnknownTopic", nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("refused commits = %+v, want %+v", got, want)
	}
}
