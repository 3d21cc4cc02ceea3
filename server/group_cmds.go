package server

import (
	"errors"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// Consumer-group commands.

func (s *Server) groupDetails(t store.Topic, g store.Group) wire.GroupDetails {
	members := s.groups.members(groupKey{t.StreamID, t.ID, g.ID})
	return wire.GroupDetails{
		GroupHeader: wire.GroupHeader{ID: g.ID, PartitionsCount: uint32(len(t.Partitions)), MembersCount: uint32(len(members)), Name: g.Name},
		Members:     members,
	}
}

func (s *Server) createGroup(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeCreateConsumerGroupRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err != nil {
		return s.reject(h, "create group", err, 0)
	}
	g, err := s.st.CreateGroup(t.StreamID, t.ID, req.Name)
	if err != nil {
		return s.reject(h, "create group", err, 0)
	}
	return wire.AppendOKReply(nil, h, s.groupDetails(t, g).Append(nil))
}

func (s *Server) deleteGroup(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeDeleteConsumerGroupRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	t, g, err := s.group(req.Stream, req.Topic, req.Group)
	if err == nil {
		err = s.st.DeleteGroup(t.StreamID, t.ID, g.ID)
	}
	if err != nil {
		return s.reject(h, "delete group", err, 0)
	}
	k := groupKey{t.StreamID, t.ID, g.ID}
	s.groups.dropWhere(func(x groupKey) bool { return x == k })
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) joinGroup(h wire.RequestHeader, body []byte, client wire.ClientID) []byte {
	req, err := wire.DecodeJoinConsumerGroupRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	t, g, err := s.group(req.Stream, req.Topic, req.Group)
	if err != nil {
		return s.reject(h, "join group", err, 0)
	}
	s.groups.join(groupKey{t.StreamID, t.ID, g.ID}, client)
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) leaveGroup(h wire.RequestHeader, body []byte, client wire.ClientID) []byte {
	req, err := wire.DecodeLeaveConsumerGroupRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	t, g, err := s.group(req.Stream, req.Topic, req.Group)
	if err != nil {
		return s.reject(h, "leave group", err, 0)
	}
	if !s.groups.leave(groupKey{t.StreamID, t.ID, g.ID}, client) {
		return wire.AppendRejectReply(nil, h, wire.ErrConsumerGroupMemberNotFound.Code)
	}
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) getGroup(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeGetConsumerGroupRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	t, g, err := s.group(req.Stream, req.Topic, req.Group)
	switch {
	case errors.Is(err, store.ErrGroupNotFound):
		return wire.AppendOKReply(nil, h, nil)
	case err != nil:
		return s.deny(h, "get group", err)
	}
	return wire.AppendOKReply(nil, h, s.groupDetails(t, g).Append(nil))
}

func (s *Server) getGroups(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeGetConsumerGroupsRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err != nil {
		return s.deny(h, "get groups", err)
	}
	gs, err := s.st.Groups(t.StreamID, t.ID)
	if err != nil {
		return s.deny(h, "get groups", err)
	}
	out := make([]wire.GroupHeader, 0, len(gs))
	for _, g := range gs {
		out = append(out, s.groupDetails(t, g).GroupHeader)
	}
	return wire.AppendOKReply(nil, h, wire.AppendGroups(nil, out))
}

// syncGroup answers the caller's assignment; the member is the request header's client
// id. Any failure is an empty body ("not a member").
func (s *Server) syncGroup(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeSyncConsumerGroupRequest(body)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	t, g, err := s.group(req.Stream, req.Topic, req.Group)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	a, ok := s.groups.assignment(groupKey{t.StreamID, t.ID, g.ID}, h.Client)
	if !ok {
		return wire.AppendOKReply(nil, h, nil)
	}
	return wire.AppendOKReply(nil, h, a.Append(nil))
}
