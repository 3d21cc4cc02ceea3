package sdk

import "errors"

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
