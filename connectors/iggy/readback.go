package iggy

import (
	"context"
	"fmt"

	iggyclient "github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// heldBack is what the local topic holds of each remote partition (a lane), read back at
// Open and checked against the remote. Read's goroutine only.
type heldBack struct {
	origins    *sdk.Origins[uint64]
	pos        map[string]uint64 // lane → the newest remote offset held (after the check)
	passed     map[string]bool   // lanes whose replay went past what is held: nothing more to skip
	partitions int               // the local topic's partitions (read: true)
	read       bool
}

// newest is the newest message of a lane found in the read-back: its offset and id.
type newest struct {
	partition uint32 // the remote partition
	offset    uint64
	id        sdk.MessageID
}

// readBack reads the local topic's last messages (sdk.ReadBack, cfg.window per
// partition) and keeps, per lane of the current remote topic, the newest remote offset
// held, once the remote confirmed that its message at that offset is the one held (same
// id): a remote partition purged and refilled, or a topic recreated, is replicated again,
// not skipped.
func readBack(ctx context.Context, env sdk.SourceEnv, cfg *config, c *iggyclient.Client, id iggyclient.TopicIdentity) (*heldBack, error) {
	found := map[string]newest{}
	parse := func(m sdk.SentMessage) (sdk.Origin[uint64], bool) {
		st, ok1 := sdk.Lookup(m.Headers, HeaderStream)
		tp, ok2 := sdk.Lookup(m.Headers, HeaderTopic)
		pf, ok3 := sdk.Lookup(m.Headers, HeaderPartition)
		of, ok4 := sdk.Lookup(m.Headers, HeaderOffset)
		cf, ok5 := sdk.Lookup(m.Headers, HeaderCreatedAt)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
			return sdk.Origin[uint64]{}, false
		}
		p, err1 := pf.AsUint64()
		off, err2 := of.AsUint64()
		created, err3 := cf.AsUint64()
		if err1 != nil || err2 != nil || err3 != nil {
			return sdk.Origin[uint64]{}, false
		}
		lane := laneOf(string(st.Value), string(tp.Value), uint32(p), created)
		if cur, ok := found[lane]; !ok || off > cur.offset {
			found[lane] = newest{partition: uint32(p), offset: off, id: m.ID}
		}
		return sdk.Origin[uint64]{Lane: lane, Pos: off}, true
	}
	o, err := sdk.ReadBack(ctx, env, cfg.window(), parse, func(a, b uint64) bool { return a < b })
	if err != nil {
		return nil, err
	}
	h := &heldBack{origins: o, pos: map[string]uint64{}, passed: map[string]bool{}, partitions: o.Partitions(), read: o.Read()}
	for lane, n := range found {
		if lane != laneOf(cfg.Stream, cfg.Topic, n.partition, id.CreatedAt) {
			continue // another topic's, or an earlier incarnation of this one
		}
		same, err := remoteHas(ctx, c, cfg, n)
		if err != nil {
			return nil, err
		}
		if !same {
			h.passed[lane] = true
			continue
		}
		h.pos[lane] = n.offset
	}
	return h, nil
}

// remoteHas reports whether the remote partition still holds, at n's offset, the message
// the local topic holds (same id).
func remoteHas(ctx context.Context, c *iggyclient.Client, cfg *config, n newest) (bool, error) {
	part := n.partition
	r, err := c.PollMessages(ctx, iggyclient.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(0)},
		Stream: iggyclient.Name(cfg.Stream), Topic: iggyclient.Name(cfg.Topic), Partition: &part,
		Strategy: wire.PollOffset(n.offset), Count: 1})
	if err != nil {
		return false, fmt.Errorf("check the remote message at offset %d of partition %d of %s: %w", n.offset, part, cfg.where(), err)
	}
	defer r.Release()
	if len(r.Messages) == 0 || r.Messages[0].Offset != n.offset {
		return false, nil
	}
	m := r.Messages[0]
	var id sdk.MessageID
	putID(&id, m.ID)
	return id == n.id, nil
}

func putID(dst *sdk.MessageID, id wire.Uint128) {
	for i := range 8 {
		dst[i] = byte(id.Lo >> (8 * i))
		dst[8+i] = byte(id.Hi >> (8 * i))
	}
}

// holds reports whether the local topic already holds the remote message at offset of
// lane: at or below what was read back, in the partition the message goes to.
func (h *heldBack) holds(lane string, key []byte, part uint32, offset uint64, p partitioning) bool {
	if h.passed[lane] {
		return false
	}
	top, ok := h.pos[lane]
	if !ok || offset > top {
		return false
	}
	switch p {
	case partitionSame:
		return h.origins.Holds(int(part), lane, offset) // partition n goes to index n (Open checked there are enough)
	case partitionKey:
		return h.origins.HoldsKeyed(key, lane, offset)
	}
	return false // balanced: batches in flight may land out of order across partitions (at least once)
}

// pass records that the replay of lane went past what is held.
func (h *heldBack) pass(lane string) { h.passed[lane] = true }

// forget drops what was read back of lane (its remote partition was purged).
func (h *heldBack) forget(lane string) { h.passed[lane] = true; delete(h.pos, lane) }
