package sdk

import (
	"errors"
	"fmt"
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
