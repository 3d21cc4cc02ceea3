package iggy

import (
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Test-only hooks, visible to package iggy_test.

// WithProtocolVersion makes the client announce another protocol version at login.
func WithProtocolVersion(v uint32) Opt {
	return optFunc(func(c *config) { c.protocolVersion = v })
}

// SetPollHook makes cn call f (on the goroutine running the poll, holding the member's op lock, before
// the reply is handled) whenever a poll reply with messages for partition arrives. Set it
// before the first Poll.
func SetPollHook(cn *Consumer, f func(partition uint32)) { cn.pollHook = f }

// MemberLogin returns the login of cn's member connection: which login of its link it
// is (1 = the first; a reconnect makes a new one) and its client id (the member
// identity), or zeros if it has none.
func MemberLogin(cn *Consumer) (epoch uint64, client wire.ClientID) {
	c := cn.link.current()
	if c == nil {
		return 0, client
	}
	return c.epoch, c.client
}

// OutlivedPolls returns how many of cn's polls outlived the Poll call that started them.
func OutlivedPolls(cn *Consumer) int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.outlived
}

// WithLeaderWait sets how long a connect reads again a roster that names no healthy
// leader before it stays on its node (default 5s).
func WithLeaderWait(d time.Duration) Opt {
	return optFunc(func(c *config) { c.leaderWait = d })
}

// Idle reports whether every partition cn owns had an empty poll since its last batch
// (its polls then start at the position, without the overlap message: rewind.go).
func Idle(cn *Consumer) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for _, st := range cn.parts {
		if st.streaming {
			return false
		}
	}
	return len(cn.parts) > 0
}
