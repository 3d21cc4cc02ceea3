package server

import (
	"math"
	"net"
	"os"
	"runtime"
	"strconv"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// System commands and personal access tokens.

func (c *conn) getMe(h wire.RequestHeader, sess *session) []byte {
	return wire.AppendOKReply(nil, h, wire.ClientDetails{
		ClientID: c.id, UserID: sess.user.ID, Transport: wire.TransportTCP, Address: c.addr,
		ConsumerGroups: c.s.groups.memberships(sess.client),
	}.Append(nil))
}

// getStats answers a minimal but valid Stats: counts are real, host metrics zero.
func (s *Server) getStats(h wire.RequestHeader) []byte {
	st := wire.Stats{
		ProcessID:     uint32(os.Getpid()),
		RunTime:       (nowMicros() - uint64(s.startedAt.UnixMicro())) / 1e6 * 1e6,
		StartTime:     uint64(s.startedAt.Unix()) * 1e6,
		OSName:        runtime.GOOS,
		ServerVersion: wire.ServerVersion,
		ServerSemver:  9000,
		ThreadsCount:  uint32(runtime.NumGoroutine()),
	}
	st.Hostname, _ = os.Hostname()
	streams, _ := s.st.Streams()
	st.StreamsCount = uint32(len(streams))
	for _, str := range streams {
		topics, _ := s.st.Topics(str.ID)
		st.TopicsCount += uint32(len(topics))
		for _, t := range topics {
			st.PartitionsCount += uint32(len(t.Partitions))
			for _, p := range t.Partitions {
				if ps, err := s.st.Stats(store.PartitionKey{Stream: t.StreamID, Topic: t.ID, Partition: p.ID}); err == nil {
					st.SegmentsCount += segmentsCount(ps)
				}
			}
			if tot, err := s.st.TopicTotals(t.StreamID, t.ID); err == nil {
				st.MessagesCount += tot.Messages
				st.MessagesSizeBytes += tot.Bytes
			}
			if gs, err := s.st.Groups(t.StreamID, t.ID); err == nil {
				st.ConsumerGroupsCount += uint32(len(gs))
			}
		}
	}
	st.ClientsCount = uint32(len(s.connList()))
	return wire.AppendOKReply(nil, h, st.Append(nil))
}

// flush answers FlushUnsavedBuffer: every acknowledged write is already in the store, so
// it only syncs the log when asked to.
func (s *Server) flush(h wire.RequestHeader, body []byte) []byte {
	req, err := wire.DecodeFlushUnsavedBufferRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	_, t, err := s.topic(req.Stream, req.Topic)
	if err != nil {
		return s.deny(h, "flush", err)
	}
	if !hasPartition(t, req.PartitionID) {
		return wire.AppendStatusReply(nil, h, wire.ErrPartitionNotFound.Code)
	}
	if req.Fsync {
		if err := s.st.Sync(); err != nil {
			return s.deny(h, "flush", err)
		}
	}
	return wire.AppendOKReply(nil, h, nil)
}

func (s *Server) getPATs(h wire.RequestHeader, sess *session) []byte {
	if _, err := s.st.DeleteExpiredTokens(sess.user.ID, nowMicros()); err != nil {
		return s.deny(h, "get tokens", err)
	}
	toks, err := s.st.Tokens(sess.user.ID)
	if err != nil {
		return s.deny(h, "get tokens", err)
	}
	out := make([]wire.PATInfo, 0, len(toks))
	for _, t := range toks {
		out = append(out, wire.PATInfo{Name: t.Name, ExpiryAt: t.ExpiresAt})
	}
	return wire.AppendOKReply(nil, h, wire.AppendPATs(nil, out))
}

func (s *Server) createPAT(h wire.RequestHeader, body []byte, sess *session) []byte {
	req, err := wire.DecodeCreatePATRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if _, err := s.st.DeleteExpiredTokens(sess.user.ID, nowMicros()); err != nil {
		return s.deny(h, "create token", err)
	}
	if toks, err := s.st.Tokens(sess.user.ID); err == nil && len(toks) >= store.MaxTokensPerUser {
		return wire.AppendStatusReply(nil, h, wire.ErrPATLimitReached.Code)
	}
	var expiresAt uint64
	if req.Expiry != 0 && req.Expiry != math.MaxUint64 {
		now := nowMicros()
		if req.Expiry > math.MaxUint64-now {
			return wire.AppendRejectReply(nil, h, wire.ErrInvalidPATExpiry.Code)
		}
		expiresAt = now + req.Expiry
	}
	raw, _, err := s.st.CreateToken(sess.user.ID, req.Name, expiresAt)
	if err != nil {
		return s.reject(h, "create token", err, 0)
	}
	return wire.AppendOKReply(nil, h, wire.RawToken{Token: raw}.Append(nil))
}

func (s *Server) deletePAT(h wire.RequestHeader, body []byte, sess *session) []byte {
	req, err := wire.DecodeDeletePATRequest(body)
	if err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if err := s.st.DeleteToken(sess.user.ID, req.Name); err != nil {
		return s.reject(h, "delete token", err, 0)
	}
	return wire.AppendOKReply(nil, h, nil)
}

// clusterMetadata answers GetClusterMetadata (code 12): a single-node roster, this server
// as the healthy leader, reachable over TCP at its listen address (no QUIC, HTTP or
// WebSocket), or the roster of Config.ClusterRoster (a test hook). The released
// apache-iggy 0.9 SDKs send it after login (leader detection) and before some requests,
// and fail them on an error status. Layout: wire.ClusterMetadata.
func (s *Server) clusterMetadata(h wire.RequestHeader) []byte {
	if roster := s.cfg.ClusterRoster; roster != nil {
		m := roster()
		return wire.AppendOKReply(nil, h, m.Append(nil))
	}
	host, portStr, _ := net.SplitHostPort(s.Addr())
	port, _ := strconv.ParseUint(portStr, 10, 16)
	const name = "ferry"
	m := wire.ClusterMetadata{Name: name, Nodes: []wire.ClusterNode{{
		Name: name, IP: host, TCPPort: uint16(port), Role: wire.NodeLeader, Status: wire.NodeHealthy,
	}}}
	return wire.AppendOKReply(nil, h, m.Append(nil))
}

// follower reports whether Config.ClusterRoster (a test hook) marks this server as a
// follower: then replicated requests are refused with 58, as on an Iggy follower.
func (s *Server) follower() bool {
	roster := s.cfg.ClusterRoster
	if roster == nil {
		return false
	}
	host, portStr, err := net.SplitHostPort(s.Addr())
	if err != nil {
		return false
	}
	port, _ := strconv.ParseUint(portStr, 10, 16)
	own := net.ParseIP(host)
	for _, n := range roster().Nodes {
		if uint64(n.TCPPort) == port && own != nil && own.Equal(net.ParseIP(n.IP)) {
			return n.Role == wire.NodeFollower
		}
	}
	return false
}

// notLeader is a follower's answer to a replicated request: 58 TransientNotAccepted (not
// executed; the client may send it anywhere), result-framed for metadata operations and
// in the header status for partition operations, as upstream's replicas answer.
func notLeader(h wire.RequestHeader) []byte {
	if h.Operation.IsPartition() {
		return wire.AppendStatusReply(nil, h, wire.ErrTransientNotAccepted.Code)
	}
	return wire.AppendRejectReply(nil, h, wire.ErrTransientNotAccepted.Code)
}
