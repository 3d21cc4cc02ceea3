package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// writeTimeout bounds one reply write, so a client that stops reading cannot pin its
// connection goroutine forever.
const writeTimeout = 30 * time.Second

// conn is one client connection. Its serve goroutine is the only reader and the only
// writer of replies; the maintenance loop may write one unsolicited Eviction (under wmu).
type conn struct {
	s        *Server
	nc       net.Conn
	br       *bufio.Reader // reads nc; the close watcher may peek a byte ahead (watchClose)
	ctx      context.Context
	cancel   context.CancelCauseFunc // ends ctx: the connection is closing or its login deadline passed
	id       uint32                  // server-chosen client id (GetMe's client_id)
	addr     string
	ip       string       // remoteIP: the key of the per-IP limit and the login throttle
	lastSeen atomic.Int64 // unix nanos of the last request frame
	loggedIn atomic.Bool  // set by the first successful login, never cleared
	preLogin int64        // bytes received before the first login (Config.UnauthenticatedBudget)
	replyRes int64        // bytes of Server.replies the reply being built or written holds

	smu  sync.Mutex
	sess *session // nil when not logged in

	wmu sync.Mutex
}

// connReadBuffer is the read buffer of a connection: small, since most of a frame is
// read straight into its own buffer; it lets the close watcher hold a byte it read.
const connReadBuffer = 64

// Causes of a connection's context ending.
var (
	errConnClosed   = errors.New("server: connection closed")
	errPeerClosed   = errors.New("server: client closed the connection")
	errLoginTimeout = errors.New("server: no login within the login timeout")
)

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, connReadBuffer), id: s.connIDs.Add(1), addr: nc.RemoteAddr().String()}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.lastSeen.Store(time.Now().UnixNano())
	return c
}

// loginExpired closes the connection at its login deadline unless it logged in; a
// login waiting for a password-hash slot is dropped with it.
func (c *conn) loginExpired() {
	if !c.loggedIn.Load() {
		c.s.refusals.Info("no login within the login timeout, closing connection", "conn", c.id, "remote", c.addr, "timeout", c.s.cfg.LoginTimeout)
		c.closeNow(errLoginTimeout)
	}
}

// closeNow closes the connection from outside its serve goroutine: work it waits for
// (a password-hash slot) is dropped and its socket closed.
func (c *conn) closeNow(cause error) {
	c.cancel(cause)
	_ = c.nc.Close()
}

