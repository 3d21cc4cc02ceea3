package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// TestGCPercent: a ferry process collects garbage at GOGC 400 unless GOGC is set, which
// wins (read from its own Prometheus metrics, the Go collector's go_gc_gogc_percent).
func TestGCPercent(t *testing.T) {
	dir := t.TempDir()
	iggyAddr := freeAddr(t)
	startFerry(t, "server", dir, nil, "server", "--addr", iggyAddr, "--data", filepath.Join(dir, "data"))
	gogc := regexp.MustCompile(`(?m)^go_gc_gogc_percent (\d+)$`)
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"default", nil, "400"},
		{"GOGC set", []string{"GOGC=150"}, "150"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(dir, tc.name)
			conns := filepath.Join(d, "connectors")
			apiAddr := freeAddr(t)
			if err := os.MkdirAll(conns, 0o755); err != nil { // no connectors: the process alone
				t.Fatal(err)
			}
			p := startFerry(t, "run "+tc.name, d, tc.env, "run", "--config", apiRuntimeConfig(t, d, conns, iggyAddr, apiAddr), "--progress", "0")
			api := apiClient{t: t, base: "http://" + apiAddr, key: apiKey}
			var m []string
			testkit.WaitFor(t, "the metrics", func() bool {
				if p.exited() {
					t.Fatalf("run exited: %v", p.err)
				}
				code, body, err := api.try(http.MethodGet, "/metrics", "")
				if err != nil || code != http.StatusOK {
					return false
				}
				m = gogc.FindStringSubmatch(string(body))
				return true
			})
			if m == nil || m[1] != tc.want {
				t.Fatalf("go_gc_gogc_percent %v, want %s", m, tc.want)
			}
			p.stop(10 * time.Second)
		})
	}
}
