package iggy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ferryio/ferry/iggy/wire"
)

// A member's offset stores: lock-step with its polls and syncs (cn.op), never below the
// group's stored offset as the member knows it, never for a replaced topic's incarnation.

// StoreOffset stores offset as the group's offset of partition (StoreConsumerOffset on
// the member connection, lock-step with this member's polls and syncs).
//
// It never moves the group's offset backwards: an offset below the group's stored
// offset as this member knows it (what was stored when the partition was assigned to
// it, or what it stored since) is refused with ErrOffsetBehind and not sent. Partitions
// revoked from this member keep their floor, so a revoked partition's last offsets can
// be stored while the server keeps it pending revocation.
//
// Errors: wire.ErrNotFound (ResourceNotFound) if the member does not own the partition:
// the Consumer then drops it at once (the next Poll reports it revoked, and assigned
// afresh if the resync it triggers still lists it); wire.ErrInvalidOffset beyond the
// partition's end; ErrOffsetBehind; ErrClosed; ctx's error.
func (cn *Consumer) StoreOffset(ctx context.Context, partition uint32, offset uint64) error {
	return cn.storeOffset(ctx, partition, offset, nil)
}

func (cn *Consumer) storeOffset(ctx context.Context, partition uint32, offset uint64, life *uint64) error {
	where := res(&cn.cfg.Stream, &cn.cfg.Topic, int64(partition)) + " group " + cn.group.String()
	if err := cn.acquire(ctx); err != nil {
		return opErr("store offset", where, err)
	}
	defer cn.releaseOp()
	cn.mu.Lock()
	if life != nil {
		if err := cn.refusedLife(partition, *life); err != nil {
			cn.mu.Unlock()
			return opErr("store offset", where, fmt.Errorf("offset %d: %w", offset, err))
		}
	}
	st := cn.parts[partition]
	if st == nil {
		st = cn.former[partition]
	}
	if st != nil && st.storedKnown && offset < st.stored {
		floor := st.stored
		cn.mu.Unlock()
		return opErr("store offset", where, fmt.Errorf("%w: offset %d, stored %d", ErrOffsetBehind, offset, floor))
	}
	cn.mu.Unlock()
	req := wire.StoreConsumerOffsetRequest{Consumer: wire.Consumer{Kind: wire.ConsumerGroup, ID: cn.group},
		Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Partition: wire.PartitionID(partition), Offset: offset, Ack: wire.AckQuorum}
	err := cn.c.simple(ctx, cn.link, req, true, nil)
	cn.mu.Lock()
	switch {
	case st == nil:
	case err == nil:
		st.stored, st.storedKnown, st.unsureSet = offset, true, false
	case errors.Is(err, ErrOutcomeUnknown):
		st.unsure, st.unsureSet = offset, true
	}
	if errors.Is(err, wire.ErrNotFound) && st != nil && cn.parts[partition] == st {
		// The server says it is not ours: drop it now (reported revoked by the next Poll,
		// and assigned afresh if the next sync still lists it), and resync.
		delete(cn.parts, partition)
		cn.assigned = slices.DeleteFunc(cn.assigned, func(p uint32) bool { return p == partition })
		cn.retireLocked(partition, st)
		cn.needSync = true
		cn.changedLocked()
	}
	cn.mu.Unlock()
	if err != nil {
		return opErr("store offset", where, err)
	}
	return nil
}

// StoreOffsetIn is StoreOffset for an offset of the given incarnation (the one
// AssignmentChange.Incarnation reported with the partition's assignment): if the topic was
// found replaced since, nothing is sent and the error is ErrTopicReplaced; if the
// partition was found rewound since, ErrPartitionRewound.
func (cn *Consumer) StoreOffsetIn(ctx context.Context, incarnation uint64, partition uint32, offset uint64) error {
	return cn.storeOffset(ctx, partition, offset, &incarnation)
}
