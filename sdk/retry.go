package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Retry is the one retry loop of Ferry, for connectors and the runtime alike: capped
// exponential backoff, optionally jittered, steered by the errors of this package.
// Attempts count from 1; the wait after the n-th counted failure is Initial·Multiplier^(n−1)
// (Multiplier 2 unless set), at most Max, less a random part of at most Jitter of it. The operation's error steers what
// comes next:
//
//   - nil: Do returns nil;
//   - [Permanent], or an error Transient says is not worth retrying: Do returns it at once;
//   - a [*BackOffError]: wait what it asks (the next backoff when it asks ≤ 0), not counted;
//   - [ErrNotConnected]: call Reconnector.Reconnect with this backoff until it succeeds
//     (without one, wait one step), then try again at once, not counted; a Permanent
//     error of Reconnect ends Do with it;
//   - anything else: counted; after Attempts counted failures Do returns the last error
//     as the operation returned it.
//
// When ctx ends (checked after each failure and during every wait) Do returns an error
// wrapping both ctx's error and the last failure. A Retry is a value: copy it, change a
// field, use it from any number of goroutines.
type Retry struct {
	// Initial is the first wait (≤ 0: 1ms); Max caps the waits (below Initial: Initial).
	Initial, Max time.Duration
	// Attempts bounds the counted failures (0: retry until ctx ends).
	Attempts int
	// Multiplier is how much each wait grows on the one before (0: 2, doubling; 1:
	// every wait is Initial; below 1: 2).
	Multiplier float64
	// Jitter, from 0 to 1, shortens each wait by a random fraction of at most this much of
	// it, so that many clients failing together do not retry together. 0: exact waits.
	Jitter float64

	// What names the operation in the log lines ("upload", "connect"): each retried
	// failure is logged once at WARN, "<What> failed; retrying", with the attempt, the
	// wait and the error, plus LogAttrs. A nil Log logs nothing.
	What     string
	Log      *slog.Logger
	LogAttrs []any
	// Reconnector answers ErrNotConnected (a connector passes itself).
	Reconnector Reconnector
	// Transient, when set, says which errors are worth retrying; the others end Do at
	// once, as Permanent ones do.
	Transient func(error) bool
	// Steer, when set, reads the errors instead of [SteeringOf] (a loop whose errors come
	// from the runtime's own calls, not a connector's, retries them all: return
	// SteerRetry).
	Steer func(error) (Steering, time.Duration)
	// OnRetry, when set, is told of each failure that will be retried (for counters), with
	// how it was steered and the wait before the next attempt.
	OnRetry func(RetryEvent)
	// Sleep replaces the waits (tests); it reports whether the full wait elapsed.
	Sleep func(ctx context.Context, d time.Duration) bool
}

// RetryEvent is one failure a [Retry] will retry.
type RetryEvent struct {
	Attempt int           // the attempt that failed, from 1 (every call counts)
	Failed  int           // counted failures so far
	Err     error         // its error
	Wait    time.Duration // the wait before the next attempt (0 after a reconnect)
	Steer   Steering
}

// Steering is what an error asks of a [Retry].
type Steering int

// The steerings, as [SteeringOf] reads them.
const (
	SteerRetry     Steering = iota // retry with the backoff, counted
	SteerPermanent                 // give up at once
	SteerBackOff                   // wait what it asks, not counted
	SteerReconnect                 // reconnect first, not counted
)

func (s Steering) String() string {
	switch s {
	case SteerPermanent:
		return "permanent"
	case SteerBackOff:
		return "back off"
	case SteerReconnect:
		return "reconnect"
	}
	return "retry"
}

// SteeringOf reads err's steering and, for SteerBackOff, the wait it asks (≤ 0: the
// retry's own backoff).
func SteeringOf(err error) (Steering, time.Duration) {
	var bo *BackOffError
	switch {
	case errors.Is(err, ErrPermanent):
		return SteerPermanent, 0
	case errors.As(err, &bo):
		return SteerBackOff, bo.Wait
	case errors.Is(err, ErrNotConnected):
		return SteerReconnect, 0
	}
	return SteerRetry, 0
}

