package ferrycli

import (
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/server"
)

// TestParseDiskReserve: --disk-reserve and [embedded] disk_reserve read sizes in binary
// and decimal units; 0 turns the reserve off (the server's -1); anything else is an
// error quoting the value.
func TestParseDiskReserve(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"64MiB", 64 << 20}, {"512 KiB", 512 << 10}, {"1GB", 1e9}, {"2m", 2 << 20}, {"4096", 4096}, {"1.5MiB", 3 << 19},
		{"0", -1}, {"0MiB", -1},
	} {
		if got, err := parseDiskReserve(tc.in); err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "big", "-1MiB", "12 parsecs", "1e3"} {
		_, err := parseDiskReserve(in)
		if want := `"` + in + `": want a size such as "64MiB", "512KiB" or "0" (no reserve)`; err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", in, err, want)
		}
	}
	var cfg server.Config
	if err := applyEmbeddedLimits(config.Embedded{DiskReserve: "0"}, &cfg); err != nil || cfg.DiskReserve != -1 {
		t.Fatalf("disk_reserve 0: %d, %v", cfg.DiskReserve, err)
	}
	if err := applyEmbeddedLimits(config.Embedded{DiskReserve: "8MiB"}, &cfg); err != nil || cfg.DiskReserve != 8<<20 {
		t.Fatalf("disk_reserve 8MiB: %d, %v", cfg.DiskReserve, err)
	}
	err := applyEmbeddedLimits(config.Embedded{DiskReserve: "lots"}, &cfg)
	if want := `embedded.disk_reserve: "lots": want a size such as "64MiB", "512KiB" or "0" (no reserve)`; err == nil || err.Error() != want {
		t.Fatalf("disk_reserve lots: %v, want %s", err, want)
	}
}
