package server

import (
	"errors"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// storeCode maps a store error to the Iggy error code a reply carries. limit is the code
// for store.ErrLimit in the caller's context (1020 streams, 2021 topics, 3013
// partitions).
func storeCode(err error, limit uint32) uint32 {
	var se *wire.ServerError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &se):
		return se.Code
	case errors.Is(err, store.ErrStorageFault):
		// Every write while storage is faulted (full disk, read-only or vanished
		// data dir): Iggy's code for a write its storage could not take.
		return wire.ErrCannotSaveMessagesToSegment.Code
	case errors.Is(err, store.ErrStreamNotFound):
		return wire.ErrStreamIDNotFound.Code
	case errors.Is(err, store.ErrTopicNotFound):
		return wire.ErrTopicIDNotFound.Code
	case errors.Is(err, store.ErrPartitionNotFound):
		return wire.ErrPartitionNotFound.Code
	case errors.Is(err, store.ErrGroupNotFound):
		return wire.ErrConsumerGroupIDNotFound.Code
	case errors.Is(err, store.ErrStreamExists):
		return wire.ErrStreamNameAlreadyExists.Code
	case errors.Is(err, store.ErrTopicExists):
		return wire.ErrTopicNameAlreadyExists.Code
	case errors.Is(err, store.ErrGroupExists):
		return wire.ErrConsumerGroupNameAlreadyExists.Code
	case errors.Is(err, store.ErrOffsetOutOfRange):
		return wire.ErrInvalidOffset.Code
	case errors.Is(err, store.ErrConsumerOffsetNotFound):
		return wire.ErrConsumerOffsetNotFound.Code
	case errors.Is(err, store.ErrTokenExists):
		return wire.ErrPATAlreadyExists.Code
	case errors.Is(err, store.ErrTokenLimit):
		return wire.ErrPATLimitReached.Code
	case errors.Is(err, store.ErrTokenNotFound), errors.Is(err, store.ErrUserNotFound):
		return wire.ErrResourceNotFound.Code
	case errors.Is(err, store.ErrInvalidName):
		return wire.ErrInvalidCommand.Code
	case errors.Is(err, store.ErrLimit):
		if limit != 0 {
			return limit
		}
	}
	return wire.ErrGeneric.Code
}

// logFail logs an unexpected failure (one without a specific Iggy code).
func (s *Server) logFail(what string, err error, code uint32) {
	if code == wire.ErrGeneric.Code {
		s.log.Error(what, "err", err)
	}
}

// reject answers a failed metadata operation with a committed rejection.
func (s *Server) reject(h wire.RequestHeader, what string, err error, limit uint32) []byte {
	code := storeCode(err, limit)
	s.logFail(what, err, code)
	return wire.AppendRejectReply(nil, h, code)
}

// deny answers a request with a status (pre-execution denial).
func (s *Server) deny(h wire.RequestHeader, what string, err error) []byte {
	code := storeCode(err, 0)
	s.logFail(what, err, code)
	return wire.AppendStatusReply(nil, h, code)
}

func (s *Server) stream(id wire.Identifier) (store.Stream, error) {
	if id.Kind == wire.IDNumeric {
		return s.st.Stream(id.Num)
	}
	return s.st.StreamByName(id.Name)
}

func (s *Server) topic(stream, id wire.Identifier) (store.Stream, store.Topic, error) {
	st, err := s.stream(stream)
	if err != nil {
		return st, store.Topic{}, err
	}
	var t store.Topic
	if id.Kind == wire.IDNumeric {
		t, err = s.st.Topic(st.ID, id.Num)
	} else {
		t, err = s.st.TopicByName(st.ID, id.Name)
	}
	return st, t, err
}

func (s *Server) group(stream, topic, id wire.Identifier) (store.Topic, store.Group, error) {
	_, t, err := s.topic(stream, topic)
	if err != nil {
		return t, store.Group{}, err
	}
	var g store.Group
	if id.Kind == wire.IDNumeric {
		g, err = s.st.Group(t.StreamID, t.ID, id.Num)
	} else {
		g, err = s.st.GroupByName(t.StreamID, t.ID, id.Name)
	}
	return t, g, err
}

func hasPartition(t store.Topic, id uint32) bool {
	for _, p := range t.Partitions {
		if p.ID == id {
			return true
		}
	}
	return false
}

func partitionIDs(t store.Topic) []uint32 {
	out := make([]uint32, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = p.ID
	}
	return out
}