// Delay returns the wait after the n-th counted failure (n ≥ 1), without jitter.
func (r Retry) Delay(n int) time.Duration {
	d := r.Initial
	if d <= 0 {
		d = time.Millisecond
	}
	limit := max(r.Max, d)
	m := r.Multiplier
	if m < 1 {
		m = 2
	}
	for i := 1; i < n; i++ {
		if float64(d) >= float64(limit)/m {
			return limit
		}
		d = time.Duration(float64(d) * m)
	}
	return min(d, limit)
}

func (r Retry) jittered(d time.Duration) time.Duration {
	if r.Jitter <= 0 || d <= 0 {
		return d
	}
	j := min(r.Jitter, 1)
	return d - time.Duration(rand.Float64()*j*float64(d))
}

// Do calls op until it succeeds or the steering says stop (see [Retry]). attempt counts
// every call from 1. A panic in op is not recovered.
func (r Retry) Do(ctx context.Context, op func(ctx context.Context, attempt int) error) error {
	failed := 0
	for attempt := 1; ; attempt++ {
		err := op(ctx, attempt)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return Stopped(ctx.Err(), err)
		}
		steer := r.Steer
		if steer == nil {
			steer = SteeringOf
		}
		how, asked := steer(err)
		if how == SteerRetry && r.Transient != nil && !r.Transient(err) {
			how = SteerPermanent
		}
		var wait time.Duration
		switch how {
		case SteerPermanent:
			return err
		case SteerBackOff:
			if wait = asked; wait <= 0 {
				wait = r.jittered(r.Delay(failed + 1))
			}
			r.logf(err, "%s asked to back off", attempt, failed, wait)
		case SteerReconnect:
			r.logf(err, "%s: not connected; reconnecting", attempt, failed, 0)
			r.event(RetryEvent{attempt, failed, err, 0, how})
			if rerr := r.reconnect(ctx); rerr != nil {
				if ctx.Err() != nil {
					return Stopped(ctx.Err(), err)
				}
				return rerr // Permanent: a reconnect that can never work
			}
			continue
		default:
			failed++
			if r.Attempts > 0 && failed >= r.Attempts {
				return err
			}
			wait = r.jittered(r.Delay(failed))
			r.logf(err, "%s failed; retrying", attempt, failed, wait)
		}
		r.event(RetryEvent{attempt, failed, err, wait, how})
		if !r.sleep(ctx, wait) {
			return Stopped(ctx.Err(), err)
		}
	}
}

// reconnect calls the Reconnector with this backoff until it succeeds; without one it
// waits one step. It fails when ctx ends, or with a Permanent error of Reconnect.
func (r Retry) reconnect(ctx context.Context) error {
	if r.Reconnector == nil {
		if !r.sleep(ctx, r.jittered(r.Delay(1))) {
			return ctx.Err()
		}
		return nil
	}
	again := r
	again.Attempts, again.Transient, again.Reconnector, again.OnRetry = 0, nil, nil, nil
	again.What = "reconnect"
	if r.What != "" {
		again.What = r.What + ": reconnect"
	}
	err := again.Do(ctx, func(ctx context.Context, _ int) error { return r.Reconnector.Reconnect(ctx) })
	if err == nil && r.Log != nil {
		r.Log.Info(again.What+"ed", r.LogAttrs...)
	}
	return err
}

func (r Retry) logf(err error, format string, attempt, failed int, wait time.Duration) {
	if r.Log == nil {
		return
	}
	what := r.What
	if what == "" {
		what = "operation"
	}
	attrs := append([]any{"attempt", attempt}, r.LogAttrs...)
	if r.Attempts > 0 && failed > 0 {
		attrs = append(attrs, "of", r.Attempts)
	}
	if wait > 0 {
		attrs = append(attrs, "backoff", wait)
	}
	attrs = append(attrs, "error", err)
	r.Log.Warn(fmt.Sprintf(format, what), attrs...)
}

func (r Retry) event(e RetryEvent) {
	if r.OnRetry != nil {
		r.OnRetry(e)
	}
}

func (r Retry) sleep(ctx context.Context, d time.Duration) bool {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
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

// Stopped is the error of a retry cut short by ctx: it wraps both ctx's error and the
// last failure.
func Stopped(ctxErr, last error) error {
	return fmt.Errorf("%w (last attempt: %w)", ctxErr, last)
}