// watchClose watches, while the serve goroutine waits (for a password-hash slot), for
// the client closing the connection, and then ends c.ctx, so that the wait is given up.
// It peeks one byte through c.br: a byte that arrives (a pipelined request) stays
// buffered for serve and ends the watch. stop ends the watch with a past read deadline
// and returns once the watcher has let go of c.br. It must be called on the serve
// goroutine, which must not read c.br until stop returned.
func (c *conn) watchClose() (stop func()) {
	done := make(chan struct{})
	if !c.s.spawn(func() {
		defer close(done)
		if _, err := c.br.Peek(1); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.cancel(errPeerClosed)
		}
	}) {
		return func() {}
	}
	return func() {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
		<-done
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

func (c *conn) session() *session {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.sess
}

// serve reads frames and answers them one at a time until the connection fails.
func (c *conn) serve() {
	log := c.s.log.With("conn", c.id, "remote", c.addr)
	log.Debug("connection opened")
	defer func() {
		c.closeNow(errConnClosed)
		c.s.removeConn(c)
		c.releaseReply()
		c.smu.Lock()
		sess := c.sess
		c.sess = nil
		c.smu.Unlock()
		if sess != nil {
			c.s.endSession(sess)
		}
		log.Debug("connection closed")
	}()
	loginTimer := time.AfterFunc(c.s.cfg.LoginTimeout, c.loginExpired)
	defer loginTimer.Stop()
	hdr := make([]byte, wire.HeaderSize)
	for {
		// Waiting for a frame has no deadline (a logged-in client may idle; one that
		// is not is closed by loginTimer); once it began, the whole frame must arrive
		// within FrameReadTimeout.
		if _, err := io.ReadFull(c.br, hdr[:1]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("read header", "err", err)
			}
			return
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.FrameReadTimeout))
		if _, err := io.ReadFull(c.br, hdr[1:]); err != nil {
			log.Debug("read header", "err", err)
			return
		}
		c.lastSeen.Store(time.Now().UnixNano())
		fi, err := wire.ReadFrameInfo(hdr, c.s.cfg.MaxFrameSize)
		if err != nil {
			c.s.refusals.Warn("bad frame, closing connection", "conn", c.id, "remote", c.addr, "err", err)
			return
		}
		if !c.loggedIn.Load() {
			c.preLogin += int64(fi.Size)
			switch {
			case fi.Size > c.s.cfg.MaxUnauthenticatedFrame:
				c.s.refusals.Warn("frame too large before login, closing connection", "conn", c.id, "remote", c.addr, "size", fi.Size, "limit", c.s.cfg.MaxUnauthenticatedFrame)
				return
			case c.preLogin > c.s.cfg.UnauthenticatedBudget:
				c.s.refusals.Warn("too many bytes before login, closing connection", "conn", c.id, "remote", c.addr, "limit", c.s.cfg.UnauthenticatedBudget)
				return
			}
		}
		body, err := c.readBody(fi.BodyLen())
		if err != nil {
			if errors.Is(err, errPendingFull) {
				c.s.refusals.Warn("memory for incoming frames exhausted, closing connection", "conn", c.id, "remote", c.addr, "err", err, "frame", fi.Size)
			} else {
				log.Debug("read body", "err", err)
			}
			return
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		if fi.Command != wire.CommandRequest {
			// A valid non-Request header on a client connection is ignored, as upstream.
			// Answering would be better than silence, but there is no request to echo.
			c.s.refusals.Warn("ignoring non-request frame", "conn", c.id, "remote", c.addr, "command", fi.Command.String())
			continue
		}
		h, err := wire.DecodeRequestHeader(hdr)
		if err != nil {
			c.s.refusals.Warn("bad request header, closing connection", "conn", c.id, "remote", c.addr, "err", err)
			return
		}
		if log.Enabled(context.Background(), slog.LevelDebug-1) {
			log.Log(context.Background(), slog.LevelDebug-1, "request", "op", h.Operation.String(), "code", uint32(h.CommandCode()), "request", h.Request, "body", len(body))
		}
		if delay := c.s.cfg.ReplyDelay; delay != nil && !c.hold(delay(h.CommandCode())) {
			log.Debug("held request dropped: server closing", "code", uint32(h.CommandCode()), "request", h.Request)
			return
		}
		out := c.handle(h, body)
		if out == nil {
			c.releaseReply()
			continue
		}
		if hook := c.s.beforeReply.Load(); hook != nil {
			(*hook)(h.CommandCode())
		}
		err = c.write(out)
		c.releaseReply()
		if err != nil {
			log.Debug("write reply", "err", err)
			return
		}
	}
}

// releaseReply returns what the last reply held of the server's reply budget.
func (c *conn) releaseReply() {
	c.s.replies.release(c.replyRes)
	c.replyRes = 0
}

// hold waits d, the hold Config.ReplyDelay (a test hook) chose for a request, and
// reports whether the request should be handled: false if Close began first.
func (c *conn) hold(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.s.quit:
		return false
	}
}

func (c *conn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.nc.Write(frame)
	return err
}

