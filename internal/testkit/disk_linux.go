package testkit

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes ("32m", "256k": the mount's size option) on a fresh
// temporary directory and returns it; it is unmounted when the test ends. Mounting needs
// root: where it is not permitted the test is skipped, with instead saying which test
// covers the same fault another way.
func Tmpfs(t testing.TB, size, instead string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); %s", err, instead)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes the file at path until its file system is full (ENOSPC), down to the
// last byte, so the next write of anyone fails. Removing the file frees the room again.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // a filler: only its size matters, and the disk is full
	for _, size := range []int{1 << 20, 4096, 1} {
		chunk := make([]byte, size)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", path, err)
				}
				break
			}
		}
	}
}
