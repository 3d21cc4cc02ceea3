package server

import (
	"errors"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// SendMessages and PollMessages.

func (s *Server) send(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeSendMessagesRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
	}
	bh, err := req.Validate()
	if err != nil {
		// Upstream sends no reply for a faulty batch; we answer its code (3, 4027, 4039).
		return wire.AppendStatusReply(nil, h, wire.ErrorCode(err))
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
	}
	var pid uint32
	n := uint32(len(t.Partitions))
	switch req.Partitioning.Kind {
	case wire.PartitioningPartitionID:
		pid = req.Partitioning.PartitionID
		if !hasPartition(t, pid) {
			return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
		}
	case wire.PartitioningBalanced:
		if n == 0 {
			return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
		}
		pid = t.Partitions[s.nextRoundRobin(t.StreamID, t.ID)%n].ID
	case wire.PartitioningMessagesKey:
		if n == 0 {
			return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
		}
		pid = t.Partitions[wire.PartitionForKey(req.Partitioning.Key, n)].ID
	default:
		return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
	}
	k := store.PartitionKey{Stream: t.StreamID, Topic: t.ID, Partition: pid}
	batch := req.Batch // owned: the connection allocates a fresh body per frame
	ap, err := s.st.AppendFunc(k, bh.MessageCount, func(base, ts uint64) ([]byte, error) {
		return batch, wire.StampBatch(batch, uint64(pid), base, ts)
	})
	if err != nil {
		if errors.Is(err, store.ErrStreamNotFound) || errors.Is(err, store.ErrTopicNotFound) || errors.Is(err, store.ErrPartitionNotFound) {
			return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
		}
		return s.deny(h, "append", err)
	}
	return wire.AppendOKReply(nil, h, wire.SendMessagesReply{Confirmations: []wire.SendConfirmation{{
		StreamID: t.StreamID, TopicID: t.ID, PartitionID: pid, BaseOffset: ap.BaseOffset,
	}}}.Append(nil))
}

func (s *Server) nextRoundRobin(stream, topic uint32) uint32 {
	s.rrMu.Lock()
	defer s.rrMu.Unlock()
	k := [2]uint32{stream, topic}
	v := s.rr[k]
	s.rr[k] = v + 1
	return v
}

// pollReplyHeader is the size of the poll reply's fixed part before its messages.
var pollReplyHeader = len(wire.PollReply{}.Append(nil))

func emptyPoll(h wire.RequestHeader, partition uint32, current uint64) []byte {
	return wire.AppendOKReply(nil, h, wire.PollReply{PartitionID: partition, CurrentOffset: current}.Append(nil))
}

// consumerID maps a Consumer to the id its offsets are stored under: kind 1
// numeric id as is, string id XXH32(name); kind 2 resolves the group.
func consumerID(c wire.Consumer) uint32 {
	if c.ID.Kind == wire.IDNumeric {
		return c.ID.Num
	}
	return wire.XXH32([]byte(c.ID.Name), 0)
}

// poll serves PollMessages; *res is what the reply holds of the server's reply budget
// (Config.MaxReplyBytes), released by the connection once the reply was written. A
// nil reply means the server began closing while the poll waited for the budget.
func (s *Server) poll(h wire.RequestHeader, body []byte, res *int64) []byte {
	req, err := wire.DecodePollMessagesRequest(body)
	if err != nil {
		return emptyPoll(h, 0, 0)
	}
	var (
		k     store.PartitionKey
		cons  store.Consumer
		group *groupKey
	)
	if req.Consumer.Kind == wire.ConsumerGroup {
		if !req.Partition.Set {
			return emptyPoll(h, 0, 0)
		}
		t, g, err := s.group(req.Stream, req.Topic, req.Consumer.ID)
		if err != nil {
			return emptyPoll(h, wire.ResyncPartition, 0)
		}
		gk := groupKey{t.StreamID, t.ID, g.ID}
		if !s.groups.canPoll(gk, h.Client, req.Partition.ID) {
			return emptyPoll(h, wire.ResyncPartition, 0)
		}
		group = &gk
		k = store.PartitionKey{Stream: t.StreamID, Topic: t.ID, Partition: req.Partition.ID}
		cons = store.Consumer{Kind: store.KindGroup, ID: g.ID}
	} else {
		_, t, err := s.topic(req.Stream, req.Topic)
		if err != nil {
			return s.deny(h, "poll", err)
		}
		pid := req.Partition.ID // 0 when absent
		if !hasPartition(t, pid) {
			return wire.AppendStatusReply(nil, h, wire.ErrPartitionNotFound.Code)
		}
		k = store.PartitionKey{Stream: t.StreamID, Topic: t.ID, Partition: pid}
		cons = store.Consumer{Kind: store.KindConsumer, ID: consumerID(req.Consumer)}
	}
	out, last, n, err := s.readPoll(h, k, cons, req, res)
	if errors.Is(err, errServerClosing) {
		return nil
	}
	if err != nil {
		if group != nil {
			return emptyPoll(h, wire.ResyncPartition, 0)
		}
		return s.deny(h, "poll", err)
	}
	if n > 0 {
		if group != nil {
			s.groups.polled(*group, k.Partition, last)
		}
		if req.AutoCommit {
			if _, err := s.st.AdvanceConsumerOffset(k, cons, last); err != nil {
				s.log.Warn("poll auto-commit", "partition", k.String(), "err", err)
			}
		}
	}
	return out
}

