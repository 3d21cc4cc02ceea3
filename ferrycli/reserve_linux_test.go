package ferrycli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestServerDiskReserveFlag is issue 36's `ferry server` on a volume with less room
// than the disk reserve ("pebble: database does not exist" after the reserve error):
// on a real full tmpfs with 1 MiB free, --disk-reserve 2MiB fails with one error (no
// other error logged), and --disk-reserve 512KiB on the same data dir starts.
func TestServerDiskReserveFlag(t *testing.T) {
	mnt := testkit.Tmpfs(t, "4m", "server's TestNoRoomForReserveOnFirstBoot needs the same root rights; nothing else covers the flag")
	filler := filepath.Join(mnt, "filler")
	testkit.FillDisk(t, filler)
	fi, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, fi.Size()-1<<20); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(mnt, "data")
	run := func(ctx context.Context, out *syncbuf.Buffer, reserve string) error {
		root := New().command()
		root.SetOut(out)
		root.SetErr(out)
		root.SetArgs([]string{"server", "--addr", "127.0.0.1:0", "--data", data, "--disk-reserve", reserve})
		root.SilenceUsage = true
		return root.ExecuteContext(ctx)
	}
	var out syncbuf.Buffer
	err = run(t.Context(), &out, "2MiB")
	want := "server: data dir " + data + ": no room for its 2.0 MiB disk reserve: 1.0 MiB free on its volume " +
		"(write " + filepath.Join(data, "FERRY.RESERVE") + ": no space left on device); free space there, or start with a smaller reserve: " +
		"--disk-reserve of ferry server, [embedded] disk_reserve of ferry run (0 turns the reserve off)"
	if err == nil || err.Error() != want {
		t.Fatalf("ferry server --disk-reserve 2MiB: %v\nwant: %s", err, want)
	}
	for _, bad := range []string{"level=ERROR", "level=WARN", "database does not exist"} {
		if strings.Contains(out.String(), bad) {
			t.Fatalf("output has %q besides the one error:\n%s", bad, out.String())
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out2 syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, &out2, "512KiB") }()
	testkit.WaitFor(t, "ferry server listening", func() bool { return strings.Contains(out2.String(), "iggy server listening") })
	if fi, err := os.Stat(filepath.Join(data, "FERRY.RESERVE")); err != nil || fi.Size() != 512<<10 {
		t.Fatalf("reserve of --disk-reserve 512KiB: %v, %v", fi, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ferry server --disk-reserve 512KiB: %v\n%s", err, out2.String())
	}
}
