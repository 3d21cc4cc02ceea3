package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
)

// floodLogin sends wrong-password logins on one connection from 127.0.0.2 until stop
// closes, reading each reply; it counts the connections that sent their first login
// and the replies.
func floodLogin(addr string, id int, stop <-chan struct{}, started, replies *atomic.Int64) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return
	}
	go func() { <-stop; _ = nc.Close() }()
	body := wire.LoginPasswordRequest{
		Client:              wire.ClientVersionInfo{ProtocolVersion: wire.ProtocolVersion, SDKName: "flood", SDKVersion: "0.0.1"},
		PasswordCredentials: wire.PasswordCredentials{Username: "iggy", Password: fmt.Sprintf("guess-%d", id)},
	}.Append(nil)
	frame := wire.AppendRequestHeader(nil, wire.RequestHeader{Client: wire.ClientID{Lo: uint64(id) + 1}, Operation: wire.OpRegister}, len(body))
	frame = append(frame, body...)
	hdr := make([]byte, wire.HeaderSize)
	for first := true; ; first = false {
		if _, err := nc.Write(frame); err != nil {
			return
		}
		if first {
			started.Add(1)
		}
		if _, err := io.ReadFull(nc, hdr); err != nil {
			return
		}
		fi, err := wire.ReadFrameInfo(hdr, 0)
		if err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, nc, int64(fi.BodyLen())); err != nil {
			return
		}
		replies.Add(1)
	}
}

// TestLoginFloodRealServer is issue 36's login flood against a real `ferry server`
// process with its real password cost (600,000 PBKDF2 rounds) and one hash slot: 500
// connections from 127.0.0.2 send wrong passwords in a loop (each resends as soon as
// it is answered) while the Go client logs in with the right password from
// 127.0.0.1, which it had never used before (so it needs a hash). Before, the client
// waited behind every queued guess (about 500 hashes: 50 s and more) and timed out;
// now it waits for at most the running hash and one guess. Its 30 s login bound is
// about a hundred times what two hashes take here, so the test does not depend on the
// machine's speed. The server's log holds a bounded count of WARN and INFO lines for
// hundreds of refusals.
func TestLoginFloodRealServer(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	srv := startFerry(t, "server", dir, nil, "server", "--addr", addr, "--data", filepath.Join(dir, "data"), "--max-concurrent-logins", "1")
	srv.waitOutput("iggy server listening", 1)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var started, replies atomic.Int64
	defer func() { close(stop); wg.Wait() }()
	for i := range 500 {
		wg.Go(func() { floodLogin(addr, i, stop, &started, &replies) })
	}
	// Every flood connection has sent a guess (8 at most wait for a hash at any time;
	// the others are refused at once, and resent).
	testkit.WaitFor(t, "500 flood connections guessing", func() bool { return started.Load() == 500 })
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, addr, iggy.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatalf("right login during the flood: %v (after %v)", err, time.Since(start))
	}
	t.Logf("right login during a flood of 500 connections: %v (%d flood answers so far)", time.Since(start), replies.Load())
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping after login: %v", err)
	}
	_ = c.Close()
	elapsed := time.Since(start)
	out := srv.out.String()
	t.Logf("server log: %d WARN and %d INFO lines for %d flood answers", strings.Count(out, "level=WARN"), strings.Count(out, "level=INFO"), replies.Load())
	// At most two lines per message per 10 s (the first, and the count of the rest),
	// plus the lines of the time before start.
	bound := 2 * (int(elapsed/(10*time.Second)) + 2)
	for _, msg := range []string{"login refused: too many logins of this address wait for a password check", "login failed; delaying the next attempt"} {
		if n := strings.Count(out, msg); n < 1 || n > bound {
			t.Fatalf("%d lines %q for %d flood answers in %v, want 1..%d", n, msg, replies.Load(), elapsed, bound)
		}
	}
}
