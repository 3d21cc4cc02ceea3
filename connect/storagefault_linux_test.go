package connect

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// TestStorageFaultFullDisk is TestStorageFaultNoRedeliveryStorm on a real full disk: the
// embedded server's data dir is on a 32 MiB tmpfs the test mounts (root only; skipped
// where mounting is not permitted), and the fault is another file filling it. The
// server's probe finds the disk full and refuses writes (4006) until the file is removed.
func TestStorageFaultFullDisk(t *testing.T) {
	mnt := testkit.Tmpfs(t, "32m", "TestStorageFaultNoRedeliveryStorm covers the fault with the server's hook")
	env := newIggyEnv(t, servertest.WithDataDir(filepath.Join(mnt, "data")), servertest.WithConfig(func(c *server.Config) {
		c.StorageProbeInterval = 5 * time.Millisecond
	}))
	srv := env.Server
	filler := filepath.Join(mnt, "filler")
	on := func() {
		testkit.FillDisk(t, filler)
		testkit.WaitFor(t, "the server to find its disk full", func() bool { return srv.StorageFault() != nil })
	}
	off := func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "the server to find room again", func() bool { return srv.StorageFault() == nil })
	}
	runStorageFault(t, env, config.CommitAfterConsuming, on, off)
}
