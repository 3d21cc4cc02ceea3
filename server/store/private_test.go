package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDataDirIsPrivate: the data directory is 0700 and every file in it 0600, also
// one created by an older version with 0755/0644 (issue 14).
func TestDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "OLD"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: dir, PasswordIterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.EnsureRoot("root", "secret"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("dir: %v %v", fi.Mode(), err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) < 3 {
			t.Fatalf("entries %v %v", entries, err)
		}
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if want := os.FileMode(0o600); !e.IsDir() && fi.Mode().Perm() != want {
				t.Errorf("%s: %v, want %v", e.Name(), fi.Mode().Perm(), want)
			}
		}
	}
	check()
}
