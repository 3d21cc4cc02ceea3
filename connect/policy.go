package connect

import (
	"time"

	"github.com/ferryio/ferry/connect/config"
)

// commitPolicy is what a sink's offset_commit mode means, decided once from its config
// (policyFor): the rest of the runtime asks it questions and never looks at the mode.
// The table of commit modes in docs/delivery.md is this type:
//
//	mode              serverStores  resolveOnSuccess  sinkCommits  guarantee
//	after_polling     yes           -                 -            at-most-once
//	after_consuming   -             yes               -            at-least-once
//	sink_controlled   -             -                 yes          at-least-once
//
// In the two at-least-once modes a done offset (resolved by the runtime, or committed by
// the sink) is stored storeDelay after it was done, or at once when it is urgent (see
// partition.urgent), and a revoked partition drains before it is released.
type commitPolicy struct {
	mode config.CommitMode // for logs only
	// serverStores: the server stores the offset as part of each poll; the runtime
	// stores nothing, applies no backpressure and releases a revoked partition at once.
	serverStores bool
	// resolveOnSuccess: a batch whose Consume returned nil is done.
	resolveOnSuccess bool
	// sinkCommits: the sink gets a Committer and says itself which offsets are done.
	sinkCommits bool
	// storeDelay is how long a done offset may wait to be stored, so that the offsets
	// done right after it share one store: commit.delay, at most commit.interval.
	storeDelay time.Duration
	// maxUncommitted bounds polled-but-not-stored messages per partition (0 = none).
	maxUncommitted uint64
}

func policyFor(cfg *config.Sink) commitPolicy {
	p := commitPolicy{mode: cfg.OffsetCommit, storeDelay: cfg.Commit.StoreDelay(), maxUncommitted: cfg.Commit.MaxUncommitted}
	switch cfg.OffsetCommit {
	case config.CommitAfterConsuming:
		p.resolveOnSuccess = true
	case config.CommitSinkControlled:
		p.sinkCommits = true
	default:
		p.serverStores = true
		p.maxUncommitted = 0
	}
	return p
}

// forKeeper is p for a sink that keeps its own positions (sdk.PositionKeeper): unless
// the file sets commit.delay, a done offset waits config.DefaultKeeperCommitDelay (at most
// commit.interval), since Iggy's stored offset only shows its progress.
//
// Under after_polling the runtime stores done offsets as under after_consuming instead of
// letting the server store each poll: such a sink resumes a partition it has written where
// its target says, but one it has not written yet (nothing of it in the target) where Iggy's
// offset says, and an offset stored with the poll, before the write, would make a crash
// skip that partition's first batches. Its exactly-once holds in every mode only if Iggy's
// offset never runs ahead of the target.
func (p commitPolicy) forKeeper(c config.CommitSettings) commitPolicy {
	if !c.DelaySet {
		p.storeDelay = min(config.DefaultKeeperCommitDelay, c.Interval)
	}
	if p.serverStores {
		p.serverStores, p.resolveOnSuccess, p.maxUncommitted = false, true, c.MaxUncommitted
	}
	return p
}

// resolves reports whether the runtime marks a batch done itself once it ended with res:
// a success in after_consuming, and a batch dead-lettered or skipped in every mode where
// the runtime stores offsets (after_polling's server stored it with the poll).
func (p commitPolicy) resolves(res batchResult) bool {
	switch res {
	case batchDelivered:
		return p.resolveOnSuccess
	case batchResolved:
		return !p.serverStores
	}
	return false
}
