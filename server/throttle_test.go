package server_test

import (
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
// one address are each recorded and each makes the address's next attempt wait the
// schedule's delay (kept tiny here); a success resets the address.
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
	if n := server.LoginFailures(s, "127.0.0.1"); n != 200 {
		t.Fatalf("failures recorded %d, want 200", n)
	}
	if d := server.LoginDelay(s, 200); d != 50*time.Microsecond {
		t.Fatalf("delay after 200 failures %v, want the 50µs cap", d)
	}
	if _, err := c.login(servertest.Username, servertest.Password); err != nil {
		t.Fatalf("right password after the failures: %v", err)
	}
	if n := server.LoginFailures(s, "127.0.0.1"); n != 0 {
		t.Fatalf("failures after a success %d, want 0", n)
	}
}

// TestPasswordHashesBounded: password checks run at most MaxConcurrentLogins at once,
// and a ping needs no slot, so while every slot is busy (guessers hashing) another
// client's ping is answered at once and the queued logins finish when slots free.
func TestPasswordHashesBounded(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxConcurrentLogins = 2
		c.PasswordIterations = 20_000
		c.LoginFailureDelay = -1 // this test is about the gate, not the delay
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
