package server

import (
	"sync"
	"time"
)

// loginThrottle delays login attempts after failed ones, on two levels, so that one
// guesser cannot lock everyone behind its address out:
//
//   - Per (IP address, user name): the attempt after n consecutive failures of the
//     pair waits until base·2^(n-1) (capped at max) has passed since the pair's last
//     failure. Every attempt of the pair waits, the right password too: the server
//     cannot tell a right password from a guess without checking it, and checking
//     it at once would let guesses run at full speed. A success resets the pair.
//   - Per IP address, with a higher ceiling: once more than ipNames user names of the
//     address have failures on record (a guesser spraying names), every attempt from
//     the address waits the same schedule, counted on the names beyond ipNames, from
//     the address's last failure. A success does not clear the address (a guesser
//     holding one valid account could otherwise reset it); names are forgotten.
//
// A failure is forgotten forget after it happened (a pair's count restarts, a name
// no longer counts for its address), so old typos never add up.
type loginThrottle struct {
	base, max time.Duration
	ipNames   int
	forget    time.Duration
	now       func() time.Time

	mu    sync.Mutex
	pairs map[throttleKey]*throttleEntry
	ips   map[string]*ipEntry
}

type throttleKey struct{ ip, user string }

type throttleEntry struct {
	failures int
	last     time.Time
}

// ipEntry is an address's user names with failures on record (their last failure).
type ipEntry struct {
	names map[string]time.Time
	last  time.Time
}

const (
	// throttleEntries caps the pairs and the addresses remembered; past it, entries
	// whose delay has passed are forgotten.
	throttleEntries = 100_000
	// maxThrottledName caps the bytes of a user name used as a key: longer names are
	// invalid anyway (at most 50 bytes) and share one entry.
	maxThrottledName = 64
	// maxIPNames caps the names remembered per address: past it the address is
	// throttled at its cap anyway.
	maxIPNames = 1024
)

func newLoginThrottle(base, maxDelay time.Duration, ipNames int, now func() time.Time) *loginThrottle {
	return &loginThrottle{
		base: base, max: maxDelay, ipNames: ipNames, forget: max(time.Minute, 2*maxDelay), now: now,
		pairs: map[throttleKey]*throttleEntry{}, ips: map[string]*ipEntry{},
	}
}

func throttleKeyOf(ip, user string) throttleKey {
	if len(user) > maxThrottledName {
		user = user[:maxThrottledName]
	}
	return throttleKey{ip, user}
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

// wait returns how long an attempt from ip as user must still wait now: the longer
// of the pair's and the address's delays.
func (t *loginThrottle) wait(ip, user string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var until time.Time
	if e := t.pairLocked(throttleKeyOf(ip, user), now); e != nil {
		until = e.last.Add(t.delayAfter(e.failures))
	}
	if e := t.ips[ip]; e != nil {
		if n := t.namesLocked(e, now); n > t.ipNames {
			until = later(until, e.last.Add(t.delayAfter(n-t.ipNames)))
		}
	}
	return max(0, until.Sub(now))
}

// failed records a failed attempt from ip as user and returns the delay now imposed
// on the pair's next attempt.
func (t *loginThrottle) failed(ip, user string) time.Duration {
	if t.base <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	k := throttleKeyOf(ip, user)
	e := t.pairLocked(k, now)
	if e == nil {
		if len(t.pairs) >= throttleEntries {
			t.pruneLocked(now)
		}
		e = &throttleEntry{}
		t.pairs[k] = e
	}
	e.failures++
	e.last = now
	ie := t.ips[ip]
	if ie == nil {
		ie = &ipEntry{names: map[string]time.Time{}}
		t.ips[ip] = ie
	}
	if _, ok := ie.names[k.user]; ok || len(ie.names) < maxIPNames {
		ie.names[k.user] = now
	}
	ie.last = now
	return t.delayAfter(e.failures)
}

// succeeded forgets the failures of ip as user; the address keeps its other names.
func (t *loginThrottle) succeeded(ip, user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := throttleKeyOf(ip, user)
	delete(t.pairs, k)
	if e := t.ips[ip]; e != nil {
		delete(e.names, k.user)
		if len(e.names) == 0 {
			delete(t.ips, ip)
		}
	}
}

// pairLocked returns the pair's entry, nil when it has none or its last failure is
// forgotten.
func (t *loginThrottle) pairLocked(k throttleKey, now time.Time) *throttleEntry {
	e := t.pairs[k]
	if e != nil && !now.Before(e.last.Add(t.forget)) {
		delete(t.pairs, k)
		return nil
	}
	return e
}

// namesLocked counts e's names whose failures are not forgotten, dropping the others.
func (t *loginThrottle) namesLocked(e *ipEntry, now time.Time) int {
	for name, last := range e.names {
		if !now.Before(last.Add(t.forget)) {
			delete(e.names, name)
		}
	}
	return len(e.names)
}

// pruneLocked forgets the pairs and addresses whose delay has passed; if none has, it
// forgets all (an attacker with that many addresses is not held back by the maps
// anyway).
func (t *loginThrottle) pruneLocked(now time.Time) {
	for k, e := range t.pairs {
		if !now.Before(e.last.Add(t.delayAfter(e.failures))) {
			delete(t.pairs, k)
		}
	}
	if len(t.pairs) >= throttleEntries {
		clear(t.pairs)
	}
	for ip, e := range t.ips {
		if n := t.namesLocked(e, now); n <= t.ipNames || !now.Before(e.last.Add(t.delayAfter(n-t.ipNames))) {
			delete(t.ips, ip)
		}
	}
	if len(t.ips) >= throttleEntries {
		clear(t.ips)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
