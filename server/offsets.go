package server

import (
	"errors"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// Consumer offsets.

// offsetTarget resolves the partition and consumer of an offset request. forWrite
// applies the Store/Delete rules: the partition must be given and, for a group, owned
// by client (pending revocations included).
func (s *Server) offsetTarget(c wire.Consumer, stream, topic wire.Identifier, p wire.OptionalPartition, forWrite bool, client wire.ClientID) (store.PartitionKey, store.Consumer, *groupKey, error) {
	if forWrite && !p.Set {
		return store.PartitionKey{}, store.Consumer{}, nil, wire.ErrResourceNotFound
	}
	_, t, err := s.topic(stream, topic)
	if err != nil {
		return store.PartitionKey{}, store.Consumer{}, nil, err
	}
	k := store.PartitionKey{Stream: t.StreamID, Topic: t.ID, Partition: p.ID}
	if c.Kind == wire.ConsumerSingle {
		return k, store.Consumer{Kind: store.KindConsumer, ID: consumerID(c)}, nil, nil
	}
	var g store.Group
	if c.ID.Kind == wire.IDNumeric {
		g, err = s.st.Group(t.StreamID, t.ID, c.ID.Num)
	} else {
		g, err = s.st.GroupByName(t.StreamID, t.ID, c.ID.Name)
	}
	if err != nil {
		return k, store.Consumer{}, nil, err
	}
	gk := groupKey{t.StreamID, t.ID, g.ID}
	if forWrite && !s.groups.owns(gk, client, p.ID) {
		return k, store.Consumer{}, nil, wire.ErrResourceNotFound
	}
	return k, store.Consumer{Kind: store.KindGroup, ID: g.ID}, &gk, nil
}

func (s *Server) getConsumerOffset(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeGetConsumerOffsetRequest(body)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	k, cons, _, err := s.offsetTarget(req.Consumer, req.Stream, req.Topic, req.Partition, false, wire.ClientID{})
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	stats, err := s.st.Stats(k)
	if err != nil {
		return s.deny(h, "get consumer offset", err) // S:3007: the stream and topic exist
	}
	stored, found, err := s.st.ConsumerOffset(k, cons)
	if err != nil || !found {
		return wire.AppendOKReply(nil, h, nil)
	}
	return wire.AppendOKReply(nil, h, wire.ConsumerOffsetInfo{
		PartitionID: k.Partition, CurrentOffset: stats.CurrentOffset(), StoredOffset: stored,
	}.Append(nil))
}

func (s *Server) storeConsumerOffset(h wire.RequestHeader, body []byte, client wire.ClientID) []byte {
	req, err := wire.DecodeStoreConsumerOffsetRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
	}
	k, cons, gk, err := s.offsetTarget(req.Consumer, req.Stream, req.Topic, req.Partition, true, client)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
	}
	if err := s.st.StoreConsumerOffset(k, cons, req.Offset); err != nil {
		return wire.AppendStatusReply(nil, h, offsetWriteCode(err, wire.ErrInvalidOffset.Code))
	}
	if gk != nil {
		s.groups.committed(*gk, k.Partition, req.Offset)
	}
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) deleteConsumerOffset(h wire.RequestHeader, body []byte, client wire.ClientID) []byte {
	req, err := wire.DecodeDeleteConsumerOffsetRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
	}
	k, cons, _, err := s.offsetTarget(req.Consumer, req.Stream, req.Topic, req.Partition, true, client)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrResourceNotFound.Code)
	}
	if err := s.st.DeleteConsumerOffset(k, cons); err != nil {
		return wire.AppendStatusReply(nil, h, offsetWriteCode(err, wire.ErrConsumerOffsetNotFound.Code))
	}
	return wire.AppendOKReply(nil, h, nil)
}

// offsetWriteCode is the status of a failed offset store or delete: own (the
// command's own refusal), the storage fault's code when storage refused the write,
// else ResourceNotFound, as Iggy answers both commands. A storage fault must not read
// as ResourceNotFound: a group member takes that to mean the partition is no longer
// its own, drops it and polls it again from the stored offset, a redelivery loop for
// as long as the fault lasts.
func offsetWriteCode(err error, own uint32) uint32 {
	switch code := storeCode(err, 0); {
	case code == own, errors.Is(err, store.ErrStorageFault):
		return code
	}
	return wire.ErrResourceNotFound.Code
}
