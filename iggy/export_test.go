package iggy

// Test-only hooks, visible to package iggy_test.

// WithProtocolVersion makes the client announce another protocol version at login.
func WithProtocolVersion(v uint32) Opt {
	return optFunc(func(c *config) { c.protocolVersion = v })
}

// SetPollHook makes cn call f (on Poll's goroutine, holding the member's op lock, before
// the reply is handled) whenever a poll reply with messages for partition arrives. Set it
// before the first Poll.
func SetPollHook(cn *Consumer, f func(partition uint32)) { cn.pollHook = f }