// readPoll builds the poll reply; it returns the last offset served and the count. A
// poll with messages to read reserves from the reply budget before it reads (*res).
func (s *Server) readPoll(h wire.RequestHeader, k store.PartitionKey, cons store.Consumer, req wire.PollMessagesRequest, res *int64) ([]byte, uint64, uint32, error) {
	stats, err := s.st.Stats(k)
	if err != nil {
		return nil, 0, 0, err
	}
	cur := stats.CurrentOffset()
	count := min(req.Count, s.cfg.MaxPollMessages)
	if count == 0 || stats.Messages == 0 {
		return emptyPoll(h, k.Partition, cur), 0, 0, nil
	}
	var start uint64
	switch req.Strategy.Kind {
	case wire.PollingOffset:
		start = req.Strategy.Value
	case wire.PollingFirst:
		start = 0
	case wire.PollingLast:
		if cur >= uint64(count-1) {
			start = cur - uint64(count-1)
		}
	case wire.PollingNext:
		stored, found, err := s.st.ConsumerOffset(k, cons)
		if err != nil {
			return nil, 0, 0, err
		}
		if found {
			start = stored + 1
		}
	case wire.PollingTimestamp:
		off, found, err := s.st.OffsetForTimestamp(k, req.Strategy.Value)
		if err != nil {
			return nil, 0, 0, err
		}
		if !found {
			return emptyPoll(h, k.Partition, cur), 0, 0, nil
		}
		start = off
	}
	if start > cur {
		return emptyPoll(h, k.Partition, cur), 0, 0, nil
	}
	// The loaded batches and the reply built from them each take about what the poll
	// loads; the partition's size bounds it when smaller than the poll's byte cap.
	load := min(s.cfg.MaxPollBytes, uint64(s.cfg.MaxReplyBytes/2), stats.Bytes)
	if !s.replies.acquire(int64(2*load), s.quit) {
		return nil, 0, 0, errServerClosing
	}
	*res = int64(2 * load)
	rr, err := s.st.ReadLimit(k, start, count, load)
	if err != nil {
		return nil, 0, 0, err
	}
	loaded := 0
	for _, b := range rr.Batches {
		loaded += len(b.Data)
	}
	out := wire.AppendReplyPrefix(make([]byte, 0, wire.HeaderSize+pollReplyHeader+loaded), h)
	// Account what was really loaded and allocated (a first batch larger than the
	// cap is served whole), then, once built, only the reply.
	s.replies.adjust(*res, int64(loaded+cap(out)))
	*res = int64(loaded + cap(out))
	defer func() {
		s.replies.adjust(*res, int64(cap(out)))
		*res = int64(cap(out))
	}()
	head := len(out)
	out = wire.PollReply{}.Append(out)
	var total uint32
	first := uint64(0)
	for _, b := range rr.Batches {
		if total == 0 {
			first = max(start, b.BaseOffset)
		}
		var kept int
		out, kept, err = wire.SliceBatchFrom(out, b.Data, start, int(count-total))
		if err != nil {
			return nil, 0, 0, err
		}
		total += uint32(kept)
		if total >= count {
			break
		}
	}
	copy(out[head:], wire.PollReply{PartitionID: k.Partition, CurrentOffset: rr.Stats.CurrentOffset(), MessagesCount: total}.Append(nil))
	wire.SetFrameSize(out)
	return out, first + uint64(total) - 1, total, nil
}
