package connect

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// The store loop of a partition table: the only writer of the group's offsets for its
// topic consumer. It takes what is due (nextStores), stores it one partition at a time —
// so one store is in flight per partition at most, and a fast-committing sink costs at
// most one store per partition per storeDelay — records each outcome (storeResult), and
// waits for the next due time or a signal from the table. Failure and backoff are per
// partition: a partition whose stores fail never delays another's, and a store refused
// for good releases that partition only.

// storeFunc writes the group's offset of a partition, of incarnation life of the topic
// (memberConsumer.Store).
type storeFunc func(ctx context.Context, life uint64, partition uint32, offset uint64) error

// runStores runs until ctx ends (the hard stop) or the table, closed, has nothing left
// to store.
func (t *partitionTable) runStores(ctx context.Context, store storeFunc) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer t.dropTraces()
	for ctx.Err() == nil {
		jobs, wait, finished := t.nextStores(time.Now())
		if finished {
			return
		}
		for _, j := range jobs {
			j.started = time.Now()
			err := store(ctx, j.p.life, j.p.id, j.offset)
			stopping := err != nil && ctx.Err() != nil
			t.storeResult(j, err, err != nil && storeRefused(err), stopping, time.Now())
		}
		if len(jobs) > 0 {
			continue
		}
		timer.Stop()
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		case <-timer.C:
		}
	}
}

// storeJob is one offset store the store loop performs.
type storeJob struct {
	p      *partition
	offset uint64
	doneAt time.Time
	// started is when the store began (the store span of a traced batch starts there).
	started time.Time
	final   bool // a drain's last attempt: p is released after it, whatever the outcome
}

// nextStores takes the stores due at now (marking them in flight), releases drains
// whose deadline passed with nothing left to store, and returns how long until the next
// store or deadline is due (-1: none; wait for a signal). finished is true once the table
// is closed and nothing is left to store: the store loop then ends.
func (t *partitionTable) nextStores(now time.Time) (jobs []storeJob, wait time.Duration, finished bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	wait = -1
	soonest := func(at time.Time) {
		if d := at.Sub(now); wait < 0 || d < wait {
			wait = max(d, 0)
		}
	}
	pending := false
	for _, p := range t.parts {
		if p.inFlight {
			pending = true
			continue
		}
		expired := p.state == partDraining && !now.Before(p.drainUntil)
		if p.done <= p.stored {
			switch {
			case expired:
				t.releaseLocked(p, "drain deadline")
			case t.closed:
				t.releaseLocked(p, "sink stopped")
			case p.state == partDraining:
				soonest(p.drainUntil)
			}
			continue
		}
		pending = true
		if !expired && p.due.After(now) {
			soonest(p.due)
			if p.state == partDraining {
				soonest(p.drainUntil)
			}
			continue
		}
		jobs = append(jobs, storeJob{p: p, offset: p.done - 1, doneAt: p.doneAt, final: expired})
		p.inFlight, p.due, p.doneAt = true, time.Time{}, time.Time{}
	}
	slices.SortFunc(jobs, func(a, b storeJob) int { return cmp.Compare(a.p.id, b.p.id) })
	return jobs, wait, t.closed && !pending
}

// storeResult records the outcome of job. resume reports that the partition was paused
// and is resumed now (flow). refused reports whether err refuses the store for good (the
// partition is not ours any more, or the store would move the group's offset back).
// stopping is true when the store was cut short by the runtime's own stop: not a failure.
func (t *partitionTable) storeResult(job storeJob, err error, refused, stopping bool, now time.Time) (resume bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := job.p
	p.inFlight = false
	if err == nil { // stored in Iggy, even if p was released meanwhile
		t.counters.Stores.Add(1)
		if job.offset+1 > p.stored {
			t.counters.Committed.Add(job.offset + 1 - p.stored)
			p.stored = job.offset + 1
		}
		if len(p.traces) > 0 {
			t.storedTracesLocked(p, job.offset, job.started, now)
		}
	}
	if p.state == partReleased {
		return false
	}
	switch {
	case err == nil:
		if p.failures > 0 {
			t.log.Info("offset store succeeds again", "partition", p.id, "offset", job.offset, "failed_attempts", p.failures)
		}
		p.failures, p.storeErr = 0, nil
		t.counters.StoreLatency.observe(now.Sub(job.doneAt))
		if p.paused && p.polled-p.stored < t.policy.maxUncommitted {
			p.paused, resume = false, true
			if t.flow != nil && t.pollableLocked(p) {
				t.flow.Resume(p.id)
			}
		}
		if t.settleLocked(p) {
			return resume
		}
		if job.final {
			t.releaseLocked(p, "drain deadline")
			return resume
		}
	case stopping:
		p.doneAt = minTime(p.doneAt, job.doneAt)
		p.due = now // the final pass at close stores it, if there is one
		return false
	case refused:
		t.counters.StoresRefused.Add(1)
		t.log.Warn("offset store refused; the partition is released and its unstored offsets go to its owner",
			"partition", p.id, "offset", job.offset, "error", err)
		t.releaseLocked(p, "store refused")
		return false
	default:
		t.counters.StoreErrors.Add(1)
		p.failures++
		p.storeErr = &LastError{Message: err.Error(), Timestamp: now}
		p.doneAt = minTime(p.doneAt, job.doneAt)
		if job.final {
			t.log.Warn("last store of a revoked partition failed; it will be redelivered", "partition", p.id, "offset", job.offset, "error", err)
			t.releaseLocked(p, "drain deadline")
			return false
		}
		d := t.backoff.Delay(p.failures)
		p.due = now.Add(d)
		t.log.Warn("offset store failed; will retry", "partition", p.id, "offset", job.offset, "attempt", p.failures, "backoff", d, "error", err)
		return false
	}
	// Stored, and more was done meanwhile: schedule it from when it was done.
	if p.done > p.stored {
		if p.doneAt.IsZero() {
			p.doneAt = now
		}
		t.scheduleLocked(p, now)
	}
	return resume
}

func minTime(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
