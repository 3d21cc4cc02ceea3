package wire

import (
	"fmt"
	"strconv"
)

// EvictionReason is the reason byte (offset 255) of an Eviction header.
type EvictionReason uint8

// Eviction reasons.
const (
	EvictionReserved                EvictionReason = 0
	EvictionNoSession               EvictionReason = 1
	EvictionClientReleaseTooLow     EvictionReason = 2
	EvictionClientReleaseTooHigh    EvictionReason = 3
	EvictionInvalidRequestOperation EvictionReason = 4
	EvictionInvalidRequestBody      EvictionReason = 5
	EvictionInvalidRequestBodySize  EvictionReason = 6
	EvictionSessionTooLow           EvictionReason = 7
	EvictionSessionReleaseMismatch  EvictionReason = 8
	EvictionInvalidCredentials      EvictionReason = 9
	EvictionInvalidToken            EvictionReason = 10
	EvictionUserInactive            EvictionReason = 11
	EvictionSessionError            EvictionReason = 12
	EvictionStaleClient             EvictionReason = 13
	EvictionIncompatibleProtocol    EvictionReason = 14
	EvictionMalformedLogin          EvictionReason = 15
)

var evictionNames = [...]string{
	"Reserved", "NoSession", "ClientReleaseTooLow", "ClientReleaseTooHigh",
	"InvalidRequestOperation", "InvalidRequestBody", "InvalidRequestBodySize",
	"SessionTooLow", "SessionReleaseMismatch", "InvalidCredentials", "InvalidToken",
	"UserInactive", "SessionError", "StaleClient", "IncompatibleProtocol", "MalformedLogin",
}

// evictionCodes maps each reason to the error a client reports.
var evictionCodes = [...]*ServerError{
	ErrUnauthenticated, ErrUnauthenticated, ErrInvalidCommand, ErrInvalidCommand,
	ErrInvalidCommand, ErrInvalidCommand, ErrInvalidCommand, ErrUnauthenticated,
	ErrUnauthenticated, ErrInvalidCredentials, ErrInvalidPAT, ErrUnauthenticated,
	ErrUnauthenticated, ErrStaleClient, ErrIncompatibleProtocolVersion, ErrInvalidFormat,
}

// IsValid reports whether r is 1..15.
func (r EvictionReason) IsValid() bool { return r >= 1 && r <= 15 }

// String returns a readable name.
func (r EvictionReason) String() string {
	if int(r) < len(evictionNames) {
		return evictionNames[r]
	}
	return "EvictionReason(" + strconv.Itoa(int(r)) + ")"
}

// Error returns the error a client maps r to: 1/7/8/11/12 → 40, 2–6 → 3,
// 9 → 42, 10 → 53, 13 → 30, 14 → 14003, 15 → 4; 0 and values > 15 → 40.
func (r EvictionReason) Error() *ServerError {
	if int(r) < len(evictionCodes) {
		return evictionCodes[r]
	}
	return ErrUnauthenticated
}

// EvictionError is what a client returns when it receives an Eviction. It unwraps to the
// mapped *ServerError, so errors.Is(err, ErrStaleClient) works. Every Eviction is
// connection-terminal for the client.
type EvictionError struct {
	Reason EvictionReason
	// ServerMax and ServerMin are the accepted protocol window (reason 14 only).
	ServerMax, ServerMin uint32
	// Err is the mapped error; never nil.
	Err *ServerError
}

// NewEvictionError maps an Eviction header to its error. For reason 14 with a nonsensical
// window (min 0 or max < min) the mapped error is 40, as the Rust SDK does.
func NewEvictionError(h EvictionHeader) *EvictionError {
	e := &EvictionError{Reason: h.Reason, ServerMax: h.ServerMax, ServerMin: h.ServerMin, Err: h.Reason.Error()}
	if h.Reason == EvictionIncompatibleProtocol && (h.ServerMin == 0 || h.ServerMax < h.ServerMin) {
		e.Err = ErrUnauthenticated
	}
	return e
}

func (e *EvictionError) Error() string {
	if e.Reason == EvictionIncompatibleProtocol {
		return fmt.Sprintf("iggy: evicted (%s, server accepts %s..%s): %v", e.Reason,
			FormatVersion(e.ServerMin), FormatVersion(e.ServerMax), e.Err)
	}
	return fmt.Sprintf("iggy: evicted (%s): %v", e.Reason, e.Err)
}

// Unwrap returns the mapped *ServerError.
func (e *EvictionError) Unwrap() error { return e.Err }
