package server

import (
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Hooks for the external tests (compiled into tests only).

// HoldHashSlots takes every free password-hash slot of s until release is called
// (call it while no login is being checked). Released slots go to the waiting logins
// in their addresses' turns; release may be called more than once.
func HoldHashSlots(s *Server) (release func()) { return s.hashes.hold() }

// HashCounts are the password-hash gate's counters.
type HashCounts struct {
	Computed  int64 // hashes run
	Abandoned int64 // waits given up: connection closed, login deadline passed
	Refused   int64 // logins refused by MaxLoginsPerIP
}

// Hashes returns s's password-hash counters.
func Hashes(s *Server) HashCounts {
	g := s.hashes
	return HashCounts{Computed: g.computed.Load(), Abandoned: g.abandoned.Load(), Refused: g.refused.Load()}
}

// HashWaiting is the count of logins from ip waiting for a password-hash slot.
func HashWaiting(s *Server, ip string) int { return s.hashes.waiting(ip) }

// OnHashGranted makes s call fn with the client address of every password hash about
// to run, in the order slots were granted; nil removes it.
func OnHashGranted(s *Server, fn func(ip string)) {
	if fn == nil {
		s.hashes.onGrant.Store(nil)
		return
	}
	s.hashes.onGrant.Store(&fn)
}

// FlushRefusalLog makes s write the counts of its rate-limited log lines whose interval
// passed, as its maintenance loop does on every tick.
func FlushRefusalLog(s *Server) { s.refusals.flush() }

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

// ExpireLoginDeadline makes the connection of s from remote (ip:port) reach its login
// deadline now, as its LoginTimeout timer does.
func ExpireLoginDeadline(s *Server, remote string) bool {
	for _, c := range s.connList() {
		if c.addr == remote {
			c.loginExpired()
			return true
		}
	}
	return false
}
