package server

import (
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Hooks for the external tests (compiled into tests only).

// HoldHashSlots takes every password-hash slot of s until release is called.
func HoldHashSlots(s *Server) (release func()) {
	for range cap(s.hashes.slots) {
		s.hashes.slots <- struct{}{}
	}
	return func() {
		for range cap(s.hashes.slots) {
			<-s.hashes.slots
		}
	}
}

// HashPeak is the most password hashes s ever ran at once.
func HashPeak(s *Server) int64 { return s.hashes.peak.Load() }

// LoginFailures is the count of consecutive failed logins recorded for ip as user.
func LoginFailures(s *Server, ip, user string) int {
	s.throttle.mu.Lock()
	defer s.throttle.mu.Unlock()
	if e := s.throttle.pairLocked(throttleKeyOf(ip, user), s.throttle.now()); e != nil {
		return e.failures
	}
	return 0
}

// OnLoginWait makes every login throttle delay of s call fn instead of waiting (the
// attempt then goes on at once); nil restores the wait.
func OnLoginWait(s *Server, fn func(d time.Duration)) {
	if fn == nil {
		s.loginWait.Store(nil)
		return
	}
	s.loginWait.Store(&fn)
}

// AddUser creates an active user with every permission in s's store.
func AddUser(s *Server, name, password string) error {
	_, err := s.st.CreateUser(name, password, userActive, nil)
	return err
}

// LoginDelay is the delay s imposes after n consecutive failures.
func LoginDelay(s *Server, n int) time.Duration { return s.throttle.delayAfter(n) }

// SetBeforeReply makes s call fn with every reply built and not yet written, on the
// connection's goroutine (a reply waits while fn runs); nil removes it.
func SetBeforeReply(s *Server, fn func(code wire.Code)) {
	if fn == nil {
		s.beforeReply.Store(nil)
		return
	}
	s.beforeReply.Store(&fn)
}

// ReplyBudget is s's reply budget: bytes reserved, the most ever reserved at once and
// the polls waiting for it.
func ReplyBudget(s *Server) (used, peak int64, waiting int) { return s.replies.state() }
