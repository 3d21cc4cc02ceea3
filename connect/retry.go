package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Backoff is capped exponential backoff. Attempts are counted from 1 (the first call);
// the wait after the n-th failed attempt is Initial·2^(n−1), at most Max. So the first
// retry waits Initial, not twice it (upstream's runtime doubles before its first retry).
// Every retry in the package —
// retry below, the store loop's per-partition backoff — uses this one convention.
type Backoff struct {
	Initial time.Duration // must be > 0 (values ≤ 0 mean 1ms)
	Max     time.Duration // cap; values below Initial are raised to Initial
	// Attempts bounds how many times retry calls op; 0 means until it succeeds or the
	// context ends.
	Attempts uint32
}

// Delay returns the wait after the n-th failed attempt (n ≥ 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	if d <= 0 {
		d = time.Millisecond
	}
	limit := max(b.Max, d)
	for i := 1; i < n; i++ {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// retry calls op(1), op(2), … until it returns nil or b.Attempts calls have failed (then
// it returns the last error). onRetry, when not nil, is told of each failure that will
// be retried, with the wait before the next attempt. op is always called once; when ctx
// ends — checked after each failure and during the waits — retry returns at once an
// error that wraps both ctx's error and the last failure. (op sees whatever context it
// closes over: a caller may let ctx end the waits while op runs on a longer one.)
func retry(ctx context.Context, b Backoff, op func(attempt int) error, onRetry func(attempt int, err error, wait time.Duration)) error {
	for n := 1; ; n++ {
		last := op(n)
		if last == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return stopped(err, last)
		}
		if b.Attempts > 0 && uint32(n) >= b.Attempts {
			return last
		}
		wait := b.Delay(n)
		if onRetry != nil {
			onRetry(n, last, wait)
		}
		if !sleep(ctx, wait) {
			return stopped(ctx.Err(), last)
		}
	}
}

func stopped(ctxErr, last error) error {
	return fmt.Errorf("%w (last attempt: %w)", ctxErr, last)
}

// sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// steering is what a connector's error asks of the loop that retries it (the sdk's
// steering errors): retry with the connector's backoff (counted), give up at once, wait
// what it asks (not counted), or reconnect first (not counted).
type steering int

const (
	steerRetry steering = iota
	steerPermanent
	steerBackOff
	steerReconnect
)

// steer reads err's steering and, for steerBackOff, the wait it asks (≤ 0: the loop's own
// backoff).
func steer(err error) (steering, time.Duration) {
	var bo *sdk.BackOffError
	switch {
	case errors.Is(err, sdk.ErrPermanent):
		return steerPermanent, 0
	case errors.As(err, &bo):
		return steerBackOff, bo.Wait
	case errors.Is(err, sdk.ErrNotConnected):
		return steerReconnect, 0
	}
	return steerRetry, 0
}

// reconnect re-establishes a connector's connection after it returned sdk.ErrNotConnected:
// it calls conn's Reconnect (when conn is an sdk.Reconnector) with backoff b until it
// succeeds, or, for a connector without one, waits one backoff step. It returns an error
// only when ctx ended.
func reconnect(ctx context.Context, conn any, b Backoff, log *slog.Logger) error {
	r, ok := conn.(sdk.Reconnector)
	if !ok {
		if !sleep(ctx, b.Delay(1)) {
			return ctx.Err()
		}
		return nil
	}
	err := retry(ctx, Backoff{Initial: b.Initial, Max: b.Max}, func(int) error {
		return callSafely(func() error { return r.Reconnect(ctx) })
	}, func(attempt int, err error, wait time.Duration) {
		log.Warn("reconnect failed; retrying", "attempt", attempt, "backoff", wait, "error", err)
	})
	if err == nil {
		log.Info("reconnected")
	}
	return err
}
