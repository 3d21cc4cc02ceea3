package connect

import (
	"context"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Backoff is the runtime's retry pacing from a connector's [retry] table (or a fixed
// default): capped exponential backoff with the one convention of every retry in Ferry,
// sdk.Retry's: attempts count from 1 and the wait after the n-th failed attempt is
// Initial·2^(n−1), at most Max. So the first retry waits Initial, not twice it
// (upstream's runtime doubles before its first retry).
type Backoff struct {
	Initial time.Duration // must be > 0 (values ≤ 0 mean 1ms)
	Max     time.Duration // cap; values below Initial are raised to Initial
	// Attempts bounds how many times retry calls op; 0 means until it succeeds or the
	// context ends.
	Attempts uint32
}

// Retry is the sdk.Retry pacing like b.
func (b Backoff) Retry() sdk.Retry {
	return sdk.Retry{Initial: b.Initial, Max: b.Max, Attempts: int(b.Attempts)}
}

// Delay returns the wait after the n-th failed attempt (n ≥ 1).
func (b Backoff) Delay(n int) time.Duration { return b.Retry().Delay(n) }

// retry calls op(1), op(2), … until it returns nil or b.Attempts calls have failed (then
// it returns the last error): sdk.Retry with every error counted alike (the runtime's
// own calls: polls, stores, sends, a seeker's answer, which must not end on a
// connector's steering). onRetry, when not nil, is told of each
// failure that will be retried, with the wait before the next attempt. op is always
// called once; when ctx ends — checked after each failure and during the waits — retry
// returns at once an error that wraps both ctx's error and the last failure. (op sees
// whatever context it closes over: a caller may let ctx end the waits while op runs on a
// longer one.)
func retry(ctx context.Context, b Backoff, op func(attempt int) error, onRetry func(attempt int, err error, wait time.Duration)) error {
	r := b.Retry()
	r.Steer = func(error) (sdk.Steering, time.Duration) { return sdk.SteerRetry, 0 }
	if onRetry != nil {
		r.OnRetry = func(e sdk.RetryEvent) { onRetry(e.Attempt, e.Err, e.Wait) }
	}
	return r.Do(ctx, func(_ context.Context, attempt int) error { return op(attempt) })
}

// sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool { return sdk.Sleep(ctx, d) }

// reconnectorOf returns conn's sdk.Reconnector, or nil.
func reconnectorOf(conn any) sdk.Reconnector {
	r, _ := conn.(sdk.Reconnector)
	return r
}
