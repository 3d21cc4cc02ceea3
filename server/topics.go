package server

import (
	"errors"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// Topics and partitions.

func (s *Server) topicHeader(t store.Topic) (wire.TopicHeader, error) {
	tot, err := s.st.TopicTotals(t.StreamID, t.ID)
	if err != nil {
		return wire.TopicHeader{}, err
	}
	explicit, derived := decodeTopicOptions(t.Options)
	return wire.TopicHeader{
		ID: t.ID, CreatedAt: t.CreatedAt, PartitionsCount: uint32(len(t.Partitions)),
		MessageExpiry: t.MessageExpiry, Compression: t.Compression, MaxTopicSize: t.MaxTopicSize,
		SizeBytes: tot.Bytes, MessagesCount: tot.Messages, Name: t.Name,
		ExplicitOptions: explicit, DerivedOptions: derived,
	}, nil
}

func (s *Server) topicDetails(t store.Topic) (wire.TopicDetails, error) {
	th, err := s.topicHeader(t)
	if err != nil {
		return wire.TopicDetails{}, err
	}
	d := wire.TopicDetails{TopicHeader: th, Partitions: make([]wire.PartitionResponse, 0, len(t.Partitions))}
	for _, p := range t.Partitions {
		ps, err := s.st.Stats(store.PartitionKey{Stream: t.StreamID, Topic: t.ID, Partition: p.ID})
		if err != nil {
			return wire.TopicDetails{}, err
		}
		d.Partitions = append(d.Partitions, wire.PartitionResponse{
			ID: p.ID, CreatedAt: p.CreatedAt, SegmentsCount: segmentsCount(ps), CurrentOffset: ps.CurrentOffset(),
			SizeBytes: ps.Bytes, MessagesCount: ps.Messages,
		})
	}
	return d, nil
}

// segmentsCount is a partition's segments_count: Iggy always has an open
// segment, so an empty partition reports 1.
func segmentsCount(ps store.PartitionStats) uint32 { return max(1, ps.Segments) }

func (s *Server) createTopic(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeCreateTopicRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if req.PartitionsCount > wire.MaxPartitionsPerRequest {
		return wire.AppendStatusReply(nil, h, wire.ErrTooManyPartitions.Code)
	}
	ts, err := parseTopicOptions(req.Options, true, req.PartitionsCount, 0)
	if err != nil {
		s.log.Debug("create topic: options rejected", "err", err)
		return wire.AppendStatusReply(nil, h, wire.ErrorCode(err))
	}
	st, err := s.stream(req.Stream)
	if err != nil {
		return s.reject(h, "create topic", err, 0)
	}
	if out := s.checkPartitionCaps(h, 0, req.PartitionsCount); out != nil {
		return out
	}
	t, err := s.st.CreateTopic(st.ID, req.PartitionsCount, store.TopicConfig{
		Name: req.Name, MessageExpiry: ts.expiry, MaxTopicSize: ts.maxSize, Compression: ts.compression,
		SegmentSize: ts.segmentSize, Options: encodeTopicOptions(ts.explicit, ts.derived),
	})
	if err != nil {
		return s.reject(h, "create topic", err, wire.ErrTooManyTopics.Code)
	}
	d, err := s.topicDetails(t)
	if err != nil {
		return s.reject(h, "create topic", err, 0)
	}
	return wire.AppendOKReply(nil, h, d.Append(nil))
}

func (s *Server) getTopic(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeGetTopicRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	d, err := s.topicDetails(t)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	return wire.AppendOKReply(nil, h, d.Append(nil))
}

func (s *Server) getTopics(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeGetTopicsRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	var out []wire.TopicHeader
	if st, err := s.stream(req.Stream); err == nil {
		topics, _ := s.st.Topics(st.ID)
		for _, t := range topics {
			if th, err := s.topicHeader(t); err == nil {
				out = append(out, th)
			}
		}
	}
	return wire.AppendOKReply(nil, h, wire.AppendTopics(nil, out))
}

func (s *Server) updateTopic(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeUpdateTopicRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	var ts topicSettings
	if err == nil {
		explicit, _ := decodeTopicOptions(t.Options)
		ts, err = parseTopicOptions(req.Options, false, 0, segmentSizeOf(explicit))
		var se *wire.ServerError
		if errors.As(err, &se) {
			return wire.AppendStatusReply(nil, h, se.Code)
		}
	} else {
		// Option faults are checked before the topic resolves upstream too.
		if _, perr := parseTopicOptions(req.Options, false, 0, defaultSegmentSize); perr != nil {
			return wire.AppendStatusReply(nil, h, wire.ErrorCode(perr))
		}
	}
	if err != nil {
		return s.reject(h, "update topic", err, 0)
	}
	cfg := t.TopicConfig
	cfg.Name = req.Name
	for _, kv := range ts.explicit {
		switch string(kv.Key.Raw) {
		case wire.OptCompressionAlgorithm:
			cfg.Compression = ts.compression
		case wire.OptMessageExpiry:
			cfg.MessageExpiry = ts.expiry
		case wire.OptMaxTopicSize:
			cfg.MaxTopicSize = ts.maxSize
		}
	}
	explicit, derived := decodeTopicOptions(t.Options)
	cfg.Options = encodeTopicOptions(mergeOptions(explicit, ts.explicit), dropOptions(derived, ts.explicit))
	if err := s.st.UpdateTopic(t.StreamID, t.ID, cfg); err != nil {
		return s.reject(h, "update topic", err, 0)
	}
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) deleteTopic(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeDeleteTopicRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err == nil {
		err = s.st.DeleteTopic(t.StreamID, t.ID)
	}
	if err != nil {
		return s.reject(h, "delete topic", err, 0)
	}
	s.groups.dropWhere(func(k groupKey) bool { return k.stream == t.StreamID && k.topic == t.ID })
	s.forgetRoundRobin(func(k [2]uint32) bool { return k == [2]uint32{t.StreamID, t.ID} })
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) purgeTopic(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodePurgeTopicRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err == nil {
		err = s.st.PurgeTopic(t.StreamID, t.ID)
	}
	if err != nil {
		return s.reject(h, "purge topic", err, 0)
	}
	s.groups.forgetPolled(func(k groupKey) bool { return k.stream == t.StreamID && k.topic == t.ID })
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) createPartitions(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeCreatePartitionsRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if req.PartitionsCount == 0 || req.PartitionsCount > wire.MaxPartitionsPerRequest {
		return wire.AppendStatusReply(nil, h, wire.ErrTooManyPartitions.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err == nil {
		if out := s.checkPartitionCaps(h, len(t.Partitions), req.PartitionsCount); out != nil {
			return out
		}
		_, err = s.st.CreatePartitions(t.StreamID, t.ID, req.PartitionsCount)
	}
	if err != nil {
		if errors.Is(err, store.ErrPartitionsCount) {
			return wire.AppendRejectReply(nil, h, wire.ErrTooManyPartitions.Code)
		}
		return s.reject(h, "create partitions", err, wire.ErrPartitionIDSpaceExhausted.Code)
	}
	s.groups.rebalanceTopic(t.StreamID, t.ID)
	return wire.AppendOKReply(nil, h, nil)
}

// checkPartitionCaps refuses, with 2015 TooManyPartitions, adding n partitions to a
// topic holding has when the topic would pass Config.MaxPartitionsPerTopic or the
// server Config.MaxPartitions; nil when they fit. The caller holds s.meta, so no
// other creation runs between the check and the write.
func (s *Server) checkPartitionCaps(h wire.RequestHeader, has int, n uint32) []byte {
	if has+int(n) > s.cfg.MaxPartitionsPerTopic {
		s.log.Warn("partitions refused: the topic would pass its cap", "has", has, "adding", n, "max_per_topic", s.cfg.MaxPartitionsPerTopic)
		return wire.AppendRejectReply(nil, h, wire.ErrTooManyPartitions.Code)
	}
	total, err := s.st.PartitionsCount()
	if err != nil {
		return s.reject(h, "count partitions", err, 0)
	}
	if total+int(n) > s.cfg.MaxPartitions {
		s.log.Warn("partitions refused: the server would pass its cap", "has", total, "adding", n, "max", s.cfg.MaxPartitions)
		return wire.AppendRejectReply(nil, h, wire.ErrTooManyPartitions.Code)
	}
	return nil
}

func (s *Server) deletePartitions(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeDeletePartitionsRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if req.PartitionsCount == 0 || req.PartitionsCount > wire.MaxPartitionsPerRequest {
		return wire.AppendStatusReply(nil, h, wire.ErrTooManyPartitions.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err == nil {
		err = s.st.DeletePartitions(t.StreamID, t.ID, req.PartitionsCount)
	}
	if err != nil {
		if errors.Is(err, store.ErrPartitionsCount) {
			return wire.AppendRejectReply(nil, h, wire.ErrInvalidPartitionsCount.Code)
		}
		return s.reject(h, "delete partitions", err, 0)
	}
	s.groups.rebalanceTopic(t.StreamID, t.ID)
	return wire.AppendOKReply(nil, h, nil)
}
