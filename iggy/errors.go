package iggy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/ferryio/ferry/iggy/wire"
)

// Sentinel errors of the client. Server answers are *wire.ServerError values (match them
// and their classes, e.g. wire.ErrNotFound, with errors.Is); evictions are
// *wire.EvictionError. Every error a method returns is an *OpError naming the command
// and the resource.
var (
	// ErrClosed is returned by every method after Close (of the Client, Consumer or
	// Producer) and by requests that Close interrupted before they were sent.
	ErrClosed = errors.New("iggy: client closed")
	// ErrNotConnected is returned when no connection could be (re)established in time:
	// the request was never sent. It wraps the last dial or login error. Safe to retry.
	ErrNotConnected = errors.New("iggy: not connected")
	// ErrOutcomeUnknown is returned when a request was (perhaps partly) written but no
	// complete reply arrived: the connection failed or timed out, the server evicted the
	// session (the client dropped the connection; the next request reconnects), or the
	// caller's context ended while the reply was outstanding (the connection is kept and
	// discards the late reply). The server may or may not have executed it. Retriable
	// unless cancelled; reads are retried transparently, but a retried send may
	// duplicate messages (at-least-once).
	ErrOutcomeUnknown = errors.New("iggy: outcome unknown")
	// ErrTooLarge is returned before sending when a message or batch does not fit in
	// one frame (WithMaxFrameSize). Not retriable.
	ErrTooLarge = errors.New("iggy: message or batch exceeds the frame limit")
	// ErrProtocol matches replies that break the protocol: a frame of impossible size,
	// an unknown header, a reply answering another request, or an undecodable payload.
	// The connection is dropped (except for payload decoding errors).
	ErrProtocol = errors.New("iggy: protocol violation")
	// ErrOffsetBehind is returned by Consumer.StoreOffset, without sending anything, for an
	// offset below the group's stored offset as the member knows it: the offset stored
	// when the member was (re)assigned the partition, or what it stored itself since.
	// Storing it would move the group's offset backwards, which only a member that lost
	// the partition in between (and missed the change) would try. Not retriable.
	ErrOffsetBehind = errors.New("iggy: offset below the group's stored offset")
)

// OpError is what every method returns on failure: the command (Op), the resource it
// named (Resource, e.g. `stream "orders" topic 0 partition 2`, may be empty) and the
// cause (Err). It unwraps to Err.
type OpError struct {
	Op       string
	Resource string
	Err      error
}

func (e *OpError) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), "iggy: ")
	if e.Resource == "" {
		return "iggy: " + e.Op + ": " + msg
	}
	return "iggy: " + e.Op + " " + e.Resource + ": " + msg
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// Retriable reports whether repeating the request may succeed: the request was not
// sent (SafeToRetry), its outcome is unknown (ErrOutcomeUnknown), the server answered
// a transient code (57, 58) or evicted a stale session (30), or a deadline expired.
// It is false for ErrClosed, cancellation, and every definite server answer.
func Retriable(err error) bool {
	if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
		return false
	}
	if SafeToRetry(err) || errors.Is(err, ErrOutcomeUnknown) || wire.Retriable(err) ||
		errors.Is(err, wire.ErrStaleClient) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// SafeToRetry reports whether err proves the server did not execute the request: it
// was never sent (ErrNotConnected, or the context ended before it was sent) or the
// server answered 58 TransientNotAccepted. Repeating such a request cannot duplicate it.
func SafeToRetry(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns) || errors.Is(err, ErrNotConnected) || errors.Is(err, wire.ErrTransientNotAccepted)
}

// notSentError marks an error that happened before any byte of the request was written.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "not sent: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// unknownError is ErrOutcomeUnknown with its cause.
type unknownError struct{ err error }

func (e *unknownError) Error() string { return "outcome unknown: " + e.err.Error() }
func (e *unknownError) Unwrap() error { return e.err }
func (e *unknownError) Is(target error) bool {
	return target == ErrOutcomeUnknown
}

// notConnectedError is ErrNotConnected with its cause.
type notConnectedError struct{ err error }

func (e *notConnectedError) Error() string {
	if e.err == nil {
		return "not connected"
	}
	return "not connected: " + e.err.Error()
}
func (e *notConnectedError) Unwrap() error { return e.err }
func (e *notConnectedError) Is(target error) bool {
	return target == ErrNotConnected
}

// protoError is ErrProtocol with its detail.
type protoError struct{ err error }

func (e *protoError) Error() string { return "protocol violation: " + e.err.Error() }
func (e *protoError) Unwrap() error { return e.err }
func (e *protoError) Is(target error) bool {
	return target == ErrProtocol
}

func protocolErrorf(format string, args ...any) error {
	return &protoError{fmt.Errorf(format, args...)}
}

// connLevel reports whether err is about the connection rather than a server answer.
func connLevel(err error) bool {
	var ns *notSentError
	return errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotConnected) || errors.As(err, &ns)
}

// res formats the resource part of an OpError.
func res(stream, topic *wire.Identifier, partition int64) string {
	var b strings.Builder
	if stream != nil {
		b.WriteString("stream ")
		b.WriteString(stream.String())
	}
	if topic != nil {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("topic ")
		b.WriteString(topic.String())
	}
	if partition >= 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "partition %d", partition)
	}
	return b.String()
}

func opErr(op, resource string, err error) error {
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Resource: resource, Err: err}
}
