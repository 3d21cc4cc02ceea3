package server

import (
	"errors"
	"sync"
)

// replyBudget bounds the memory held, over all connections, by poll replies being
// built or waiting to be written (Config.MaxReplyBytes). A poll reserves before it
// reads and waits, first come first served, while the reservation does not fit; the
// reservation is released once its reply was written. Bytes already allocated are
// accounted even past the limit (force), so the polls after them wait longer
// rather than the count being wrong.
type replyBudget struct {
	limit int64

	mu      sync.Mutex
	used    int64
	peak    int64 // the most ever reserved at once (tests and measurements)
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when granted
}

// errServerClosing ends a poll that waited for the reply budget when Close began.
var errServerClosing = errors.New("server: closing")

func newReplyBudget(limit int64) *replyBudget { return &replyBudget{limit: limit} }

// acquire reserves n bytes (at most the limit: callers clamp), waiting behind earlier
// waiters while they do not fit. It gives up (false) if quit closes first.
func (b *replyBudget) acquire(n int64, quit <-chan struct{}) bool {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.takeLocked(n)
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-quit:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: hand it back
		b.used -= n
		b.grantLocked()
	default:
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.grantLocked() // the head may have changed
	}
	return false
}

// adjust changes a reservation from held to n bytes: a growth is taken at once even
// past the limit (the memory exists already), a shrink is released.
func (b *replyBudget) adjust(held, n int64) {
	switch {
	case n > held:
		b.mu.Lock()
		b.takeLocked(n - held)
		b.mu.Unlock()
	case n < held:
		b.release(held - n)
	}
}

// release returns n reserved bytes and wakes the waiters that now fit, in order.
func (b *replyBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *replyBudget) takeLocked(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// grantLocked wakes waiters from the head of the queue while they fit; a waiter that
// does not fit keeps the ones behind it waiting, so a large poll is not starved by
// small ones.
func (b *replyBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.takeLocked(w.n)
		close(w.ready)
	}
}

// state returns the bytes reserved, the peak and the count of waiting polls.
func (b *replyBudget) state() (used, peak int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, len(b.waiters)
}
