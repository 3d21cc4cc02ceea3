package server

import (
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// Streams. Metadata ops run under Server.meta.

func (s *Server) streamResponse(st store.Stream) (wire.StreamResponse, error) {
	topics, err := s.st.Topics(st.ID)
	if err != nil {
		return wire.StreamResponse{}, err
	}
	tot, err := s.st.StreamTotals(st.ID)
	if err != nil {
		return wire.StreamResponse{}, err
	}
	return wire.StreamResponse{
		ID: st.ID, CreatedAt: st.CreatedAt, TopicsCount: uint32(len(topics)),
		SizeBytes: tot.Bytes, MessagesCount: tot.Messages, Name: st.Name,
	}, nil
}

func (s *Server) createStream(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeCreateStreamRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if len(req.Options) > 0 {
		return wire.AppendStatusReply(nil, h, wire.ErrUnsupportedOptionKey.Code)
	}
	st, err := s.st.CreateStream(req.Name)
	if err != nil {
		return s.reject(h, "create stream", err, wire.ErrTooManyStreams.Code)
	}
	return wire.AppendOKReply(nil, h, wire.StreamResponse{ID: st.ID, CreatedAt: st.CreatedAt, Name: st.Name}.Append(nil))
}

func (s *Server) getStream(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeGetStreamRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	st, err := s.stream(req.Stream)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	resp, err := s.streamResponse(st)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	topics, err := s.st.Topics(st.ID)
	if err != nil {
		return wire.AppendOKReply(nil, h, nil)
	}
	d := wire.StreamDetails{StreamResponse: resp}
	for _, t := range topics {
		th, err := s.topicHeader(t)
		if err != nil {
			return wire.AppendOKReply(nil, h, nil)
		}
		d.Topics = append(d.Topics, th)
	}
	return wire.AppendOKReply(nil, h, d.Append(nil))
}

func (s *Server) getStreams(h wire.RequestHeader) []byte {
	streams, err := s.st.Streams()
	if err != nil {
		return s.deny(h, "get streams", err)
	}
	out := make([]wire.StreamResponse, 0, len(streams))
	for _, st := range streams {
		r, err := s.streamResponse(st)
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, r)
	}
	return wire.AppendOKReply(nil, h, wire.AppendStreams(nil, out))
}

func (s *Server) updateStream(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeUpdateStreamRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if len(req.Options) > 0 {
		return wire.AppendStatusReply(nil, h, wire.ErrUnsupportedOptionKey.Code)
	}
	st, err := s.stream(req.Stream)
	if err != nil {
		return s.reject(h, "update stream", err, 0)
	}
	if err := s.st.UpdateStream(st.ID, req.Name); err != nil {
		return s.reject(h, "update stream", err, 0)
	}
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) deleteStream(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeDeleteStreamRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	st, err := s.stream(req.Stream)
	if err != nil {
		return s.reject(h, "delete stream", err, 0)
	}
	if err := s.st.DeleteStream(st.ID); err != nil {
		return s.reject(h, "delete stream", err, 0)
	}
	s.groups.dropWhere(func(k groupKey) bool { return k.stream == st.ID })
	s.forgetRoundRobin(func(k [2]uint32) bool { return k[0] == st.ID })
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) purgeStream(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodePurgeStreamRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	st, err := s.stream(req.Stream)
	if err != nil {
		return s.reject(h, "purge stream", err, 0)
	}
	if err := s.st.PurgeStream(st.ID); err != nil {
		return s.reject(h, "purge stream", err, 0)
	}
	s.groups.forgetPolled(func(k groupKey) bool { return k.stream == st.ID })
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) forgetRoundRobin(match func([2]uint32) bool) {
	s.rrMu.Lock()
	defer s.rrMu.Unlock()
	for k := range s.rr {
		if match(k) {
			delete(s.rr, k)
		}
	}
}
