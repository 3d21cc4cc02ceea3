package server

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the server's defences of shared resources against clients that do
// not (yet) authenticate: the login throttle, the bound on concurrent password hashes
// and the budget of memory buffered for frames still arriving. docs/architecture.md
// ("Embedded server: limits") describes them.

// loginThrottle delays login attempts from an IP address after failed ones: the
// attempt after n consecutive failures waits until base·2^(n-1) (capped at max) has
// passed since the last failure. A success resets the address.
type loginThrottle struct {
	base, max time.Duration
	now       func() time.Time

	mu    sync.Mutex
	addrs map[string]*throttleEntry
}

type throttleEntry struct {
	failures int
	last     time.Time
}

// throttleEntries caps the addresses remembered; past it, addresses whose delay has
// passed are forgotten.
const throttleEntries = 100_000

func newLoginThrottle(base, maxDelay time.Duration, now func() time.Time) *loginThrottle {
	return &loginThrottle{base: base, max: maxDelay, now: now, addrs: map[string]*throttleEntry{}}
}

// delayAfter is the wait imposed after n consecutive failures (0 for n == 0).
func (t *loginThrottle) delayAfter(n int) time.Duration {
	if n <= 0 || t.base <= 0 {
		return 0
	}
	d := t.base
	for i := 1; i < n && d < t.max; i++ {
		d *= 2
	}
	return min(d, t.max)
}

// wait returns how long an attempt from ip must still wait now.
func (t *loginThrottle) wait(ip string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.addrs[ip]
	if e == nil {
		return 0
	}
	return max(0, e.last.Add(t.delayAfter(e.failures)).Sub(t.now()))
}

// failed records a failed attempt from ip and returns the delay now imposed on it.
func (t *loginThrottle) failed(ip string) time.Duration {
	if t.base <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.addrs[ip]
	if e == nil {
		if len(t.addrs) >= throttleEntries {
			t.pruneLocked(now)
		}
		e = &throttleEntry{}
		t.addrs[ip] = e
	}
	e.failures++
	e.last = now
	return t.delayAfter(e.failures)
}

// succeeded forgets ip's failures.
func (t *loginThrottle) succeeded(ip string) {
	t.mu.Lock()
	delete(t.addrs, ip)
	t.mu.Unlock()
}

// pruneLocked forgets the addresses whose delay has passed; if none has, it forgets
// all (an attacker with that many addresses is not held back by the map anyway).
func (t *loginThrottle) pruneLocked(now time.Time) {
	for ip, e := range t.addrs {
		if !now.Before(e.last.Add(t.delayAfter(e.failures))) {
			delete(t.addrs, ip)
		}
	}
	if len(t.addrs) >= throttleEntries {
		clear(t.addrs)
	}
}

// hashGate bounds the password hashes computed at once.
type hashGate struct {
	slots          chan struct{}
	inFlight, peak atomic.Int64 // for tests: the most hashes ever run at once
}

func newHashGate(n int) *hashGate { return &hashGate{slots: make(chan struct{}, n)} }

// run runs fn holding a slot; it gives up (ok false) if quit closes first.
func (g *hashGate) run(quit <-chan struct{}, fn func()) (ok bool) {
	select {
	case g.slots <- struct{}{}:
	case <-quit:
		return false
	}
	n := g.inFlight.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	defer func() {
		g.inFlight.Add(-1)
		<-g.slots
	}()
	fn()
	return true
}

// errPendingFull closes a connection whose frame would exceed Config.MaxPendingBytes.
var errPendingFull = errors.New("server: memory for incoming frames exhausted (MaxPendingBytes)")

// bodyChunk is the first piece read of a large frame body; pieces then double, up to
// maxBodyChunk, as the bytes arrive, so memory follows what a client sent, not what
// it declared.
const (
	bodyChunk    = 64 << 10
	maxBodyChunk = 4 << 20
)

// readBody reads an n-byte frame body. A body no larger than
// MaxUnauthenticatedFrame (a login, a ping, most requests) is read at once: such
// bodies are bounded by the count of connections, and a full budget must never
// lock out logins. A larger one is read in growing pieces, each reserved from the
// server-wide budget of pending bytes (Config.MaxPendingBytes) before it is
// allocated, and joined once complete; the reservation is returned when the body is
// read or the read fails.
func (c *conn) readBody(n int) ([]byte, error) {
	s := c.s
	if n <= int(s.cfg.MaxUnauthenticatedFrame) {
		buf := make([]byte, n)
		_, err := io.ReadFull(c.nc, buf)
		return buf, err
	}
	var reserved int64
	defer func() { s.pending.Add(-reserved) }()
	var pieces [][]byte
	got := 0
	for got < n {
		size := min(n-got, max(bodyChunk, min(got, maxBodyChunk)))
		if s.pending.Add(int64(size)) > s.cfg.MaxPendingBytes {
			s.pending.Add(-int64(size))
			return nil, errPendingFull
		}
		reserved += int64(size)
		p := make([]byte, size)
		if _, err := io.ReadFull(c.nc, p); err != nil {
			return nil, err
		}
		pieces = append(pieces, p)
		got += size
	}
	if len(pieces) == 1 {
		return pieces[0], nil
	}
	buf := make([]byte, 0, n)
	for _, p := range pieces {
		buf = append(buf, p...)
	}
	return buf, nil
}

// remoteIP is the address a connection's per-IP limit and login throttle key on.
func remoteIP(nc net.Conn) string {
	a := nc.RemoteAddr()
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// sleepOrQuit waits d; false if the server began closing first.
func sleepOrQuit(quit <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-quit:
		return false
	}
}
