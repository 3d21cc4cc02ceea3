package httpapi

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound what one client can hold of the API's listener: how long a request may
// take to arrive, an answer to leave, a connection to idle, and how many connections may
// be open at once. A zero field takes the value of DefaultLimits.
type Limits struct {
	// ReadHeaderTimeout bounds the arrival of a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the arrival of a whole request, body included (a body sent a
	// byte at a time is cut off).
	ReadTimeout time.Duration
	// WriteTimeout bounds an answer, from the end of the request's headers. Restart and
	// stop lift it: their empty answer waits for the connector's shutdown_timeout.
	WriteTimeout time.Duration
	// IdleTimeout bounds a kept-alive connection's wait for its next request.
	IdleTimeout time.Duration
	// MaxConns caps the open connections; one more is closed as soon as it is accepted.
	MaxConns int
}

// DefaultLimits are the limits of a Server whose Options leave them zero: a request's
// headers within 10 s and the whole of it within 30 s (the largest body, 1 MiB, then
// needs 35 KB/s), an answer within 30 s, 60 s idle, 128 connections (a browser opens at
// most 6 per host; the API is an operator's tool).
var DefaultLimits = Limits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
	WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxConns: 128}

// withDefaults fills l's zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.ReadHeaderTimeout > 0 {
		d.ReadHeaderTimeout = l.ReadHeaderTimeout
	}
	if l.ReadTimeout > 0 {
		d.ReadTimeout = l.ReadTimeout
	}
	if l.WriteTimeout > 0 {
		d.WriteTimeout = l.WriteTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.MaxConns > 0 {
		d.MaxConns = l.MaxConns
	}
	return d
}

// noWriteDeadline lifts the write timeout of a request whose handler waits for a
// connector (restart, stop): its answer is an empty 204, so a client that does not read
// cannot hold it in a full socket buffer.
func noWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

// capListener closes each accepted connection past n open ones at once: a client
// holding many slow connections cannot make the API's memory and goroutines grow, and
// the refused client sees its connection end rather than hang. It logs when the cap is
// reached and when connections are taken again, not once per refusal.
type capListener struct {
	net.Listener
	slots   chan struct{}
	log     *slog.Logger
	full    atomic.Bool
	refused atomic.Uint64
}

func newCapListener(ln net.Listener, n int, log *slog.Logger) *capListener {
	return &capListener{Listener: ln, slots: make(chan struct{}, n), log: log}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &capConn{Conn: c, release: sync.OnceFunc(l.release)}, nil
		default:
			l.refused.Add(1)
			if !l.full.Swap(true) {
				l.log.Warn("http api: connection limit reached; closing new connections until one ends", "max_connections", cap(l.slots))
			}
			_ = c.Close()
		}
	}
}

// release frees a slot; the first after refusals logs how many were refused.
func (l *capListener) release() {
	<-l.slots
	if l.full.Swap(false) {
		l.log.Info("http api: connections accepted again", "refused", l.refused.Swap(0))
	}
}

// capConn gives its slot back when closed (once, however often Close is called).
type capConn struct {
	net.Conn
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
