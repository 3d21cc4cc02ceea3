package conformance_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryio/ferry/conformance"
	"github.com/ferryio/ferry/server/servertest"
)

// TestStorageFaultScenario runs storage-fault against Ferry: with the suite's embedded
// server refusing every write (the server's own fault, 4006), through a proxy answering
// 4006 in front of a server given with --server, and with upstream Iggy's code for a
// failed offset write (10006): every run passes with nothing lost or duplicated. A server
// that answers a full disk with 20 ResourceNotFound (Ferry's embedded server did, issue
// 22) makes the runtime drop its partition and poll it again for as long as the fault
// lasts: that run fails with more duplicates than messages unstored.
func TestStorageFaultScenario(t *testing.T) {
	modes := []string{conformance.AfterConsuming, conformance.SinkControlled}
	base := conformance.Config{Runtime: ferryRuntime(), Scenarios: []string{"storage-fault"}, Modes: conformance.AllModes}
	window := regexp.MustCompile(`\((\d+) messages unstored\)`)
	check := func(t *testing.T, res []conformance.Result, how string, pass bool) {
		t.Helper()
		if len(res) != len(modes) { // after_polling makes no offset stores: not run
			t.Fatalf("got %d results, want one per at-least-once mode", len(res))
		}
		for i, r := range res {
			if r.Scenario != "storage-fault" || r.Mode != modes[i] || !strings.Contains(r.Observed, how) {
				t.Errorf("result %d: %s/%s observed %q, want %q", i, r.Scenario, r.Mode, r.Observed, how)
			}
			m := window.FindStringSubmatch(r.Observed)
			if m == nil {
				t.Fatalf("%s: no unstored count in %q", r.Mode, r.Observed)
			}
			unstored, _ := strconv.Atoi(m[1])
			switch {
			case pass && (r.Verdict != conformance.Pass || r.Lost != 0 || r.Duplicated != 0):
				t.Errorf("%s: %s, lost %d, duplicated %d: %s", r.Mode, r.Verdict, r.Lost, r.Duplicated, r.Observed)
			case !pass && (r.Verdict != conformance.Fail || r.Lost != 0 || r.Duplicated <= unstored):
				t.Errorf("%s: %s, lost %d, duplicated %d (unstored %d), want a failure by duplicates: %s",
					r.Mode, r.Verdict, r.Lost, r.Duplicated, unstored, r.Observed)
			}
		}
	}
	t.Run("embedded server", func(t *testing.T) {
		check(t, run(t, base), "the embedded server refused every write; ", true)
	})
	t.Run("proxy", func(t *testing.T) {
		cfg := base
		cfg.Server = servertest.Start(t).Addr()
		check(t, run(t, cfg), "a proxy answered every offset store with 4006; ", true)
	})
	t.Run("upstream code", func(t *testing.T) {
		cfg := base
		cfg.StorageFaultCode = 10006
		check(t, run(t, cfg), "a proxy answered every offset store with 10006; ", true)
	})
	t.Run("not found", func(t *testing.T) {
		cfg := base
		cfg.StorageFaultCode = 20
		check(t, run(t, cfg), "a proxy answered every offset store with 20; ", false)
	})
}
