package iggy

// Test-only hooks, visible to package iggy_test.

// WithProtocolVersion makes the client announce another protocol version at login.
func WithProtocolVersion(v uint32) Opt {
	return optFunc(func(c *config) { c.protocolVersion = v })
}
