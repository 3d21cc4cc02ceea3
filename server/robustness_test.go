package server_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

func TestMalformedFrames(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) { c.MaxFrameSize = 1 << 20 }))
	good := login(t, s)
	header := func(size uint32, command byte) []byte {
		h := wire.AppendRequestHeader(nil, wire.RequestHeader{Client: wire.Uint128{Lo: 1}, Operation: wire.OpNonReplicated, Code: wire.CodePing}, 0)
		binary.LittleEndian.PutUint32(h[48:], size)
		h[60] = command
		return h
	}
	cases := []struct {
		name  string
		frame []byte
	}{
		{"oversized", header(2<<20, 5)},
		{"undersized", header(100, 5)},
		{"bad command byte", header(256, 200)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			if _, err := c.nc.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("connection not closed: n=%d err=%v", n, err)
			}
		})
	}
	// A header that fails validation (client id 0) is answered, not dropped.
	c := dial(t, s)
	c.client = wire.ClientID{}
	if _, err := c.call(wire.PingRequest{}); !errors.Is(err, wire.ErrInvalidCommand) {
		t.Fatalf("client 0: %v", err)
	}
	// A half-written frame followed by a close does not disturb anyone.
	half := dial(t, s)
	_, _ = half.nc.Write(header(1000, 5)[:100])
	_ = half.nc.Close()
	good.must(wire.PingRequest{})
	good.must(wire.GetStreamsRequest{})
}

func TestMaxConnections(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) { c.MaxConnections = 1 }))
	a := login(t, s)
	b := dial(t, s)
	_ = b.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := b.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("connection over the limit: %v", err)
	}
	a.must(wire.PingRequest{})
}

// TestServeConnPipe serves an in-process net.Pipe connection.
func TestServeConnPipe(t *testing.T) {
	s := servertest.Start(t)
	cl, sv := net.Pipe()
	if err := s.ServeConn(sv); err != nil {
		t.Fatal(err)
	}
	c := &tclient{t: t, nc: cl, client: newClientID(), counter: 1}
	defer func() { _ = cl.Close() }()
	if _, err := c.login("iggy", "iggy"); err != nil {
		t.Fatal(err)
	}
	c.must(wire.GetStreamsRequest{})
}

// FuzzConnection feeds arbitrary bytes to a connection handler. Invariants: no panic, the
// handler ends when the peer closes, and the server still answers a Ping on another
// connection afterwards.
func FuzzConnection(f *testing.F) {
	ping := wire.AppendRequest(nil, wire.RequestHeader{Client: wire.Uint128{Lo: 1}, Request: 1}, wire.PingRequest{})
	login := wire.AppendRequest(nil, wire.RequestHeader{Client: wire.Uint128{Lo: 1}}, wire.LoginPasswordRequest{
		Client: vinfo(wire.ProtocolVersion), PasswordCredentials: wire.PasswordCredentials{Username: "iggy", Password: "iggy"}})
	create := wire.AppendRequest(nil, wire.RequestHeader{Client: wire.Uint128{Lo: 1}, Session: 1, Request: 1}, wire.CreateStreamRequest{Name: "s"})
	f.Add(ping)
	f.Add(append(append([]byte{}, login...), create...))
	f.Add(append(append([]byte{}, login...), ping[:200]...))
	f.Add([]byte{0xff, 0xff})
	s := servertest.Start(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cl, sv := net.Pipe()
		if err := s.ServeConn(sv); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { // drain replies so the handler never blocks on a write
			defer close(done)
			_, _ = io.Copy(io.Discard, cl)
		}()
		_ = cl.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = cl.Write(data)
		_ = cl.Close()
		<-done
		probe := dial(t, s)
		probe.must(wire.PingRequest{})
		_ = probe.nc.Close()
	})
}

// TestCrashRecovery builds the real ferry binary, runs `ferry server` as a child process,
// sends batches with user headers, kills it with SIGKILL mid-stream, restarts it on the
// same data dir and checks that every acknowledged message is present exactly once, in
// order, with intact payload, headers and checksums.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() || runtime.GOOS == "windows" {
		t.Skip("builds and kills a child process")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ferry")
	build := exec.Command("go", "build", "-o", bin, "../cmd/ferry")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("cannot build cmd/ferry (another package may be mid-change): %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	start := func() (*exec.Cmd, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		cmd := exec.Command(bin, "server", "--addr", addr, "--data", data, "--fsync", "always")
		cmd.Env = append(os.Environ(), "FERRY_ROOT_PASSWORD=", "IGGY_ROOT_PASSWORD=")
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "ferry server to listen", func() bool {
			nc, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
			if err == nil {
				_ = nc.Close()
			}
			return err == nil
		})
		return cmd, addr
	}
	connect := func(addr string) *tclient {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		c := &tclient{t: t, nc: nc, client: newClientID(), counter: 1}
		if _, err := c.login("iggy", "iggy"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	cmd, addr := start()
	c := connect(addr)
	st, tp := setup(t, c, 1)
	var acked []string
	killed := make(chan struct{})
	var ackedBatches atomic.Int64
	go func() {
		// The kill comes mid-stream: after 100 acknowledged batches, while the next ones
		// are in flight.
		if err := testkit.Eventually("100 batches acknowledged", func() bool { return ackedBatches.Load() >= 100 }); err != nil {
			t.Error(err)
		}
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		close(killed)
	}()
	for i := 0; ; i++ {
		msgs := make([]wire.SendMessage, 3)
		for j := range msgs {
			n := strconv.Itoa(i*3 + j)
			msgs[j] = wire.SendMessage{Payload: []byte("payload-" + n),
				Headers: wire.AppendKVs(nil, []wire.KV{wire.StringKV("seq", wire.StringValue(n))})}
		}
		body, err := wire.AppendSendMessages(nil, st, tp, wire.ToPartition(0), msgs, newClientID)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.roundTrip(c.header(wire.CodeSendMessages), body); err != nil {
			break // the server died: this batch is not acknowledged
		}
		for j := range msgs {
			acked = append(acked, strconv.Itoa(i*3+j))
		}
		ackedBatches.Add(1)
	}
	<-killed
	_ = cmd.Wait()
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged before the kill")
	}
	cmd2, addr2 := start()
	defer func() {
		_ = cmd2.Process.Signal(syscall.SIGTERM)
		_ = cmd2.Wait()
	}()
	c2 := connect(addr2)
	var next uint64
	var got []wire.Message
	for {
		p := c2.must(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollOffset(next), Count: 1000})
		if err := wire.VerifyPollChecksums(p); err != nil {
			t.Fatalf("checksums after crash: %v", err)
		}
		_, msgs, err := wire.DecodePollReply(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			m.Payload = append([]byte(nil), m.Payload...)
			m.RawHeaders = append([]byte(nil), m.RawHeaders...)
			got = append(got, m)
		}
		next = msgs[len(msgs)-1].Offset + 1
	}
	if len(got) < len(acked) {
		t.Fatalf("%d messages after restart, %d acknowledged", len(got), len(acked))
	}
	for i, m := range got {
		if m.Offset != uint64(i) {
			t.Fatalf("message %d has offset %d", i, m.Offset)
		}
		n := strconv.Itoa(i)
		hs, err := m.Headers(nil)
		if string(m.Payload) != "payload-"+n || err != nil || len(hs) != 1 || string(hs[0].Value.Raw) != n {
			t.Fatalf("message %d: payload %q headers %v %v", i, m.Payload, hs, err)
		}
	}
	t.Logf("%d acknowledged, %d recovered", len(acked), len(got))
}
