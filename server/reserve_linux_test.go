package server_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
	"github.com/ferryio/ferry/server/store"
)

// fullVolume mounts a small tmpfs, fills it, and frees exactly free bytes again (tmpfs
// counts whole pages, so free is a multiple of 4 KiB); it returns the mount point.
func fullVolume(t *testing.T, free int64, instead string) string {
	t.Helper()
	mnt := testkit.Tmpfs(t, "4m", instead)
	filler := filepath.Join(mnt, "filler")
	testkit.FillDisk(t, filler)
	fi, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, fi.Size()-free); err != nil {
		t.Fatal(err)
	}
	return mnt
}

// TestNoRoomForReserveOnFirstBoot is issue 36's `ferry server` on a volume with less
// free space than the disk reserve: it failed with "pebble: database does not exist"
// after the reserve error (the store fell back to a read-only open, meant for existing
// data on a full disk, on a directory without a database). Now a first boot fails with
// one error naming the data dir, the space free, the reserve needed and the flag, and
// leaves nothing behind (no data dir, no marker), so a retry with a smaller reserve is
// a first boot and starts.
func TestNoRoomForReserveOnFirstBoot(t *testing.T) {
	mnt := fullVolume(t, 1<<20, "no other test fills a real disk before a first boot")
	data := filepath.Join(mnt, "data")
	cfg := server.Config{Addr: "127.0.0.1:0", DataDir: data, PasswordIterations: 1000, DiskReserve: 2 << 20}
	s, err := server.Start(context.Background(), cfg)
	if err == nil {
		_ = s.Close(context.Background())
		t.Fatal("started without room for the disk reserve")
	}
	want := "server: data dir " + data + ": no room for its 2.0 MiB disk reserve: 1.0 MiB free on its volume " +
		"(write " + filepath.Join(data, "FERRY.RESERVE") + ": no space left on device); free space there, or start with a smaller reserve: " +
		"--disk-reserve of ferry server, [embedded] disk_reserve of ferry run (0 turns the reserve off)"
	if err.Error() != want {
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
	if !errors.Is(err, store.ErrNoRoomForReserve) {
		t.Fatalf("error %v does not match store.ErrNoRoomForReserve", err)
	}
	for _, p := range []string{data, filepath.Join(mnt, ".data.ferry-data")} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s left behind by the failed start (stat: %v)", p, err)
		}
	}

	cfg.DiskReserve = 512 << 10
	s, err = server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("retry with a 512 KiB reserve: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if s.StorageFault() != nil {
		t.Fatalf("storage fault after the retry: %v", s.StorageFault())
	}
	login(t, s)
	fi, err := os.Stat(filepath.Join(data, "FERRY.RESERVE"))
	if err != nil || fi.Size() != 512<<10 {
		t.Fatalf("reserve after the retry: %v, %v", fi, err)
	}
}

// TestNoReserveOnFullVolume: a reserve of 0 (--disk-reserve 0; Config.DiskReserve -1)
// keeps none, so a first boot with little room starts.
func TestNoReserveOnFullVolume(t *testing.T) {
	mnt := fullVolume(t, 1<<20, "no other test fills a real disk before a first boot")
	data := filepath.Join(mnt, "data")
	s := servertest.Start(t, servertest.WithDataDir(data), servertest.WithConfig(func(c *server.Config) { c.DiskReserve = -1 }))
	login(t, s)
	if _, err := os.Stat(filepath.Join(data, "FERRY.RESERVE")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a reserve with DiskReserve -1 (stat: %v)", err)
	}
}
