package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Commit rejections. The native plugin callback returns a distinct code for each (see
// include/iggy_connector.h).
var (
	// ErrCommitUnknownPartition: no live consumer of this sink owns the partition (the sink
	// was stopped or restarted, or the partition moved to another member).
	ErrCommitUnknownPartition = errors.New("commit: partition not owned by this sink")
	// ErrCommitStale: the offset is at or below the offset already committed.
	ErrCommitStale = errors.New("commit: offset at or below the committed offset")
	// ErrCommitOutOfRange: the offset was never delivered to this sink.
	ErrCommitOutOfRange = errors.New("commit: offset beyond what was delivered")
)

// RejectedMessages is returned by Consume when the target refused some messages of the
// batch for good (a constraint, a type) and wrote everything else: "the batch is written
// except these". The runtime does not retry the batch; it applies the connector's
// on_failure to exactly these messages (dead_letter sends them alone to the dead-letter
// topic, skip counts them, stop stops the sink). Under on_failure = "stop" a sink must not
// record anything at or past the first rejected message as done (no commit past it).
type RejectedMessages struct {
	// Offsets are the rejected messages' offsets, ascending, all within the batch.
	Offsets []uint64
	// Err says why (the first refusal).
	Err error
}

func (e *RejectedMessages) Error() string {
	return fmt.Sprintf("%d message(s) rejected by the target (offsets %v): %v", len(e.Offsets), e.Offsets, e.Err)
}

func (e *RejectedMessages) Unwrap() error { return e.Err }

// Errors that steer the runtime. A connector returns them (wrapped or not: the runtime
// looks with errors.Is and errors.As) from Sink.Consume or Source.Read to say what a retry
// needs; any other error is retried with the connector's [retry] backoff and, for a sink,
// counts toward max_retries.

// ErrNotConnected says the connector lost its connection to the target (a sink) or to the
// system it reads (a source). The runtime does not count it as a failed attempt: it calls
// the connector's [Reconnector.Reconnect], if it has one, with backoff until that succeeds,
// then calls Consume (with the same batch) or Read again. So a lost connection never
// exhausts max_retries and never reaches on_failure; it only waits. A connector without
// Reconnect is simply called again after the backoff.
var ErrNotConnected = errors.New("not connected")

// Reconnector is implemented by a connector that can re-establish its connection in
// place, without being closed and opened again. The runtime calls Reconnect after Consume
// or Read returned an error wrapping [ErrNotConnected], on the goroutine that made that
// call (never concurrently with Consume for the same topic), and retries it with the
// connector's backoff until it returns nil or the runtime stops (ctx ends).
type Reconnector interface {
	Reconnect(ctx context.Context) error
}

// BackOffError asks the runtime to wait Wait before calling again (a rate limit, a target
// that said "retry after"). The wait replaces the backoff of that attempt and is not
// counted toward max_retries. A Wait ≤ 0 means the connector's own backoff.
type BackOffError struct {
	Wait time.Duration
	Err  error
}

// BackOff returns a *BackOffError: wait d, then call again; err says why.
func BackOff(d time.Duration, err error) error { return &BackOffError{Wait: d, Err: err} }

func (e *BackOffError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("back off %v", e.Wait)
	}
	return fmt.Sprintf("back off %v: %v", e.Wait, e.Err)
}

func (e *BackOffError) Unwrap() error { return e.Err }

// ErrPermanent is wrapped by [Permanent]'s errors.
var ErrPermanent = errors.New("permanent error")

// Permanent marks err as one that no retry can fix (a malformed batch the target will
// always refuse, a schema it does not have, credentials it rejected). From Consume: the
// batch is not retried and goes straight to on_failure. From Read: the source stops with
// the error (its restart policy then applies, as for any failed source). From Open: the
// connector is not restarted. errors.Is(Permanent(err), err)
// holds, and so does errors.Is(Permanent(err), ErrPermanent).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{ErrPermanent, e.err} }
