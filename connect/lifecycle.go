package connect

import (
	"context"
	"sync"
	"time"
)

// lifecycle is the stop signalling shared by the Runtime, every sink runner and every
// source runner (docs/architecture.md, "Lifecycle of a connector"): a soft stop (take no
// new work, finish what is in flight), a hard stop (abandon what is in flight), and
// stopped. The soft stop turns into the hard stop by itself after timeout, so one
// timeout bounds the whole stop; 0 means it never does (the Runtime's: its caller's
// context bounds it).
//
// Safe for concurrent use; every method is idempotent.
type lifecycle struct {
	soft     context.Context // ends at the soft stop (and at the hard stop)
	hard     context.Context // ends at the hard stop
	stopSoft context.CancelFunc
	stopHard context.CancelFunc
	timeout  time.Duration
	done     chan struct{}

	mu       sync.Mutex
	timer    *time.Timer
	deadline time.Time
	finished bool
}

func newLifecycle(timeout time.Duration) *lifecycle {
	l := &lifecycle{timeout: timeout, done: make(chan struct{})}
	l.hard, l.stopHard = context.WithCancel(context.Background())
	l.soft, l.stopSoft = context.WithCancel(l.hard)
	return l
}

// Stop begins the soft stop; the hard stop follows timeout later (if not stopped by then).
func (l *lifecycle) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.soft.Err() != nil || l.finished {
		return
	}
	l.stopSoft()
	if l.timeout > 0 {
		l.deadline = time.Now().Add(l.timeout)
		l.timer = time.AfterFunc(l.timeout, l.stopHard)
	}
}

// Abandon is the hard stop, now.
func (l *lifecycle) Abandon() { l.stopHard() }

// Finish marks the stop complete: Done is closed and the contexts are released.
func (l *lifecycle) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return
	}
	l.finished = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.stopHard()
	close(l.done)
}

// Done is closed by Finish.
func (l *lifecycle) Done() <-chan struct{} { return l.done }

// Deadline is when the soft stop turns hard (zero before Stop, or without a timeout).
func (l *lifecycle) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// waitOrAbandon waits for ch to close unless the hard stop comes first; it reports
// whether ch closed (at once, when it already had).
func (l *lifecycle) waitOrAbandon(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-l.hard.Done():
		return false
	}
}
