package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestFillDiskLeavesNoRoom(t *testing.T) {
	dir := Tmpfs(t, "64k", "nothing else covers the kit's own tmpfs")
	filler := filepath.Join(dir, "filler")
	FillDisk(t, filler)
	if err := os.WriteFile(filepath.Join(dir, "one"), []byte("x"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write on the full disk: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "one"), []byte("x"), 0o600); err != nil {
		t.Fatalf("a write with room again: %v", err)
	}
}
