package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// storeFunc writes a consumer-group offset: the topic consumer's Commit.
type storeFunc func(ctx context.Context, partition uint32, offset uint64) error

// commitLoop writes the pending offsets of one topic consumer's partitions: on the commit
// interval, soon after a wake (after_consuming successes, paused partitions), and in a final
// flush at revocation and shutdown. A failed store is retried with backoff and never
// forgotten: the offset stays pending in its tracker until stored or superseded.
//
// One flush runs at a time (flushMu), so stores of one partition are never concurrent.
type commitLoop struct {
	store    storeFunc
	interval time.Duration
	backoff  Backoff // MaxRetries is ignored: stores are retried until stop
	log      *slog.Logger
	counters *Counters
	onResume func(partition uint32) // called when a paused partition may be polled again

	wakeCh  chan struct{}
	flushMu sync.Mutex

	mu       sync.Mutex
	parts    map[uint32]*tracker
	failures int // consecutive failed flushes
}

func newCommitLoop(store storeFunc, interval time.Duration, b Backoff, c *Counters, log *slog.Logger, onResume func(uint32)) *commitLoop {
	if interval <= 0 {
		interval = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	if c == nil {
		c = new(Counters)
	}
	return &commitLoop{store: store, interval: interval, backoff: b, log: log, counters: c,
		onResume: onResume, wakeCh: make(chan struct{}, 1), parts: map[uint32]*tracker{}}
}

// wake asks the loop to flush urgent partitions soon. It never blocks.
func (l *commitLoop) wake() {
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

// track adds a partition's tracker to the loop.
func (l *commitLoop) track(partition uint32, t *tracker) {
	l.mu.Lock()
	l.parts[partition] = t
	l.mu.Unlock()
}

// untrack removes a partition from the periodic flushes and returns its tracker (nil if
// none); the caller then writes its last pending offset with [commitLoop.flushFinal].
func (l *commitLoop) untrack(partition uint32) *tracker {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.parts[partition]
	delete(l.parts, partition)
	return t
}

// run flushes until ctx ends. It does not flush at exit: the owner calls flushFinal.
func (l *commitLoop) run(ctx context.Context) {
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			err = l.flush(ctx, l.snapshot(), false)
		case <-retry.C:
			err = l.flush(ctx, l.snapshot(), false)
		case <-l.wakeCh:
			l.mu.Lock()
			backingOff := l.failures > 0
			l.mu.Unlock()
			if backingOff {
				continue // the retry timer is armed; do not hammer a failing store
			}
			err = l.flush(ctx, l.snapshot(), true)
		}
		l.mu.Lock()
		if err != nil && ctx.Err() == nil {
			l.failures++
			retry.Reset(l.backoff.Delay(l.failures))
		} else if err == nil {
			l.failures = 0
		}
		l.mu.Unlock()
	}
}

type partTracker struct {
	partition uint32
	t         *tracker
}

func (l *commitLoop) snapshot() []partTracker {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]partTracker, 0, len(l.parts))
	for p, t := range l.parts {
		out = append(out, partTracker{p, t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].partition < out[j].partition })
	return out
}

// flush stores the pending offset of each of parts (only the urgent ones when urgentOnly).
// It returns the first store error; the other partitions are still attempted.
func (l *commitLoop) flush(ctx context.Context, parts []partTracker, urgentOnly bool) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	var firstErr error
	for _, pt := range parts {
		off, ok, urgent := pt.t.take()
		if !ok || (urgentOnly && !urgent) {
			continue
		}
		if err := l.store(ctx, pt.partition, off); err != nil {
			l.counters.StoreErrors.Add(1)
			if ctx.Err() == nil {
				l.log.Warn("offset store failed; will retry", "partition", pt.partition, "offset", off, "error", err)
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("store offset %d of partition %d: %w", off, pt.partition, err)
			}
			continue
		}
		if pt.t.stored(off) && l.onResume != nil {
			l.onResume(pt.partition)
		}
	}
	return firstErr
}

// flushFinal writes what is pending in trackers (nil = every tracked partition), retrying
// with backoff until it succeeds or ctx ends. Used at revocation and shutdown.
func (l *commitLoop) flushFinal(ctx context.Context, trackers map[uint32]*tracker) error {
	var parts []partTracker
	if trackers == nil {
		parts = l.snapshot()
	} else {
		for p, t := range trackers {
			parts = append(parts, partTracker{p, t})
		}
	}
	for n := 1; ; n++ {
		err := l.flush(ctx, parts, false)
		if err == nil {
			return nil
		}
		if !sleep(ctx, l.backoff.Delay(n)) {
			return errors.Join(err, ctx.Err())
		}
	}
}
