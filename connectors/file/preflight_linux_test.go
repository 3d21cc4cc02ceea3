package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// preflightErrors runs Preflight on plugin_config {"path": path} and returns its problems'
// texts.
func preflightErrors(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, err := range New().Preflight(context.Background(), fmt.Appendf(nil, `{"path":%q}`, path)) {
		var fe *sdk.FieldError
		if !errors.As(err, &fe) || fe.Field != "path" {
			t.Fatalf("Preflight: %v, want a *sdk.FieldError of path", err)
		}
		out = append(out, err.Error())
	}
	return out
}

// TestPreflight: `ferry check --connect` passes a file that exists, and one that Open would
// create with its missing directories; it refuses a directory, a path under a regular
// file, and a file or directory on a read-only mount (a tmpfs remounted read-only: root
// can write anything else), each naming plugin_config.path and the fix. Nothing is created.
func TestPreflight(t *testing.T) {
	dir := t.TempDir()
	exists := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(exists, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{exists, nil},
		{filepath.Join(dir, "a", "b", "out.jsonl"), nil},
		{dir, []string{"plugin_config.path: " + dir + " is a directory; fix: name a file in it, e.g. " + exists}},
		{filepath.Join(blocker, "x", "out.jsonl"), []string{"plugin_config.path: " + blocker + " is not a directory (in the path of " + filepath.Join(blocker, "x", "out.jsonl") + "); fix: choose another path"}},
	} {
		if got := preflightErrors(t, tc.path); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %q, want %q", tc.path, got, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Fatalf("Preflight created a directory: %v", err)
	}

	ro := testkit.Tmpfs(t, "1m", "the directory and file cases above run everywhere")
	if err := os.WriteFile(filepath.Join(ro, "old.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("", ro, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", ro, err)
	}
	for path, want := range map[string]string{
		filepath.Join(ro, "old.jsonl"): "plugin_config.path: " + filepath.Join(ro, "old.jsonl") + " cannot be written: read-only file system; fix: make it writable for the user ferry runs as, or choose another path",
		filepath.Join(ro, "d", "new.jsonl"): "plugin_config.path: " + filepath.Join(ro, "d", "new.jsonl") + " cannot be created: its directory " + ro +
			" is not writable: read-only file system; fix: make " + ro + " writable for the user ferry runs as, or choose another path",
	} {
		if got := preflightErrors(t, path); fmt.Sprint(got) != fmt.Sprint([]string{want}) {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}
