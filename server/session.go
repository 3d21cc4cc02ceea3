package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// replyCacheSize is how many metadata replies a session keeps for replays.
const replyCacheSize = 5

// session is one login: a client id bound to a connection and a user.
type session struct {
	id     uint64
	client wire.ClientID
	user   store.User

	mu      sync.Mutex
	highest uint64 // highest metadata request number executed
	replies [replyCacheSize]cachedReply
	next    int
}

type cachedReply struct {
	request uint64
	frame   []byte
}

func (s *session) watermark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.highest
}

// cached returns the reply kept for request, if any.
func (s *session) cached(request uint64) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.replies {
		if r.frame != nil && r.request == request {
			return r.frame, true
		}
	}
	return nil, false
}

func (s *session) remember(request uint64, frame []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.highest = max(s.highest, request)
	s.replies[s.next] = cachedReply{request, frame}
	s.next = (s.next + 1) % replyCacheSize
}

// login implements login-register.
func (c *conn) login(h wire.RequestHeader, body []byte) []byte {
	la, err := wire.DecodeLogin(body)
	if err != nil {
		return c.eviction(h, wire.EvictionMalformedLogin)
	}
	if !wire.VersionAccepted(la.Client.ProtocolVersion, wire.ProtocolVersion) {
		return c.eviction(h, wire.EvictionIncompatibleProtocol)
	}
	s := c.s
	// An (address, user name) that failed before waits out its delay first (its
	// connection's later requests wait behind it; other clients do not).
	name := ""
	if la.HasPassword {
		name = la.Password.Username
	}
	if !s.throttleWait(s.throttle.wait(c.ip, name)) {
		return c.eviction(h, wire.EvictionSessionError)
	}
	var user store.User
	ok, pwRejected := false, false
	if la.HasPassword {
		u, p := la.Password.Username, la.Password.Password
		if len(u) >= 3 && len(u) <= 50 && len(p) >= 3 && len(p) <= 100 {
			got, err := c.authenticate(u, p)
			switch {
			case errors.Is(err, errHashQueueFull):
				s.refusals.Warn("login refused: too many logins of this address wait for a password check", "conn", c.id, "remote", c.addr, "limit", s.cfg.MaxLoginsPerIP)
				return c.eviction(h, wire.EvictionSessionError)
			case errors.Is(err, errHashGiveUp):
				s.log.Debug("login dropped before its password check", "conn", c.id, "remote", c.addr, "cause", context.Cause(c.ctx))
				return c.eviction(h, wire.EvictionSessionError)
			case err == nil && got.Status == userActive:
				user, ok = got, true
			case err == nil || errors.Is(err, store.ErrInvalidCredentials):
				pwRejected = true
			default:
				s.log.Error("login: authenticate", "err", err)
				return c.eviction(h, wire.EvictionSessionError)
			}
		} else {
			pwRejected = true
		}
	}
	if !ok && la.HasToken {
		got, err := s.st.AuthenticateToken(la.Token.Token, nowMicros())
		switch {
		case errors.Is(err, store.ErrInvalidToken):
			return c.eviction(h, wire.EvictionInvalidToken)
		case err != nil:
			s.log.Error("login: token", "err", err)
			return c.eviction(h, wire.EvictionSessionError)
		case got.Status != userActive:
			return c.eviction(h, wire.EvictionUserInactive)
		}
		user, ok = got, true
	}
	if !ok {
		if d := s.throttle.failed(c.ip, name); d > 0 {
			s.refusals.Info("login failed; delaying the next attempt of this address and user name", "conn", c.id, "remote", c.addr, "delay", d)
		}
		if pwRejected {
			return c.eviction(h, wire.EvictionInvalidCredentials)
		}
		return c.eviction(h, wire.EvictionMalformedLogin)
	}
	s.throttle.succeeded(c.ip, name)
	c.loggedIn.Store(true)
	c.smu.Lock()
	sess := c.sess
	if sess == nil {
		sess = &session{id: s.sessions.Add(1), client: h.Client, user: user}
		c.sess = sess
	}
	c.smu.Unlock()
	s.log.Debug("login", "conn", c.id, "user", sess.user.Username, "session", sess.id)
	return wire.AppendOKReply(nil, h, wire.LoginReply{
		UserID:                sess.user.ID,
		Session:               sess.id,
		ServerProtocolVersion: wire.ProtocolVersion,
		ServerVersion:         wire.ServerVersion,
	}.Append(nil))
}

// errHashGiveUp is authenticate's error when the connection went away (closed, its
// login deadline passed, the server closing) before a password-hash slot was free.
var errHashGiveUp = errors.New("server: login given up while waiting for a password check")

// authenticate checks a password: a password that matched the user's stored hash
// before at once (no slot), anything else with one hash under the hash gate, in the
// turn of the connection's address, given up when the connection goes away first
// (errHashGiveUp) or refused when the address is at its cap (errHashQueueFull). An
// unknown user pays the hash too, so user names cannot be told apart by timing.
func (c *conn) authenticate(username, password string) (store.User, error) {
	s := c.s
	if u, ok, err := s.st.AuthenticateRemembered(username, password); ok || err != nil {
		return u, err
	}
	stop := c.watchClose()
	var got store.User
	var err error
	gateErr := s.hashes.run(c.ctx, c.ip, func() { got, err = s.st.Authenticate(username, password) })
	stop()
	switch {
	case errors.Is(gateErr, errHashQueueFull):
		return store.User{}, gateErr
	case gateErr != nil:
		return store.User{}, fmt.Errorf("%w: %w", errHashGiveUp, gateErr)
	}
	return got, err
}

// throttleWait waits d, the login throttle's delay of an attempt; false if the server
// began closing first.
func (s *Server) throttleWait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	if hook := s.loginWait.Load(); hook != nil {
		(*hook)(d)
		return true
	}
	return sleepOrQuit(s.quit, d)
}

// userActive is the store's status byte of an active user.
const userActive = 1

// logout ends the bound session; without one it just succeeds.
func (c *conn) logout(h wire.RequestHeader) []byte {
	c.smu.Lock()
	sess := c.sess
	c.sess = nil
	c.smu.Unlock()
	if sess != nil {
		c.s.endSession(sess)
	}
	return wire.AppendOKReply(nil, h, nil)
}

// endSession drops the session's consumer-group memberships (full rebalance of each
// group it belonged to).
func (s *Server) endSession(sess *session) {
	s.meta.Lock()
	defer s.meta.Unlock()
	s.groups.removeClient(sess.client)
}

// evictStale ends sess (if still bound) and pushes Eviction 13. The socket stays
// open, as upstream; the client must reconnect.
func (c *conn) evictStale(sess *session) {
	c.smu.Lock()
	if c.sess != sess {
		c.smu.Unlock()
		return
	}
	c.sess = nil
	c.smu.Unlock()
	c.s.endSession(sess)
	c.s.log.Info("evicted stale client", "conn", c.id, "session", sess.id)
	frame := wire.AppendEvictionHeader(nil, wire.EvictionHeader{Client: sess.client, Reason: wire.EvictionStaleClient})
	if err := c.write(frame); err != nil {
		_ = c.nc.Close()
	}
}

func nowMicros() uint64 { return uint64(time.Now().UnixMicro()) }
