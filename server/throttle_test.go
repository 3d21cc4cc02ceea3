package server_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// TestLoginDelaySchedule: the delay after n failures doubles from LoginFailureDelay and
// stops at LoginMaxDelay; the defaults are 100ms and 5s.
func TestLoginDelaySchedule(t *testing.T) {
	s, err := server.New(server.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for n, w := range want {
		if got := server.LoginDelay(s, n); got != w {
			t.Errorf("after %d failures: %v, want %v", n, got, w)
		}
	}
	if got := server.LoginDelay(s, 200); got != 5*time.Second {
		t.Errorf("after 200 failures: %v, want 5s", got)
	}
}

// TestWrongPasswordsThrottled is issue 14's guessing defect: 200 wrong passwords from
// one address for one user are each recorded and each makes the pair's next attempt
// wait the schedule's delay (kept tiny here); a success resets the pair.
func TestWrongPasswordsThrottled(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.LoginFailureDelay, c.LoginMaxDelay = time.Microsecond, 50*time.Microsecond
	}))
	c := dial(t, s)
	for i := range 200 {
		if _, err := c.login(servertest.Username, "wrong-password"); evictionReason(err) != wire.EvictionInvalidCredentials {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if n := server.LoginFailures(s, "127.0.0.1", servertest.Username); n != 200 {
		t.Fatalf("failures recorded %d, want 200", n)
	}
	if d := server.LoginDelay(s, 200); d != 50*time.Microsecond {
		t.Fatalf("delay after 200 failures %v, want the 50µs cap", d)
	}
	if _, err := c.login(servertest.Username, servertest.Password); err != nil {
		t.Fatalf("right password after the failures: %v", err)
	}
	if n := server.LoginFailures(s, "127.0.0.1", servertest.Username); n != 0 {
		t.Fatalf("failures after a success %d, want 0", n)
	}
}

// TestPasswordHashesBounded: password checks run at most MaxConcurrentLogins at once,
// and a ping needs no slot, so while every slot is busy (guessers hashing) another
// client's ping is answered at once and the queued logins finish when slots free.
func TestPasswordHashesBounded(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxConcurrentLogins = 2
		// Cheap hashes: the gate is under test, not their cost, and 40 costly ones under
		// -race on a loaded machine outlasted the client's 30 s read deadline.
		c.PasswordIterations = 1_000
		c.LoginFailureDelay = -1 // this test is about the gate, not the delay
		// 40 hashes may take longer than the login timeout on a loaded machine (under
		// -race): the guessers never log in, so their connections would be closed.
		c.LoginTimeout = time.Hour
	}))
	release := server.HoldHashSlots(s)
	pinger := dial(t, s)
	var wg sync.WaitGroup
	done := make(chan struct{}, 8)
	for range 8 {
		g := dial(t, s)
		wg.Go(func() {
			for range 5 {
				if _, err := g.login(servertest.Username, "wrong-password"); evictionReason(err) != wire.EvictionInvalidCredentials {
					t.Errorf("guess: %v", err)
				}
			}
			done <- struct{}{}
		})
	}
	for range 50 {
		pinger.must(wire.PingRequest{}) // answered while every hash slot is held
	}
	select {
	case <-done:
		t.Fatal("a login finished while every hash slot was held")
	default:
	}
	release()
	wg.Wait()
	if p := server.HashPeak(s); p < 1 || p > 2 {
		t.Fatalf("peak concurrent hashes %d, want 1..2", p)
	}
}

// TestLoginThrottlePerUserName is issue 22's lock-out: guessing from one address
// delayed the right login from it by 4–5 s. Failures now delay their (address, user
// name) pair; another user name from the same address goes through at once until the
// address has more failing names than LoginUserNamesPerIP. The right password of a
// delayed pair still waits the pair's delay (documented). The clock is fake and the
// throttle's waits are recorded instead of slept, so every delay is asserted exactly.
func TestLoginThrottlePerUserName(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.LoginFailureDelay, c.LoginMaxDelay, c.LoginUserNamesPerIP = time.Second, 8*time.Second, 2
		c.Now = clock.Now
	}))
	if err := server.AddUser(s, "alice", "alice-password"); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	server.OnLoginWait(s, func(d time.Duration) {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
	})
	c := dial(t, s)
	// attempt logs in and checks the outcome and the delay imposed (0: none).
	attempt := func(user, pass string, wantOK bool, wantWait time.Duration) {
		t.Helper()
		mu.Lock()
		waits = nil
		mu.Unlock()
		_, err := c.login(user, pass)
		switch {
		case wantOK && err != nil:
			t.Fatalf("login %s: %v, want success", user, err)
		case !wantOK && evictionReason(err) != wire.EvictionInvalidCredentials:
			t.Fatalf("login %s: %v, want InvalidCredentials", user, err)
		}
		mu.Lock()
		got := waits
		mu.Unlock()
		var want []time.Duration
		if wantWait > 0 {
			want = []time.Duration{wantWait}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("login %s: waited %v, want %v", user, got, want)
		}
	}
	root := servertest.Username
	attempt(root, "guess-1", false, 0)
	attempt(root, "guess-2", false, time.Second)
	attempt(root, "guess-3", false, 2*time.Second)
	attempt("alice", "alice-password", true, 0) // another user: not delayed
	attempt(root, servertest.Password, true, 4*time.Second)
	if n := server.LoginFailures(s, "127.0.0.1", root); n != 0 {
		t.Fatalf("root's failures after its success: %d, want 0", n)
	}
	attempt(root, "guess-4", false, 0) // the pair starts again
	// Spraying names: the address's own ceiling (2 failing names) takes over.
	attempt("mallory", "guess", false, 0)
	attempt("trudy", "guess", false, 0) // a third failing name: past the ceiling
	attempt("alice", "alice-password", true, time.Second)
	attempt("victor", "guess", false, time.Second)
	attempt("alice", "alice-password", true, 2*time.Second)
	clock.Advance(1500 * time.Millisecond)
	attempt("alice", "alice-password", true, 500*time.Millisecond)
	// Failures are forgotten after max(1 minute, 2 × LoginMaxDelay).
	clock.Advance(time.Minute)
	attempt("alice", "alice-password", true, 0)
	attempt(root, "guess-5", false, 0)
	if n := server.LoginFailures(s, "127.0.0.1", "mallory"); n != 0 {
		t.Fatalf("mallory's failures a minute later: %d, want 0", n)
	}
}
