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

// bodyChunk is the first allocation for a frame body; the buffer then doubles as the
// bytes arrive, so memory follows what a client sent, not what it declared.
const bodyChunk = 64 << 10

// readBody reads an n-byte frame body, growing its buffer as data arrives and
// reserving every growth from the server-wide budget of pending bytes; the
// reservation is returned once the body is read (or the read fails).
func (c *conn) readBody(n int) ([]byte, error) {
	s := c.s
	var reserved int64
	defer func() { s.pending.Add(-reserved) }()
	var buf []byte
	for len(buf) < n {
		want := min(n, max(bodyChunk, 2*cap(buf)))
		grow := int64(want - cap(buf))
		if s.pending.Add(grow) > s.cfg.MaxPendingBytes {
			s.pending.Add(-grow)
			return nil, errPendingFull
		}
		reserved += grow
		next := make([]byte, len(buf), want)
		copy(next, buf)
		buf = next
		m, err := io.ReadFull(c.nc, buf[len(buf):want])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
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
