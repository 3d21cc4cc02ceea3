package server

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// errHashQueueFull refuses a login whose client address already has
// Config.MaxLoginsPerIP password checks running or waiting.
var errHashQueueFull = errors.New("server: too many logins of this IP address waiting for a password check (MaxLoginsPerIP)")

// hashGate bounds the password hashes computed at once (each is a deliberate ~100 ms
// of CPU) and shares them fairly between client addresses:
//
//   - A free slot is taken at once; otherwise the attempt waits in its address's
//     queue, and a slot that frees goes to the address whose turn it is: addresses
//     take turns, one hash each, so an address flooding logins delays another
//     address's login by at most one of its own hashes per slot, however many it
//     queued.
//   - An address may hold at most perIP attempts, running or waiting; one more is
//     refused at once (errHashQueueFull), without a hash.
//   - A waiting attempt gives up when its context ends (its connection closed, its
//     login deadline passed, the server closing): the hash of a client that is gone
//     is never computed.
//
// Checks that cost no hash (a remembered password, the throttle, a token) never
// come here.
type hashGate struct {
	perIP int

	mu   sync.Mutex
	free int                // slots nobody holds; > 0 only while nobody waits
	ips  map[string]*ipTurn // addresses holding or waiting for a slot
	ring *list.List         // of *ipTurn with waiters, the next turn first

	// For tests and the logs.
	inFlight, peak atomic.Int64 // hashes running now; the most ever at once
	computed       atomic.Int64 // hashes run
	abandoned      atomic.Int64 // waits given up because their context ended
	refused        atomic.Int64 // attempts refused by the per-address cap
	onGrant        atomic.Pointer[func(ip string)]
}

// ipTurn is one address's share of the gate.
type ipTurn struct {
	ip      string
	held    int           // attempts running or waiting
	waiting []*hashWaiter // first come first served within the address
	elem    *list.Element // in hashGate.ring while waiting is not empty
}

type hashWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // under hashGate.mu: the slot is the waiter's
}

func newHashGate(slots, perIP int) *hashGate {
	return &hashGate{perIP: perIP, free: slots, ips: map[string]*ipTurn{}, ring: list.New()}
}

// run runs fn holding a slot, for a client at ip. It returns errHashQueueFull when ip
// is at its cap, and context.Cause(ctx) when ctx ends before a slot was granted (fn
// not run).
func (g *hashGate) run(ctx context.Context, ip string, fn func()) error {
	if err := g.acquire(ctx, ip); err != nil {
		return err
	}
	defer g.release(ip)
	if hook := g.onGrant.Load(); hook != nil {
		(*hook)(ip)
	}
	n := g.inFlight.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	defer g.inFlight.Add(-1)
	g.computed.Add(1)
	fn()
	return nil
}

func (g *hashGate) acquire(ctx context.Context, ip string) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	g.mu.Lock()
	t := g.ips[ip]
	if t == nil {
		t = &ipTurn{ip: ip}
		g.ips[ip] = t
	}
	if t.held >= g.perIP {
		g.mu.Unlock()
		g.refused.Add(1)
		return errHashQueueFull
	}
	t.held++
	if g.free > 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	w := &hashWaiter{ready: make(chan struct{})}
	t.waiting = append(t.waiting, w)
	if t.elem == nil {
		t.elem = g.ring.PushBack(t)
	}
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.abandoned.Add(1)
	g.mu.Lock()
	if w.granted {
		// Granted as ctx ended: pass the slot on.
		g.mu.Unlock()
		g.release(ip)
		return context.Cause(ctx)
	}
	for i, o := range t.waiting {
		if o == w {
			t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
			break
		}
	}
	if len(t.waiting) == 0 {
		g.ring.Remove(t.elem)
		t.elem = nil
	}
	g.dropLocked(t)
	g.mu.Unlock()
	return context.Cause(ctx)
}

// release gives up a slot ip held: to the next address's oldest waiter, else free.
func (g *hashGate) release(ip string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropLocked(g.ips[ip])
	g.passLocked()
}

// dropLocked ends one attempt of t.
func (g *hashGate) dropLocked(t *ipTurn) {
	if t.held--; t.held == 0 {
		delete(g.ips, t.ip)
	}
}

// passLocked hands a freed slot to the address whose turn it is (which then goes to
// the back of the ring if it has more waiting), or frees it.
func (g *hashGate) passLocked() {
	front := g.ring.Front()
	if front == nil {
		g.free++
		return
	}
	t := front.Value.(*ipTurn)
	w := t.waiting[0]
	t.waiting = t.waiting[1:]
	g.ring.Remove(front)
	t.elem = nil
	if len(t.waiting) > 0 {
		t.elem = g.ring.PushBack(t)
	}
	w.granted = true
	close(w.ready)
}

// hold takes every free slot until release (idempotent) is called (tests: a gate whose
// hashes are all busy).
func (g *hashGate) hold() (release func()) {
	g.mu.Lock()
	n := g.free
	g.free = 0
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			for range n {
				g.passLocked()
			}
		})
	}
}

// waiting is the count of attempts of ip waiting for a slot.
func (g *hashGate) waiting(ip string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.ips[ip]; t != nil {
		return len(t.waiting)
	}
	return 0
}
