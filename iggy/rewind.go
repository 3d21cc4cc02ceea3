package iggy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// A partition can go back under a member: PurgeTopic and PurgeStream delete its messages,
// reset it to offset 0 and clear its stored offsets, while the topic keeps its id,
// creation time and groups. A member that went on polling from its local position would
// skip the new messages below it and, if enough came, deliver the rest as if nothing had
// happened: the partition's current offset alone cannot tell, since new messages can
// reach the old position before the next poll.
//
// So the member checks one message of overlap: once it has handed out a message (or a
// checked Seek names the message expected before the position), the message at
// position−1 must still be that one (its server timestamp, id and checksum; the server
// gives every appended message a new timestamp, so a rewritten offset differs), before
// anything past it is handed out. While the partition streams (its last poll brought
// messages), each poll starts at position−1 and asks for one message more, and the
// overlap message is dropped after the check. While it is idle, polls start at the
// position as before (an empty reply costs nothing more), and the first one that brings
// messages is followed by a poll of the one message at position−1, before its batch is
// handed on; an empty reply whose current offset is below position−1 is a rewind too,
// and once a second an idle poll carries the overlap (a partition refilled up to exactly
// the position shows nothing else). The partition went back when the message found there
// is another one, or none is there any more (the partition now ends below it). Then its
// assignment starts afresh at offset 0 (reported revoked and assigned, with
// AssignmentChange.Rewound), what the member held of it is void (StoreOffsetIn refuses
// its offsets with ErrPartitionRewound), and the group's stored offset of it is deleted
// (a store of the old position may have landed after the purge, or the poll that noticed
// stored one under AutoCommit).

// idleCheckEvery is how often an idle partition's poll carries the overlap message: a
// partition purged and refilled up to exactly the member's position, then left idle,
// shows nothing else (its polls from the position stay empty, its current offset is the
// old one).
const idleCheckEvery = time.Second

// ErrPartitionRewound is returned by Consumer.StoreOffsetIn, without sending anything, for
// an offset of an assignment of the partition from before it was found rewound (purged):
// it describes messages that are gone. Not retriable.
var ErrPartitionRewound = errors.New("iggy: the partition went back to an earlier offset (purged)")

// PartitionRewind is one partition found rewound: the member was at Position (the offset
// it would have polled next) and the partition's current offset was Current (0 for an
// empty partition) when the poll noticed it; Reason says what the poll found.
type PartitionRewind struct {
	Partition uint32
	Position  uint64
	Current   uint64
	Reason    string
}

// msgMark identifies a message the member expects at offset: the last one it handed out
// of a partition (full: the id and checksum are known too) or the one a checked Seek
// names by its timestamp alone.
type msgMark struct {
	set       bool
	full      bool
	offset    uint64
	timestamp uint64
	id        wire.Uint128
	checksum  uint64
}

func markOf(m *wire.Message) msgMark {
	return msgMark{set: true, full: true, offset: m.Offset, timestamp: m.Timestamp, id: m.ID, checksum: m.Checksum}
}

// matches reports whether m is the message the mark names.
func (k msgMark) matches(m *wire.Message) bool {
	if m.Offset != k.offset || m.Timestamp != k.timestamp {
		return false
	}
	return !k.full || (m.ID == k.id && m.Checksum == k.checksum)
}

// overlap judges the reply of a poll that started at mark.offset: it returns the
// messages past the overlap, or why the partition went back ("" when it did not).
func overlap(mark msgMark, current uint64, msgs []wire.Message) ([]wire.Message, string) {
	if len(msgs) == 0 {
		if current < mark.offset {
			return nil, fmt.Sprintf("its current offset %d is below offset %d, already delivered", current, mark.offset)
		}
		return nil, fmt.Sprintf("offset %d, already delivered, is gone (the partition is empty)", mark.offset)
	}
	first := &msgs[0]
	switch {
	case first.Offset > mark.offset:
		// Retention removed the overlap message: nothing of it says the partition went
		// back (a purge starts again at 0, below it).
		return msgs, ""
	case first.Offset < mark.offset:
		return nil, fmt.Sprintf("a poll from offset %d began at offset %d", mark.offset, first.Offset)
	case !mark.matches(first):
		return nil, fmt.Sprintf("the message at offset %d is not the one delivered (timestamp %d, was %d)", mark.offset, first.Timestamp, mark.timestamp)
	}
	return msgs[1:], ""
}

// rewindLocked starts partition p afresh at offset 0 after assignment st was found
// rewound (cn.mu held): a new partState with no known stored offset, a new life for its
// stores, and a report of the rewind at the next Poll.
func (cn *Consumer) rewindLocked(p uint32, st *partState, current uint64, why string) {
	cn.c.cfg.logger.Debug("iggy: partition went back to an earlier offset; it starts afresh at 0",
		"stream", cn.cfg.Stream.String(), "topic", cn.cfg.Topic.String(), "group", cn.cfg.Group,
		"partition", p, "position", st.next, "current_offset", current, "reason", why)
	cn.rewinds = append(cn.rewinds, PartitionRewind{Partition: p, Position: st.next, Current: current, Reason: why})
	cn.incarnation++
	if cn.rewoundAt == nil {
		cn.rewoundAt = map[uint32]uint64{}
	}
	cn.rewoundAt[p] = cn.incarnation
	cn.retireLocked(p, st)
	cn.parts[p] = &partState{hasPos: true}
	if cn.kept != nil && cn.kept.batch.Partition == p {
		cn.c.putBuf(cn.kept)
		cn.kept = nil
	}
	cn.changedLocked()
}

// clearStored deletes the group's stored offset of a partition found rewound (cn.op
// held): whatever is there was stored after the purge for messages that are gone, and
// would make a member that starts before the next store skip the new ones. None stored
// is the usual case.
func (cn *Consumer) clearStored(ctx context.Context, p uint32) {
	req := wire.DeleteConsumerOffsetRequest{Consumer: wire.Consumer{Kind: wire.ConsumerGroup, ID: cn.group},
		Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Partition: wire.PartitionID(p), Ack: wire.AckQuorum}
	if err := cn.c.simple(ctx, cn.link, req, false, nil); err != nil && !errors.Is(err, wire.ErrConsumerOffsetNotFound) {
		cn.c.cfg.logger.Warn("iggy: could not delete the stored offset of a partition found rewound; the next store replaces it",
			"group", cn.cfg.Group, "partition", p, "err", err)
	}
}

// refusedLife says why an offset of life may not be stored for partition p (cn.mu
// held): the topic was replaced, or p found rewound, since that life.
func (cn *Consumer) refusedLife(p uint32, life uint64) error {
	switch {
	case life < cn.topicLife:
		return fmt.Errorf("%w: offset of incarnation %d, the topic is at %d", ErrTopicReplaced, life, cn.topicLife)
	case life < cn.rewoundAt[p]:
		return fmt.Errorf("%w: offset of incarnation %d, partition %d went back at %d", ErrPartitionRewound, life, p, cn.rewoundAt[p])
	}
	return nil
}
