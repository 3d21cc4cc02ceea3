package server

import (
	"errors"
	"io"
	"net"
	"time"
)

// This file holds the server's defences of shared resources against clients that do
// not (yet) authenticate: the budget of memory buffered for frames still arriving (the
// login throttle is in throttle.go, the bound on password hashes in hashgate.go, the
// rate of the log lines they cause in lograte.go). docs/architecture.md ("Embedded
// server: limits") describes them.

// errPendingFull closes a connection whose frame would exceed Config.MaxPendingBytes.
var errPendingFull = errors.New("server: memory for incoming frames exhausted (MaxPendingBytes)")

// bodyChunk is the first piece read of a large frame body; pieces then double, up to
// maxBodyChunk, as the bytes arrive, so memory follows what a client sent, not what
// it declared.
const (
	bodyChunk    = 64 << 10
	maxBodyChunk = 4 << 20
)

// readBody reads an n-byte frame body. A body no larger than
// MaxUnauthenticatedFrame (a login, a ping, most requests) is read at once: such
// bodies are bounded by the count of connections, and a full budget must never
// lock out logins. A larger one is read in growing pieces, each reserved from the
// server-wide budget of pending bytes (Config.MaxPendingBytes) before it is
// allocated, and joined once complete; the reservation is returned when the body is
// read or the read fails.
func (c *conn) readBody(n int) ([]byte, error) {
	s := c.s
	if n <= int(s.cfg.MaxUnauthenticatedFrame) {
		buf := make([]byte, n)
		_, err := io.ReadFull(c.br, buf)
		return buf, err
	}
	var reserved int64
	defer func() { s.pending.Add(-reserved) }()
	var pieces [][]byte
	got := 0
	for got < n {
		size := min(n-got, max(bodyChunk, min(got, maxBodyChunk)))
		if s.pending.Add(int64(size)) > s.cfg.MaxPendingBytes {
			s.pending.Add(-int64(size))
			return nil, errPendingFull
		}
		reserved += int64(size)
		p := make([]byte, size)
		if _, err := io.ReadFull(c.br, p); err != nil {
			return nil, err
		}
		pieces = append(pieces, p)
		got += size
	}
	if len(pieces) == 1 {
		return pieces[0], nil
	}
	buf := make([]byte, 0, n)
	for _, p := range pieces {
		buf = append(buf, p...)
	}
	return buf, nil
}

// remoteIP is the address a connection's per-IP limit and login throttle key on.
func remoteIP(nc net.Conn) string {
	a := nc.RemoteAddr()
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// sleepOrQuit waits d; false if the server began closing first.
func sleepOrQuit(quit <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-quit:
		return false
	}
}
