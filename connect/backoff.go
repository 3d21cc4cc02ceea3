package connect

import (
	"context"
	"time"
)

// Backoff is capped exponential backoff: retry n (1-based) waits Initial·2^(n−1), at most
// Max. The first retry waits Initial (not twice it: Iggy issue #4104).
type Backoff struct {
	Initial    time.Duration // must be > 0
	Max        time.Duration // cap; values below Initial are raised to Initial
	MaxRetries uint32        // retries after the first attempt; 0 = none
}

// Delay returns the wait before retry n (n ≥ 1).
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
