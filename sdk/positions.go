package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
)

// Positions is the bookkeeping every sink that decides its own commits repeats, kept once:
// per partition, the next offset it accepts (a redelivery below it is dropped), the
// highest offset written but not yet durable, and the highest durable one, committed to
// the runtime once durable and never backwards. A sink that keeps its positions in its
// target (exactly once) gives it a [LoadPositions] function and implements
// [PartitionSeeker] by calling [Positions.Assigned] (a [RewindSeeker] gives a
// [LoadPositionsAt] and calls [Positions.Positions] too); one whose durability is a periodic
// sync (a file's fsync) calls [Positions.Written] per batch and [Positions.Synced] after
// each sync ([Positions.Mark] when writes go on during the sync); one whose writes are
// durable at once calls [Positions.Durable].
//
// The offsets a partition's Written and Durable are given follow one of two rules. For a
// partition whose batches pass through [Positions.Fresh] (or that Assigned sought), they
// only go up: a call below an earlier one changes nothing. For a partition the sink never
// cuts with Fresh (an at-least-once sink writes every batch it is given), they follow the
// runtime's delivery order, one batch at a time: the last call says where the partition
// is, even below an earlier one, and is committed. The runtime goes back only to deliver
// again what it did not store (a commit then refused as stale, which is no error) or after
// the partition's messages were purged and new ones took their offsets (then that commit
// is the one the runtime needs: a sink that kept the highest offset would commit nothing
// until the new messages passed the purged ones).
//
// A partition is forgotten when the runtime refuses a commit of it as not owned
// ([ErrCommitUnknownPartition]: revoked, or the sink was replaced) and when it is
// assigned again. Without a Committer (a sink not run as sink_controlled) it still tracks
// positions and commits nothing. Safe for concurrent use.
type Positions struct {
	committer Committer
	log       *slog.Logger
	load      LoadPositions
	loadAt    LoadPositionsAt

	mu    sync.Mutex
	parts map[Partition]*position
}

// LoadPositions reads from a sink's target, for each partition it has written, the
// offset of the next message to write (the last written + 1); partitions it leaves out
// resume from the group's offset stored in Iggy.
type LoadPositions func(ctx context.Context, topic TopicMetadata, parts []Partition) (map[Partition]uint64, error)

// LoadPositionsAt is a [LoadPositions] that also gives, for each partition found, the
// timestamp of the last message written ([Position]), for a sink that is a
// [RewindSeeker]: the runtime checks it against the partition, to find one purged while
// the sink was away.
type LoadPositionsAt func(ctx context.Context, topic TopicMetadata, parts []Partition) (map[Partition]Position, error)

// position is one assigned partition's bookkeeping. Offsets are "next" positions
// (offset + 1), so 0 means none.
type position struct {
	next    uint64 // the first offset not accepted yet; 0: nothing seen
	seen    bool   // next is known (sought, or a message was accepted): offsets only go up
	written uint64 // highest (seen) or last (not seen) written + 1, durable or not
	durable uint64 // likewise, durable + 1 that the runtime took (or knows done)
	gone    bool   // the runtime said the partition is not ours
}

// NewPositions returns the bookkeeping of the sink opened with env (its Committer, nil
// when not sink_controlled, and its Logger). load is nil for a sink whose positions Iggy
// keeps.
func NewPositions(env SinkEnv, load LoadPositions) *Positions {
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Positions{committer: env.Committer, log: log, load: load, parts: map[Partition]*position{}}
}

// NewPositionsAt is [NewPositions] for a sink that is a [RewindSeeker]: load gives each
// position with its timestamp, [Positions.Positions] returns them, [Positions.Assigned]
// the same without the timestamps. When the runtime says partitions went back
// ([RewindSeeker.Rewound]), the sink calls [Positions.Forget] for each of them.
func NewPositionsAt(env SinkEnv, load LoadPositionsAt) *Positions {
	k := NewPositions(env, nil)
	k.loadAt = load
	return k
}

// Assigned is [PartitionSeeker.Assigned] for a sink with a [LoadPositions]: each
// partition's earlier bookkeeping is dropped, its position read from the target, and
// the runtime seeks each partition found there. Without a load function it only drops
// the earlier bookkeeping and seeks nothing.
func (k *Positions) Assigned(ctx context.Context, topic TopicMetadata, parts []Partition) (map[Partition]uint64, error) {
	at, err := k.Positions(ctx, topic, parts)
	if err != nil {
		return nil, err
	}
	out := make(map[Partition]uint64, len(at))
	for p, v := range at {
		out[p] = v.Next
	}
	return out, nil
}

