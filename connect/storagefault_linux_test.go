package connect

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// TestStorageFaultFullDisk is TestStorageFaultNoRedeliveryStorm on a real full disk: the
// embedded server's data dir is on a 32 MiB tmpfs the test mounts (root only; skipped
// where mounting is not permitted), and the fault is another file filling it. The
// server's probe finds the disk full and refuses writes (4006) until the file is removed.
func TestStorageFaultFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=32m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); TestStorageFaultNoRedeliveryStorm covers the fault with the server's hook", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	srv := servertest.Start(t, servertest.WithDataDir(filepath.Join(mnt, "data")), servertest.WithConfig(func(c *server.Config) {
		c.StorageProbeInterval = 5 * time.Millisecond
	}))
	env := &iggyEnv{t: t, addr: srv.Addr()}
	env.admin = env.dial()
	filler := filepath.Join(mnt, "filler")
	on := func() {
		fillDisk(t, filler)
		waitFor(t, "the server to find its disk full", func() bool { return srv.StorageFault() != nil })
	}
	off := func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the server to find room again", func() bool { return srv.StorageFault() == nil })
	}
	runStorageFault(t, env, config.CommitAfterConsuming, on, off)
}

// fillDisk writes path until its file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{1 << 20, 4096, 1} {
		chunk := make([]byte, size)
		for {
			_, err := f.Write(chunk)
			if err == nil {
				continue
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
}