// handle executes one request and returns the frame to send.
func (c *conn) handle(h wire.RequestHeader, body []byte) []byte {
	if err := wire.ValidateRequestHeader(h); err != nil {
		// Upstream drops such a request silently; a silent server makes the client wait
		// for its timeout, so answer InvalidCommand instead.
		c.s.log.Debug("invalid request header", "conn", c.id, "err", err)
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
	if err := wire.VerifyRequestChecksum(h, body); err != nil {
		return wire.AppendStatusReply(nil, h, wire.ErrorCode(err))
	}
	switch op := h.Operation; {
	case op == wire.OpRegister:
		return c.login(h, body)
	case op == wire.OpNonReplicated:
		return c.nonReplicated(h, body)
	case op == wire.OpLogout:
		return c.logout(h)
	case op.IsInternal():
		if c.session() == nil {
			return c.eviction(h, wire.EvictionNoSession)
		}
		return c.eviction(h, wire.EvictionInvalidRequestOperation)
	case op.IsMetadata():
		sess := c.session()
		if sess == nil {
			return c.eviction(h, wire.EvictionNoSession)
		}
		if c.s.follower() {
			return notLeader(h)
		}
		return c.metadata(sess, h, body)
	case op.IsPartition():
		sess := c.session()
		if sess == nil {
			return c.eviction(h, wire.EvictionNoSession)
		}
		if c.s.follower() {
			return notLeader(h)
		}
		return c.partitionOp(sess, h, body)
	default:
		return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
	}
}

// eviction builds an Eviction frame for the request's client (or the connection id).
func (c *conn) eviction(h wire.RequestHeader, reason wire.EvictionReason) []byte {
	client := h.Client
	if client.IsZero() {
		client = wire.Uint128{Lo: uint64(c.id)}
	}
	eh := wire.EvictionHeader{Client: client, Reason: reason}
	if reason == wire.EvictionIncompatibleProtocol {
		eh.ServerMax, eh.ServerMin = wire.ProtocolVersion, wire.MinAcceptedVersion(wire.ProtocolVersion)
	}
	return wire.AppendEvictionHeader(nil, eh)
}

// nonReplicated dispatches operation 2 by the command code at offset 196.
func (c *conn) nonReplicated(h wire.RequestHeader, body []byte) []byte {
	code := h.Code
	switch code {
	case wire.CodePing:
		return wire.AppendOKReply(nil, h, nil)
	case wire.CodeLoginUser, wire.CodeLoginWithPAT:
		return c.eviction(h, wire.EvictionMalformedLogin)
	}
	sess := c.session()
	if sess == nil {
		return wire.AppendStatusReply(nil, h, wire.ErrUnauthenticated.Code)
	}
	s := c.s
	switch code {
	case wire.CodeLogoutUser, wire.CodeLoginRegister, wire.CodeLoginRegisterWithPAT:
		return wire.AppendOKReply(nil, h, nil)
	case wire.CodeGetStats:
		return s.getStats(h)
	case wire.CodeGetClusterMetadata:
		return s.clusterMetadata(h)
	case wire.CodeGetMe:
		return c.getMe(h, sess)
	case wire.CodeGetPATs:
		return s.getPATs(h, sess)
	case wire.CodePollMessages:
		return s.poll(h, body, &c.replyRes)
	case wire.CodeFlushUnsavedBuffer:
		return s.flush(h, body)
	case wire.CodeGetConsumerOffset:
		return s.getConsumerOffset(h, body)
	case wire.CodeGetStream:
		return s.getStream(h, body)
	case wire.CodeGetStreams:
		return s.getStreams(h)
	case wire.CodeGetTopic:
		return s.getTopic(h, body)
	case wire.CodeGetTopics:
		return s.getTopics(h, body)
	case wire.CodeGetConsumerGroup:
		return s.getGroup(h, body)
	case wire.CodeGetConsumerGroups:
		return s.getGroups(h, body)
	case wire.CodeSyncConsumerGroup:
		return s.syncGroup(h, body)
	}
	c.s.log.Debug("unserved command", "conn", c.id, "code", uint32(code), "body", len(body))
	if code.IsKnown() && !code.IsNonReplicated() {
		return wire.AppendStatusReply(nil, h, wire.ErrFeatureUnavailable.Code)
	}
	if code.IsKnown() {
		// GetSnapshot, DescribeOptions, GetClient(s), GetUser(s): not
		// served by a single embedded node. The SDKs probe 12 after login and tolerate S:5.
		return wire.AppendStatusReply(nil, h, wire.ErrFeatureUnavailable.Code)
	}
	return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
}

// partitionOp handles SendMessages and Store/DeleteConsumerOffset (ops 160–162).
func (c *conn) partitionOp(sess *session, h wire.RequestHeader, body []byte) []byte {
	switch h.Operation {
	case wire.OpSendMessages:
		return c.s.send(h, body)
	case wire.OpStoreConsumerOffset:
		return c.s.storeConsumerOffset(h, body, sess.client)
	case wire.OpDeleteConsumerOffset:
		return c.s.deleteConsumerOffset(h, body, sess.client)
	}
	return wire.AppendStatusReply(nil, h, wire.ErrInvalidCommand.Code)
}

// metadata handles ops 128–149 through the session's reply cache.
func (c *conn) metadata(sess *session, h wire.RequestHeader, body []byte) []byte {
	if cached, ok := sess.cached(h.Request); ok {
		return cached
	}
	if h.Request <= sess.watermark() {
		return wire.AppendRejectReply(nil, h, wire.ErrRequestAlreadyApplied.Code)
	}
	s := c.s
	s.meta.Lock()
	out := s.execMetadata(sess, h, body)
	s.meta.Unlock()
	sess.remember(h.Request, replayable(h, out))
	return out
}

// replayable returns the reply to keep for a replay of request h: out itself, except for
// a successful CreatePersonalAccessToken, whose raw token is shown once and never kept.
// Its replay is refused with R:51 (PersonalAccessTokenAlreadyExists), as upstream does: a
// token minted again would not match the stored hash.
func replayable(h wire.RequestHeader, out []byte) []byte {
	if h.Operation != wire.OpCreatePAT {
		return out
	}
	if _, _, err := wire.DecodeReplyFrame(out[:wire.HeaderSize], out[wire.HeaderSize:]); err != nil {
		return out
	}
	return wire.AppendRejectReply(nil, h, wire.ErrPATAlreadyExists.Code)
}

func (s *Server) execMetadata(sess *session, h wire.RequestHeader, body []byte) []byte {
	switch h.Operation {
	case wire.OpCreateStream:
		return s.createStream(h, body)
	case wire.OpUpdateStream:
		return s.updateStream(h, body)
	case wire.OpDeleteStream:
		return s.deleteStream(h, body)
	case wire.OpPurgeStream:
		return s.purgeStream(h, body)
	case wire.OpCreateTopic:
		return s.createTopic(h, body)
	case wire.OpUpdateTopic:
		return s.updateTopic(h, body)
	case wire.OpDeleteTopic:
		return s.deleteTopic(h, body)
	case wire.OpPurgeTopic:
		return s.purgeTopic(h, body)
	case wire.OpCreatePartitions:
		return s.createPartitions(h, body)
	case wire.OpDeletePartitions:
		return s.deletePartitions(h, body)
	case wire.OpCreateConsumerGroup:
		return s.createGroup(h, body)
	case wire.OpDeleteConsumerGroup:
		return s.deleteGroup(h, body)
	case wire.OpJoinConsumerGroup:
		return s.joinGroup(h, body, sess.client)
	case wire.OpLeaveConsumerGroup:
		return s.leaveGroup(h, body, sess.client)
	case wire.OpCreatePAT:
		return s.createPAT(h, body, sess)
	case wire.OpDeletePAT:
		return s.deletePAT(h, body, sess)
	}
	// DeleteSegments and user management are not served by the embedded server.
	return wire.AppendStatusReply(nil, h, wire.ErrFeatureUnavailable.Code)
}
