package httpapi

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// rawConn dials the API's TCP address; the test's deadline for every read is testkit.Patience.
func (a *api) rawConn() net.Conn {
	a.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(a.base, "http://"))
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(time.Now().Add(testkit.Patience)); err != nil {
		a.t.Fatal(err)
	}
	return c
}

// closedByServer reads c until the server closes it and returns what it read; it fails
// the test when testkit.Patience runs out first (the server kept the connection).
func closedByServer(t *testing.T, c net.Conn, what string) string {
	t.Helper()
	b, err := io.ReadAll(c)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s: the server kept the connection for %s (read %q)", what, testkit.Patience, b)
	case err != nil && !errors.Is(err, syscall.ECONNRESET):
		t.Fatalf("%s: %v", what, err)
	}
	return string(b)
}

// TestSlowClientsCutOff is the slowloris attack: a client that sends its headers or its
// body a little at a time held a connection (and its goroutine) for as long as it liked.
// Read timeouts close it; the answer of a request cut in its body says so.
func TestSlowClientsCutOff(t *testing.T) {
	e := newEnv(t)
	a := e.serve(func(o *Options) {
		o.Limits = Limits{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond}
	})
	// Headers never finished.
	c := a.rawConn()
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	if got := closedByServer(t, c, "headers never finished"); got != "" {
		t.Fatalf("answer to unfinished headers %q, want none", got)
	}
	// A body that stops after 10 of its 1000 bytes.
	c = a.rawConn()
	if _, err := io.WriteString(c, "PUT /sinks/nsink/offsets HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: 1000\r\n\r\n{\"offsets\""); err != nil {
		t.Fatal(err)
	}
	got := closedByServer(t, c, "body never finished")
	if !strings.HasPrefix(got, "HTTP/1.1 400 Bad Request\r\n") || !strings.Contains(got, `"reason":"Invalid configuration: offsets body: read tcp `) ||
		!strings.Contains(got, `i/o timeout"}`) {
		t.Fatalf("answer to a body cut off:\n%s", got)
	}
	// A client that sends nothing after its answer is closed after IdleTimeout.
	b := e.serve(func(o *Options) { o.Limits = Limits{IdleTimeout: 200 * time.Millisecond} })
	c = b.rawConn()
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	got = closedByServer(t, c, "idle connection")
	if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(got, `{"status":"healthy"}`) {
		t.Fatalf("answer before the idle close:\n%s", got)
	}
}

// TestWriteTimeoutSparesRestart: an answer must leave within WriteTimeout, except the
// empty answers of restart and stop, which wait for the connector. A 1ns write timeout
// makes every other answer fail.
func TestWriteTimeoutSparesRestart(t *testing.T) {
	e := newEnv(t)
	a := e.serve(func(o *Options) { o.Limits = Limits{WriteTimeout: time.Nanosecond} })
	req, err := http.NewRequest(http.MethodGet, a.base+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := a.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("GET /health answered %d past its write timeout", resp.StatusCode)
	}
	a.do("POST", "/sinks/nsink/stop", "").want(t, http.StatusNoContent)
	a.do("POST", "/sinks/nsink/restart", "").want(t, http.StatusNoContent)
	e.waitRunning("sink", "nsink")
}

// TestConnectionCap: past MaxConns open connections, a new one is closed at once (no
// answer); once a connection ends, new ones are served again.
func TestConnectionCap(t *testing.T) {
	e := newEnv(t)
	a := e.serve(func(o *Options) { o.Limits = Limits{MaxConns: 2} })
	health := func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	// Two kept-alive connections hold both slots.
	held := []net.Conn{a.rawConn(), a.rawConn()}
	for i, c := range held {
		if err := health(c); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	c := a.rawConn()
	_, _ = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") // may fail: closed already
	if got := closedByServer(t, c, "the third connection"); got != "" {
		t.Fatalf("the third connection was answered %q", got)
	}
	// The held ones still work; one ends, and a new connection is served.
	if err := health(held[1]); err != nil {
		t.Fatalf("a held connection after the refusal: %v", err)
	}
	_ = held[0].Close()
	testkit.WaitFor(t, "a new connection served after one ended", func() bool {
		c := a.rawConn()
		defer c.Close()
		return health(c) == nil
	})
}
