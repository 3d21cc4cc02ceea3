package iggy

import (
	"context"

	"github.com/ferryio/ferry/iggy/wire"
)

// Consumer offsets and consumer groups (low level). Group membership belongs to a
// connection; the Client's membership is its first pool connection (see Client), which
// rejoins its groups after every reconnect.

// ConsumerOffset is a stored consumer offset and the partition's current (last) offset.
type ConsumerOffset struct {
	PartitionID                 uint32
	CurrentOffset, StoredOffset uint64
}

func (c *Client) linkFor(consumer wire.Consumer) *link {
	if consumer.Kind == wire.ConsumerGroup {
		return c.pool[0]
	}
	return nil
}

// StoreOffset sets the stored offset of consumer (exactly, it may move backwards).
// Errors: wire.ErrInvalidOffset beyond the partition's last offset; wire.ErrNotFound
// (ResourceNotFound) for an unknown stream/topic/partition or, for a group, a partition
// this member does not own. Retried transparently (storing twice is harmless).
func (c *Client) StoreOffset(ctx context.Context, consumer wire.Consumer, stream, topic Identifier, partition uint32, offset uint64) error {
	req := wire.StoreConsumerOffsetRequest{Consumer: consumer, Stream: stream, Topic: topic,
		Partition: wire.PartitionID(partition), Offset: offset, Ack: wire.AckQuorum}
	if err := c.simple(ctx, c.linkFor(consumer), req, true, nil); err != nil {
		return opErr("store offset", res(&stream, &topic, int64(partition)), err)
	}
	return nil
}

// GetOffset returns consumer's stored offset; found is false when none is stored (or the
// stream, topic or group does not exist).
func (c *Client) GetOffset(ctx context.Context, consumer wire.Consumer, stream, topic Identifier, partition uint32) (ConsumerOffset, bool, error) {
	return c.getOffset(ctx, nil, consumer, stream, topic, partition)
}

// getOffset is GetOffset on l (nil = the pool).
func (c *Client) getOffset(ctx context.Context, l *link, consumer wire.Consumer, stream, topic Identifier, partition uint32) (ConsumerOffset, bool, error) {
	var out ConsumerOffset
	var found bool
	req := wire.GetConsumerOffsetRequest{Consumer: consumer, Stream: stream, Topic: topic, Partition: wire.PartitionID(partition)}
	err := c.call(ctx, l, req, true, func(p []byte) error {
		o, ok, err := wire.DecodeConsumerOffsetInfo(p)
		out, found = ConsumerOffset(o), ok
		return decodeErr(err)
	})
	if err != nil {
		return ConsumerOffset{}, false, opErr("get offset", res(&stream, &topic, int64(partition)), err)
	}
	return out, found, nil
}

// DeleteOffset removes consumer's stored offset; wire.ErrConsumerOffsetNotFound if none.
func (c *Client) DeleteOffset(ctx context.Context, consumer wire.Consumer, stream, topic Identifier, partition uint32) error {
	req := wire.DeleteConsumerOffsetRequest{Consumer: consumer, Stream: stream, Topic: topic,
		Partition: wire.PartitionID(partition), Ack: wire.AckQuorum}
	if err := c.simple(ctx, c.linkFor(consumer), req, false, nil); err != nil {
		return opErr("delete offset", res(&stream, &topic, int64(partition)), err)
	}
	return nil
}

// CreateConsumerGroup creates a group on a topic (wire.ErrAlreadyExists if the name is taken).
func (c *Client) CreateConsumerGroup(ctx context.Context, stream, topic Identifier, name string) (wire.GroupDetails, error) {
	var out wire.GroupDetails
	req := wire.CreateConsumerGroupRequest{Stream: stream, Topic: topic, Name: name}
	where := res(&stream, &topic, -1) + " group " + Name(name).String()
	if err := wire.CheckRequest(req); err != nil {
		return out, opErr("create consumer group", where, err)
	}
	err := c.call(ctx, nil, req, false, func(p []byte) error {
		g, _, err := wire.DecodeGroupDetails(p)
		out = g
		return decodeErr(err)
	})
	if err != nil {
		return wire.GroupDetails{}, opErr("create consumer group", where, err)
	}
	return out, nil
}

// GetConsumerGroup returns a group with its members and their partitions;
// wire.ErrConsumerGroupIDNotFound if it does not exist.
func (c *Client) GetConsumerGroup(ctx context.Context, stream, topic, group Identifier) (wire.GroupDetails, error) {
	var out wire.GroupDetails
	err := c.call(ctx, nil, wire.GetConsumerGroupRequest{Stream: stream, Topic: topic, Group: group}, true, func(p []byte) error {
		g, found, err := wire.DecodeGroupDetails(p)
		if err != nil {
			return decodeErr(err)
		}
		if !found {
			return wire.ErrConsumerGroupIDNotFound
		}
		out = g
		return nil
	})
	if err != nil {
		return wire.GroupDetails{}, opErr("get consumer group", res(&stream, &topic, -1)+" group "+group.String(), err)
	}
	return out, nil
}

