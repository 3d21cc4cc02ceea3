package testkit

import (
	"fmt"
	"testing"
	"time"
)

// Patience bounds every wait of the kit. It is a bound for a loaded 2-core machine running
// the tests under -race, not an expectation of speed: a condition that holds at all holds
// within milliseconds in a package's own tests. A test package that drives whole processes
// through long runs (tests/e2e: soaks under SIGKILL, drains of tens of thousands of
// messages) raises it once in its TestMain, before any test runs; it is never changed per
// call, and a wait that asserts a latency measures it instead of shortening the bound.
var Patience = 30 * time.Second

// pollEvery is how often a condition is asked again.
const pollEvery = 2 * time.Millisecond

// WaitFor polls cond until it holds; after Patience it fails the test, saying what it
// waited for ("timed out after 30s waiting for <what>"). Call it on the test's goroutine;
// elsewhere use Eventually.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if err := Eventually(what, cond); err != nil {
		t.Fatal(err)
	}
}

// Eventually polls cond until it holds and returns nil, or returns an error saying what it
// waited for once Patience has passed. It does not touch a testing.T, so goroutines other
// than the test's may call it and report the error their own way.
func Eventually(what string, cond func() bool) error {
	return eventually(Patience, what, cond)
}

func eventually(patience time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", patience, what)
		}
		time.Sleep(pollEvery)
	}
	return nil
}

// MaxQuiet bounds Quiet: a longer quiet period makes the suite slower without making the
// check stronger.
const MaxQuiet = 2 * time.Second

// Quiet checks that still keeps holding for d: it asks still every few milliseconds and
// fails the test at the first false ("<what> changed within <d>"), so an event that comes
// early is caught as soon as it comes. d must be at most MaxQuiet.
//
// Quiet is for the checks that something does NOT happen and no positive signal exists to
// wait for instead (no counter, hook or log line marks the moment after which it could no
// longer happen). A caller says in a comment why no such signal exists. An event that would
// come only after d is not caught: d is chosen well past the time the event would take if
// the code were wrong.
func Quiet(t testing.TB, d time.Duration, what string, still func() bool) {
	t.Helper()
	if d <= 0 || d > MaxQuiet {
		t.Fatalf("testkit.Quiet(%q): period %v outside (0, %v]", what, d, MaxQuiet)
	}
	end := time.Now().Add(d)
	for {
		if !still() {
			t.Fatalf("%s changed within %v", what, d)
		}
		if !time.Now().Before(end) {
			return
		}
		time.Sleep(min(pollEvery, time.Until(end)))
	}
}
