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
// interval; at once after a wake for urgent partitions (paused, or half their
// max_uncommitted used); soon after a wake for after_consuming partitions, at most once
// per minGap (a store shares the member connection with the polls, one request at a time,
// so storing after every batch would halve small-batch throughput); and in a final flush
// at revocation and shutdown. A failed store is retried with backoff and never
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
	minGap  time.Duration // pacing of after_consuming ("soon") stores
	// lastSoon is when the last paced store was written; guarded by flushMu.
	lastSoon time.Time

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
		onResume: onResume, wakeCh: make(chan struct{}, 1), parts: map[uint32]*tracker{},
		minGap: min(interval, defaultSoonGap)}
}

// defaultSoonGap is the longest an after_consuming success waits for its store (unless the
// commit interval is shorter): the redelivery window after a crash.
const defaultSoonGap = 10 * time.Millisecond

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
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()
	soonArmed := false
	for {
		var err error
		var wait time.Duration
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			err = l.flush(ctx, l.snapshot())
		case <-retry.C:
			err = l.flush(ctx, l.snapshot())
		case <-soon.C:
			soonArmed = false
			wait, err = l.flushUrgent(ctx)
		case <-l.wakeCh:
			l.mu.Lock()
			backingOff := l.failures > 0
			l.mu.Unlock()
			if backingOff {
				continue // the retry timer is armed; do not hammer a failing store
			}
			wait, err = l.flushUrgent(ctx)
		}
		if wait > 0 && !soonArmed {
			soon.Reset(wait)
			soonArmed = true
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

// flushUrgent stores what cannot wait for the interval: urgent partitions now, and
// after_consuming partitions when minGap has passed since the last such store. It returns
// how long until the deferred ones are due (0 = none deferred) and the first store error.
func (l *commitLoop) flushUrgent(ctx context.Context) (time.Duration, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushLocked(ctx, l.snapshot(), true)
}

// flush stores the pending offset of each of parts. It returns the first store error; the
// other partitions are still attempted.
func (l *commitLoop) flush(ctx context.Context, parts []partTracker) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	_, err := l.flushLocked(ctx, parts, false)
	return err
}

func (l *commitLoop) flushLocked(ctx context.Context, parts []partTracker, urgentOnly bool) (wait time.Duration, firstErr error) {
	now := time.Now()
	soonDue := now.Sub(l.lastSoon) >= l.minGap
	for _, pt := range parts {
		off, ok, urgent := pt.t.take()
		if !ok {
			continue
		}
		if urgentOnly && !urgent {
			if !pt.t.flushEach {
				continue
			}
			if !soonDue {
				wait = l.minGap - now.Sub(l.lastSoon)
				continue
			}
		}
		if pt.t.flushEach {
			l.lastSoon = now
		}
		if err := l.store(ctx, pt.partition, off); err != nil {
			// A store cut short by our own stop (ctx ended) is not a failed store: its
			// offset stays pending and the final flush writes it.
			if ctx.Err() == nil {
				l.counters.StoreErrors.Add(1)
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
	return wait, firstErr
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
		err := l.flush(ctx, parts)
		if err == nil {
			return nil
		}
		if !sleep(ctx, l.backoff.Delay(n)) {
			return errors.Join(err, ctx.Err())
		}
	}
}