// GetConsumerGroups lists a topic's groups.
func (c *Client) GetConsumerGroups(ctx context.Context, stream, topic Identifier) ([]wire.GroupHeader, error) {
	var out []wire.GroupHeader
	err := c.call(ctx, nil, wire.GetConsumerGroupsRequest{Stream: stream, Topic: topic}, true, func(p []byte) (err error) {
		out, err = wire.DecodeGroups(p)
		return decodeErr(err)
	})
	if err != nil {
		return nil, opErr("get consumer groups", res(&stream, &topic, -1), err)
	}
	return out, nil
}

// DeleteConsumerGroup deletes a group and its offsets.
func (c *Client) DeleteConsumerGroup(ctx context.Context, stream, topic, group Identifier) error {
	if err := c.simple(ctx, nil, wire.DeleteConsumerGroupRequest{Stream: stream, Topic: topic, Group: group}, false, nil); err != nil {
		return opErr("delete consumer group", res(&stream, &topic, -1)+" group "+group.String(), err)
	}
	return nil
}

// JoinConsumerGroup makes the Client (its first pool connection) a member of group; it
// rejoins after every reconnect until LeaveConsumerGroup. Joining twice is a no-op.
// The caller must send some request at least every 36 s (the heartbeat does when idle).
func (c *Client) JoinConsumerGroup(ctx context.Context, stream, topic, group Identifier) error {
	c.mu.Lock()
	c.groups[groupKey{stream, topic, group}] = struct{}{}
	c.mu.Unlock()
	if err := c.simple(ctx, c.pool[0], wire.JoinConsumerGroupRequest{Stream: stream, Topic: topic, Group: group}, true, nil); err != nil {
		c.mu.Lock()
		delete(c.groups, groupKey{stream, topic, group})
		c.mu.Unlock()
		return opErr("join consumer group", res(&stream, &topic, -1)+" group "+group.String(), err)
	}
	return nil
}

// LeaveConsumerGroup ends the Client's membership (wire.ErrConsumerGroupMemberNotFound
// if it is not a member).
func (c *Client) LeaveConsumerGroup(ctx context.Context, stream, topic, group Identifier) error {
	c.mu.Lock()
	delete(c.groups, groupKey{stream, topic, group})
	c.mu.Unlock()
	if err := c.simple(ctx, c.pool[0], wire.LeaveConsumerGroupRequest{Stream: stream, Topic: topic, Group: group}, false, nil); err != nil {
		return opErr("leave consumer group", res(&stream, &topic, -1)+" group "+group.String(), err)
	}
	return nil
}

// SyncConsumerGroup returns the Client's current assignment in group: the generation
// and the partitions it may poll. wire.ErrConsumerGroupMemberNotFound if it is not a
// member (then join again).
func (c *Client) SyncConsumerGroup(ctx context.Context, stream, topic, group Identifier) (wire.SyncAssignment, error) {
	out, err := c.syncOn(ctx, c.pool[0], stream, topic, group)
	if err != nil {
		return wire.SyncAssignment{}, opErr("sync consumer group", res(&stream, &topic, -1)+" group "+group.String(), err)
	}
	return out.SyncAssignment, nil
}

type syncResult struct {
	wire.SyncAssignment
	epoch uint64
}

func (c *Client) syncOn(ctx context.Context, l *link, stream, topic, group Identifier) (syncResult, error) {
	if c.isClosed() {
		return syncResult{}, ErrClosed
	}
	req := wire.SyncConsumerGroupRequest{Stream: stream, Topic: topic, Group: group}
	fp := bufPool.Get().(*[]byte)
	bp := bufPool.Get().(*[]byte)
	frame := frameOf(*fp, req)
	r := l.roundTrip(ctx, req.Code(), frame, *bp, true)
	out := syncResult{epoch: r.epoch}
	err := r.err
	if err == nil {
		s, found, derr := wire.DecodeSyncAssignment(r.payload)
		switch {
		case derr != nil:
			err = decodeErr(derr)
		case !found:
			err = wire.ErrConsumerGroupMemberNotFound
		default:
			out.SyncAssignment = s
		}
	}
	if r.abandoned {
		return out, err // the conn kept both buffers
	}
	*fp, *bp = frame[:0], r.body[:0]
	bufPool.Put(fp)
	bufPool.Put(bp)
	return out, err
}