// Positions is [RewindSeeker.Positions]: [Positions.Assigned] with the timestamp of each
// partition's last message written, as the [LoadPositionsAt] of [NewPositionsAt] gives
// it (0 from a [LoadPositions]: the position is taken as it is).
func (k *Positions) Positions(ctx context.Context, topic TopicMetadata, parts []Partition) (map[Partition]Position, error) {
	found := map[Partition]Position{}
	switch {
	case k.loadAt != nil:
		var err error
		if found, err = k.loadAt(ctx, topic, parts); err != nil {
			return nil, err
		}
	case k.load != nil:
		next, err := k.load(ctx, topic, parts)
		if err != nil {
			return nil, err
		}
		for p, n := range next {
			found[p] = Position{Next: n}
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[Partition]Position{}
	for _, p := range parts {
		pos := &position{}
		if at, ok := found[p]; ok {
			pos.next, pos.seen = at.Next, true
			// Everything before the sought offset is in the target: done, whatever Iggy says.
			pos.written, pos.durable = at.Next, at.Next
			out[p] = at
		}
		k.parts[p] = pos
	}
	for p := range found {
		if _, asked := out[p]; !asked {
			k.log.Warn("positions: the target named a partition that was not assigned; ignored", "partition", fmt.Sprint(p))
		}
	}
	return out, nil
}

// Fresh returns the messages of msgs (one batch of partition p, in offset order) the sink
// has not accepted yet, and accepts them: a redelivery of what it already wrote or
// buffered is cut off. The batch's first message also tells that everything before it is
// done in the runtime (it starts there), which [Positions.Owned] relies on. A batch of a
// partition the runtime refused as not owned starts a new assignment of it (the runtime
// delivers only what the sink owns).
func (k *Positions) Fresh(p Partition, msgs []ConsumedMessage) []ConsumedMessage {
	if len(msgs) == 0 {
		return msgs
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	pos := k.entry(p)
	if pos.gone {
		// The runtime delivers a batch only of a partition the sink owns: this one was
		// assigned to it again (a sink that is no PartitionSeeker hears of it this way).
		pos = &position{}
		k.parts[p] = pos
	}
	if !pos.seen {
		pos.seen = true
		pos.next = msgs[0].Offset
		if pos.durable == 0 && pos.written == 0 {
			pos.written, pos.durable = msgs[0].Offset, msgs[0].Offset
		}
	}
	i := 0
	for i < len(msgs) && msgs[i].Offset < pos.next {
		i++
	}
	if i == len(msgs) {
		return nil
	}
	pos.next = msgs[len(msgs)-1].Offset + 1
	return msgs[i:]
}

// Next returns the first offset of p not accepted yet, and whether it is known.
func (k *Positions) Next(p Partition) (uint64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pos, ok := k.parts[p]
	if !ok || !pos.seen {
		return 0, false
	}
	return pos.next, true
}

// Done returns the offset after the last one of p known durable in this assignment
// (recorded by [Positions.Durable] or [Positions.Synced], found by [Positions.Assigned],
// or everything before the first batch [Positions.Fresh] accepted), and whether one is
// known: where a sink's next write continues what it made durable (an optimistic write
// guarded by the target, which skips a read of its position first).
func (k *Positions) Done(p Partition) (next uint64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pos, found := k.parts[p]
	if !found || pos.gone || pos.durable == 0 {
		return 0, false
	}
	return pos.durable, true
}

// Rewind makes p accept again from offset next (a buffer the sink dropped, to be
// redelivered by the runtime's retry of its batch).
func (k *Positions) Rewind(p Partition, next uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if pos := k.entry(p); pos.seen && next < pos.next {
		pos.next = max(next, pos.written)
	}
}

// Seek makes p resume at next as its target says, outside an assignment: a sink that
// settled a write whose outcome was unknown by reading its target again (a transaction
// whose commit failed may have landed) accepts from next on, everything before it being
// written and durable there. It may move p backwards (the write did not land: its
// messages are accepted again) or forwards (it did, or another writer of the target got
// further). What the runtime was told is kept; the next Durable commits past it.
func (k *Positions) Seek(p Partition, next uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.parts[p] = &position{next: next, seen: true, written: next, durable: next}
}

// Written records that p's messages up to last are written, not yet durable: the next
// [Positions.Synced] commits them. For a partition not cut with Fresh, last is the
// partition's position whatever came before (see [Positions]), and a partition the runtime
// refused as not owned starts its bookkeeping afresh (it delivers only what the sink owns).
func (k *Positions) Written(p Partition, last uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pos := k.delivered(p)
	if !pos.seen || last+1 > pos.written {
		pos.written = last + 1
	}
}

// Durable records that p's messages up to last are durable in the target and commits
// last. It returns [ErrCommitUnknownPartition] (wrapped) when the runtime says p is no
// longer the sink's (the partition is forgotten: drop what is buffered for it), and any
// refusal other than a stale commit; a stale commit (already done) is no error. For a
// partition not cut with Fresh, last is committed whenever it differs from the last
// durable offset, and a partition refused as not owned starts afresh (see
// [Positions.Written]).
func (k *Positions) Durable(p Partition, last uint64) error {
	k.mu.Lock()
	pos := k.delivered(p)
	if !pos.seen || last+1 > pos.written {
		pos.written = last + 1
	}
	done := last+1 <= pos.durable
	if !pos.seen {
		done = last+1 == pos.durable
	}
	if pos.gone || done {
		gone := pos.gone
		k.mu.Unlock()
		if gone {
			return fmt.Errorf("partition %d: %w", p.PartitionID, ErrCommitUnknownPartition)
		}
		return nil
	}
	k.mu.Unlock()
	return k.commit(p, last)
}

// Synced records that everything written so far is durable (an fsync returned) and
// commits each partition's last written offset. It returns the refusals other than "not
// owned any more" and "stale", which only forget or skip. A sink whose writes go on while
// it syncs takes a [Positions.Mark] before the sync instead, so that what was written
// during it is not committed.
func (k *Positions) Synced() error { return k.Mark().Synced() }

// SyncMark is what a sink had written, and not yet made durable, when it began a sync
// ([Positions.Mark]).
type SyncMark struct {
	k   *Positions
	due map[Partition]uint64 // each partition's last written offset
}

// Mark records what is written now, before a sync begins: after the sync returned,
// [SyncMark.Synced] commits that and nothing written since. Take it where the writes are
// ordered with the sync (under the lock a write and its Written hold), so that everything
// it holds is in what the sync makes durable.
func (k *Positions) Mark() SyncMark {
	k.mu.Lock()
	defer k.mu.Unlock()
	due := map[Partition]uint64{}
	for p, pos := range k.parts {
		if !pos.gone && pos.written != pos.durable && pos.written > 0 {
			due[p] = pos.written - 1
		}
	}
	return SyncMark{k: k, due: due}
}

// Synced records that what m holds is durable and commits it (see [Positions.Synced]).
func (m SyncMark) Synced() error {
	var errs []error
	for p, last := range m.due {
		if err := m.k.commit(p, last); err != nil && !errors.Is(err, ErrCommitUnknownPartition) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Owned asks the runtime whether p is still the sink's, by committing again the offset it
// knows done (which changes nothing). False once the runtime refused p as not owned; true
// when nothing is known done yet (nothing can be asked).
func (k *Positions) Owned(p Partition) bool {
	k.mu.Lock()
	pos := k.entry(p)
	gone, durable := pos.gone, pos.durable
	k.mu.Unlock()
	if gone {
		return false
	}
	if durable == 0 || k.committer == nil {
		return true
	}
	err := k.committer.Commit(p, durable-1)
	if errors.Is(err, ErrCommitUnknownPartition) {
		k.forget(p)
		return false
	}
	return true
}

// Forget drops p's bookkeeping (the sink let go of the partition).
func (k *Positions) Forget(p Partition) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.parts, p)
}

// Partitions returns the partitions tracked and not revoked.
func (k *Positions) Partitions() []Partition {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Partition
	for p, pos := range maps.All(k.parts) {
		if !pos.gone {
			out = append(out, p)
		}
	}
	return out
}

// commit hands last to the Committer and records the outcome.
func (k *Positions) commit(p Partition, last uint64) error {
	var err error
	if k.committer != nil {
		err = k.committer.Commit(p, last)
	}
	switch {
	case err == nil, errors.Is(err, ErrCommitStale):
		k.mu.Lock()
		k.entry(p).done(last)
		k.mu.Unlock()
		return nil
	case errors.Is(err, ErrCommitUnknownPartition):
		k.forget(p)
		k.log.Info("positions: partition no longer ours; its bookkeeping is dropped", "partition", p.PartitionID, "offset", last)
		return fmt.Errorf("partition %d offset %d: %w", p.PartitionID, last, err)
	case errors.Is(err, ErrCommitOutOfRange):
		// A partition not cut with Fresh follows the runtime's delivery, which went back
		// under this offset (a purge noticed before the sync): its next batch says where it
		// is; asking again at every sync would only be refused again.
		k.mu.Lock()
		if pos := k.entry(p); !pos.seen {
			pos.done(last)
		}
		k.mu.Unlock()
		return fmt.Errorf("partition %d offset %d: %w", p.PartitionID, last, err)
	default:
		return fmt.Errorf("partition %d offset %d: %w", p.PartitionID, last, err)
	}
}

// done records that the runtime has last (it took the commit, or has it already): offsets
// only go up, except for a partition not cut with Fresh, which is where its last commit
// says.
func (pos *position) done(last uint64) {
	if !pos.seen || last+1 > pos.durable {
		pos.durable = last + 1
	}
}

// delivered returns p's position for a batch the runtime delivered: a partition not cut
// with Fresh that the runtime refused as not owned was assigned again (as in Fresh).
// k.mu must be held.
func (k *Positions) delivered(p Partition) *position {
	pos := k.entry(p)
	if pos.gone && !pos.seen {
		pos = &position{}
		k.parts[p] = pos
	}
	return pos
}

// forget marks p gone (until it is assigned again).
func (k *Positions) forget(p Partition) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.entry(p).gone = true
}

// entry returns p's position, creating it (a partition the sink sees without an
// Assigned: its positions are Iggy's). k.mu must be held.
func (k *Positions) entry(p Partition) *position {
	pos, ok := k.parts[p]
	if !ok {
		pos = &position{}
		k.parts[p] = pos
	}
	return pos
}
