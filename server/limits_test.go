package server_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// dialAddr dials addr (from local IP from, "" for any) as a tclient.
func dialAddr(t testing.TB, addr, from string) *tclient {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %q: %v", addr, from, err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &tclient{t: t, nc: nc, client: newClientID(), counter: 1}
}

// bigHeader is a Ping header declaring a frame of size bytes.
func (c *tclient) bigHeader(size uint32) []byte {
	h := wire.AppendRequestHeader(nil, wire.RequestHeader{Client: c.client, Session: c.session, Operation: wire.OpNonReplicated, Code: wire.CodePing}, 0)
	binary.LittleEndian.PutUint32(h[48:], size)
	return h
}

// waitClosed fails unless the server closes c (a read ends in EOF or a reset) within
// the safety net.
func waitClosed(t testing.TB, c *tclient, what string) {
	t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c.nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: connection still open", what)
	}
}

const memChildEnv = "FERRY_TEST_MEMORY_CHILD"

// TestHalfSentFramesBoundedMemory is issue 14's memory defect: the reader allocated
// the whole declared body (up to 64 MiB) before login and without a deadline, so 32
// connections that declared 64 MiB and never finished took RSS past 2 GB. The server
// runs in a child process whose peak RSS (VmHWM) is read from /proc.
func TestHalfSentFramesBoundedMemory(t *testing.T) {
	if os.Getenv(memChildEnv) != "" {
		runMemoryChild(t)
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHalfSentFramesBoundedMemory$", "-test.v")
	cmd.Env = append(os.Environ(), memChildEnv+"="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}()
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("child printed no address")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	base := peakRSS(t, cmd.Process.Pid)

	const conns, declared = 32, 64 << 20
	var wg sync.WaitGroup
	var clients []*tclient
	send := func(c *tclient, body int) {
		clients = append(clients, c)
		wg.Go(func() {
			_ = c.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
			_, _ = c.nc.Write(append(c.bigHeader(declared), make([]byte, body)...))
		})
	}
	for range conns { // before login: 1 MiB of a 64 MiB Ping
		send(dialAddr(t, addr, ""), 1<<20)
	}
	for range conns { // logged in: 8 MiB of a 64 MiB Ping each, 256 MiB in all
		c := dialAddr(t, addr, "")
		if _, err := c.login(servertest.Username, servertest.Password); err != nil {
			t.Fatalf("login: %v", err)
		}
		send(c, 8<<20)
	}
	for i, c := range clients {
		waitClosed(t, c, fmt.Sprintf("connection %d", i))
	}
	wg.Wait()
	peak := peakRSS(t, cmd.Process.Pid)
	t.Logf("server peak RSS: %d MB at start, %d MB after %d half-sent 64 MiB frames", base>>20, peak>>20, 2*conns)
	limit := int64(100 << 20)
	if raceEnabled {
		limit = 250 << 20 // the race detector's shadow memory; the bound without it is 100 MB
	}
	if peak > limit {
		t.Fatalf("server peak RSS %d MB, want under %d MB", peak>>20, limit>>20)
	}
	// The server still serves.
	c := dialAddr(t, addr, "")
	if _, err := c.login(servertest.Username, servertest.Password); err != nil {
		t.Fatalf("login after the attack: %v", err)
	}
	c.must(wire.PingRequest{})
}

// runMemoryChild serves until stdin closes: 16 MiB for incoming frames, 1 s to finish
// a frame.
func runMemoryChild(t *testing.T) {
	s, err := server.Start(context.Background(), server.Config{
		Addr: "127.0.0.1:0", DataDir: os.Getenv(memChildEnv),
		RootUsername: servertest.Username, RootPassword: servertest.Password, PasswordIterations: 1000,
		MaxPendingBytes: 16 << 20, FrameReadTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ADDR %s\n", s.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// peakRSS reads VmHWM (peak resident set) of process pid, in bytes.
func peakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestIdleUnauthenticatedFlood is issue 14's connection-slot defect: idle connections
// that never log in used to fill MaxConnections and reset every new client.
func TestIdleUnauthenticatedFlood(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxConnections = 20
		c.LoginTimeout = time.Hour // only the make-room rule frees slots here
	}))
	var flood []*tclient
	for range 100 {
		c := dialAddr(t, s.Addr(), "127.0.0.2")
		c.must(wire.PingRequest{}) // served (a ping needs no login), then idle
		flood = append(flood, c)
	}
	for i := range 3 {
		c := dialAddr(t, s.Addr(), "127.0.0.1")
		if _, err := c.login(servertest.Username, servertest.Password); err != nil {
			t.Fatalf("client %d: login during the flood: %v", i, err)
		}
		c.must(wire.PingRequest{})
	}
	// The 100 - 20 + 3 oldest idle ones were closed to make room, the newest still serve.
	for i, c := range flood[:83] {
		waitClosed(t, c, fmt.Sprintf("idle connection %d", i))
	}
	for _, c := range flood[83:] {
		c.must(wire.PingRequest{})
	}
}

func TestMaxConnectionsPerIP(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) { c.MaxConnectionsPerIP = 2 }))
	a, b := login(t, s), login(t, s)
	third := dialAddr(t, s.Addr(), "127.0.0.1")
	waitClosed(t, third, "third connection from 127.0.0.1")
	other := dialAddr(t, s.Addr(), "127.0.0.2")
	if _, err := other.login(servertest.Username, servertest.Password); err != nil {
		t.Fatalf("another address: %v", err)
	}
	a.must(wire.PingRequest{})
	b.must(wire.PingRequest{})
	_ = a.nc.Close()
	testkit.WaitFor(t, "a's slot freed", func() bool {
		c := dialAddr(t, s.Addr(), "127.0.0.1")
		_, err := c.login(servertest.Username, servertest.Password)
		return err == nil
	})
}

// TestLoginAndFrameDeadlines: a connection that does not log in within LoginTimeout is
// closed, a logged-in one is not; a frame left unfinished for FrameReadTimeout closes
// its connection; a frame too large before login is refused before its body is read.
func TestLoginAndFrameDeadlines(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.LoginTimeout = 200 * time.Millisecond
		c.FrameReadTimeout = 200 * time.Millisecond
	}))
	in := login(t, s)
	idle := dial(t, s)
	waitClosed(t, idle, "connection without login")
	in.must(wire.PingRequest{}) // older than idle, so past its login timeout too

	half := login(t, s)
	if _, err := half.nc.Write(half.bigHeader(wire.HeaderSize + 1000)[:100]); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, half, "half-sent header")
	halfBody := login(t, s)
	if _, err := halfBody.nc.Write(append(halfBody.bigHeader(wire.HeaderSize+1000), make([]byte, 10)...)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, halfBody, "half-sent body")

	big := dial(t, s)
	if _, err := big.nc.Write(big.bigHeader(server.DefaultMaxUnauthenticatedFrame + 1)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, big, "oversized frame before login")
	in.must(wire.PingRequest{})
}
