package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// Login floods. Every address of 127.0.0.0/8 is the loopback interface on Linux, so a
// client bound to 127.0.0.2 is another client address to the server than one bound to
// 127.0.0.3. Nothing here waits for time to pass: the hash slots are held and released
// by the test, and the gate's counters and grant order say what ran.

// dialFrom connects to s from the local address ip.
func dialFrom(t testing.TB, s *server.Server, ip string) *tclient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &tclient{t: t, nc: nc, client: newClientID(), counter: 1}
}

// sendLogin writes a password login without waiting for its reply.
func (c *tclient) sendLogin(user, pass string) error {
	body := wire.LoginPasswordRequest{
		Client:              wire.ClientVersionInfo{ProtocolVersion: wire.ProtocolVersion, SDKName: "ferry-test", SDKVersion: "0.0.1"},
		PasswordCredentials: wire.PasswordCredentials{Username: user, Password: pass},
	}.Append(nil)
	frame := wire.AppendRequestHeader(nil, wire.RequestHeader{Client: c.client, Operation: wire.OpRegister}, len(body))
	_, err := c.nc.Write(append(frame, body...))
	return err
}

// loginResult reads the reply of a login sent by sendLogin: nil or its error. Safe on
// any goroutine (it never fails the test itself).
func (c *tclient) loginResult() error {
	hdr, body, err := c.readFrame()
	if err != nil {
		return err
	}
	_, p, err := wire.DecodeReplyFrame(hdr, body)
	if err != nil {
		return err
	}
	_, err = wire.DecodeLoginReply(p)
	return err
}

// grantLog records the client address of every hash in the order it was granted.
type grantLog struct {
	mu  sync.Mutex
	ips []string
}

func (g *grantLog) add(ip string) {
	g.mu.Lock()
	g.ips = append(g.ips, ip)
	g.mu.Unlock()
}

func (g *grantLog) get() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ips)
}

// TestLoginFloodFairShare is the login flood of issue 36: 500 connections of one
// address sending wrong passwords kept a right login from another address waiting
// behind all their hashes. Now an address holds at most MaxLoginsPerIP checks (the
// rest are refused at once, without a hash) and slots go to addresses in turn: with
// the one slot held, 50 guesses from 127.0.0.2 queue 4 and are refused 46 times, the
// right password from 127.0.0.3 queues behind them, and once the slot is free it is
// the second hash computed (after one guess), out of 5 in all.
func TestLoginFloodFairShare(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxConcurrentLogins, c.MaxLoginsPerIP = 1, 4
		c.LoginFailureDelay = -1   // this test is about the gate, not the throttle's delays
		c.LoginTimeout = time.Hour // no connection reaches its login deadline by itself
	}))
	grants := &grantLog{}
	server.OnHashGranted(s, grants.add)
	release := server.HoldHashSlots(s)
	t.Cleanup(release) // before the server closes, should the test fail first
	const flood = 50
	guessers := make([]*tclient, flood)
	for i := range guessers {
		guessers[i] = dialFrom(t, s, "127.0.0.2")
		if err := guessers[i].sendLogin(servertest.Username, fmt.Sprintf("guess-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "4 guesses queued and 46 refused", func() bool {
		return server.HashWaiting(s, "127.0.0.2") == 4 && server.Hashes(s).Refused == flood-4
	})
	results := make(chan error, flood)
	for _, g := range guessers {
		go func() { results <- g.loginResult() }()
	}
	refused := 0
	for range flood - 4 { // the refused ones are answered while the slot is still held
		if r := evictionReason(<-results); r != wire.EvictionSessionError {
			t.Fatalf("a guess past the per-address cap: reason %d, want %d (SessionError)", r, wire.EvictionSessionError)
		}
		refused++
	}
	right := dialFrom(t, s, "127.0.0.3")
	if err := right.sendLogin(servertest.Username, servertest.Password); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the right login queued", func() bool { return server.HashWaiting(s, "127.0.0.3") == 1 })
	release()
	if err := right.loginResult(); err != nil {
		t.Fatalf("right password from another address during the flood: %v", err)
	}
	for range 4 {
		if r := evictionReason(<-results); r != wire.EvictionInvalidCredentials {
			t.Fatalf("a queued guess: reason %d, want %d (InvalidCredentials)", r, wire.EvictionInvalidCredentials)
		}
	}
	want := []string{"127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.2", "127.0.0.2"}
	if got := grants.get(); !slices.Equal(got, want) {
		t.Fatalf("hashes granted to %v, want %v", got, want)
	}
	if c := server.Hashes(s); c.Computed != 5 || c.Refused != flood-4 || c.Abandoned != 0 {
		t.Fatalf("hash counters %+v, want 5 computed, %d refused, 0 abandoned", c, flood-4)
	}
}

// TestLoginFloodClosedConnectionsDropped: queued hashes of connections that are gone
// were still computed, for ~115 s after a 20 s flood. Of 20 guesses queued behind the
// held slot, the 15 whose clients close their connection and the one whose login
// deadline passes give up their place; only the 4 others are hashed.
func TestLoginFloodClosedConnectionsDropped(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxConcurrentLogins, c.MaxLoginsPerIP = 1, 100
		c.LoginFailureDelay, c.LoginTimeout = -1, time.Hour
	}))
	release := server.HoldHashSlots(s)
	t.Cleanup(release)
	guessers := make([]*tclient, 20)
	for i := range guessers {
		guessers[i] = dialFrom(t, s, "127.0.0.2")
		if err := guessers[i].sendLogin(servertest.Username, fmt.Sprintf("guess-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "20 guesses queued", func() bool { return server.HashWaiting(s, "127.0.0.2") == 20 })
	for _, g := range guessers[4:19] {
		_ = g.nc.Close()
	}
	testkit.WaitFor(t, "15 closed connections' guesses dropped", func() bool {
		return server.HashWaiting(s, "127.0.0.2") == 5 && server.Hashes(s).Abandoned == 15
	})
	// The login deadline of the last one: a connection that stays open but does not
	// log in within LoginTimeout is closed, and its queued check dropped with it.
	if !server.ExpireLoginDeadline(s, guessers[19].nc.LocalAddr().String()) {
		t.Fatal("the last guesser's connection not found")
	}
	testkit.WaitFor(t, "the expired login's guess dropped", func() bool {
		return server.HashWaiting(s, "127.0.0.2") == 4 && server.Hashes(s).Abandoned == 16
	})
	release()
	for i, g := range guessers[:4] {
		if r := evictionReason(g.loginResult()); r != wire.EvictionInvalidCredentials {
			t.Fatalf("guess %d: reason %d, want InvalidCredentials", i, r)
		}
	}
	if c := server.Hashes(s); c.Computed != 4 || c.Abandoned != 16 {
		t.Fatalf("hash counters %+v, want 4 computed and 16 abandoned", c)
	}
}

// TestLoginFloodRememberedPasswordNoSlot: a password that matched before needs no hash
// slot. With every slot held and the flooding address at its cap, the right password
// (checked once before) logs in from another address, and from the flooding address
// too, while nothing is hashed.
func TestLoginFloodRememberedPasswordNoSlot(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxConcurrentLogins, c.MaxLoginsPerIP = 1, 2
		c.LoginFailureDelay, c.LoginTimeout = -1, time.Hour
	}))
	login(t, s) // the first right login pays its hash and is remembered
	before := server.Hashes(s).Computed
	release := server.HoldHashSlots(s)
	t.Cleanup(release)
	for i := range 2 {
		g := dialFrom(t, s, "127.0.0.2")
		if err := g.sendLogin(servertest.Username, fmt.Sprintf("guess-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "the flooding address at its cap", func() bool { return server.HashWaiting(s, "127.0.0.2") == 2 })
	for _, ip := range []string{"127.0.0.3", "127.0.0.2"} {
		c := dialFrom(t, s, ip)
		if _, err := c.login(servertest.Username, servertest.Password); err != nil {
			t.Fatalf("remembered password from %s with every slot held: %v", ip, err)
		}
	}
	if c := server.Hashes(s); c.Computed != before || c.Refused != 0 {
		t.Fatalf("hash counters %+v: want no hash since the first login (%d) and no refusal", c, before)
	}
}

// logLines is a slog handler that keeps every record (a test reads them back).
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
	h   slog.Handler
}

func newLogLines() *logLines {
	l := &logLines{}
	l.h = slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return l
}

func (l *logLines) logger() *slog.Logger { return slog.New(lockedHandler{l, l.h}) }

// matching returns the lines at level that contain text.
func (l *logLines) matching(level, text string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.buf.String()) {
		if strings.Contains(line, "level="+level+" ") && strings.Contains(line, text) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// lockedHandler serializes writes to the buffer of its logLines.
type lockedHandler struct {
	l *logLines
	slog.Handler
}

func (h lockedHandler) Handle(ctx context.Context, r slog.Record) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h lockedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return lockedHandler{h.l, h.Handler.WithAttrs(as)}
}

func (h lockedHandler) WithGroup(name string) slog.Handler {
	return lockedHandler{h.l, h.Handler.WithGroup(name)}
}

// TestRefusalsLoggedAtBoundedRate: one flood logged 182,690 WARN lines in 20 s. Lines a
// client causes at will are now written once per interval per message, with the count
// of the others. 200 connections refused by the per-address limit and 200 wrong
// passwords, all within one interval of the server's (fake) clock, write one line of
// each kind; once the interval has passed, the next flush writes one line of each
// with the 199 others counted.
func TestRefusalsLoggedAtBoundedRate(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	logs := newLogLines()
	s := servertest.Start(t, servertest.WithLogger(logs.logger()), servertest.WithConfig(func(c *server.Config) {
		c.MaxConnectionsPerIP, c.LoginTimeout = 1, time.Hour
		c.Now = clock.Now
		c.LoginFailureDelay, c.LoginMaxDelay = time.Microsecond, time.Microsecond
	}))
	server.OnLoginWait(s, func(time.Duration) {}) // the throttle's delays are not slept
	held := dialFrom(t, s, "127.0.0.2")
	for i := range 200 {
		if _, err := held.login(servertest.Username, fmt.Sprintf("guess-%d", i)); evictionReason(err) != wire.EvictionInvalidCredentials {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	for i := range 200 {
		c := dialFrom(t, s, "127.0.0.2")
		if _, err := c.nc.Read(make([]byte, 1)); err == nil {
			t.Fatalf("connection %d past the per-address limit was answered", i)
		}
	}
	const refused, failed = "connection refused", "login failed; delaying the next attempt of this address and user name"
	if got := logs.matching("WARN", refused); len(got) != 1 {
		t.Fatalf("%d WARN lines %q for 200 refusals, want 1:\n%s", len(got), refused, strings.Join(got, "\n"))
	}
	if got := logs.matching("INFO", failed); len(got) != 1 {
		t.Fatalf("%d INFO lines %q for 200 failures, want 1:\n%s", len(got), failed, strings.Join(got, "\n"))
	}
	clock.Advance(10 * time.Second)
	server.FlushRefusalLog(s)
	for _, k := range []struct{ level, msg string }{{"WARN", refused}, {"INFO", failed}} {
		got := logs.matching(k.level, k.msg)
		if len(got) != 2 || !strings.Contains(got[1], k.msg+" (repeated)") || !strings.Contains(got[1], "suppressed=199") {
			t.Fatalf("%s lines %q after the interval:\n%s\nwant the first and one with suppressed=199", k.level, k.msg, strings.Join(got, "\n"))
		}
	}
}

// BenchmarkRightLoginDuringFlood measures a right login from 127.0.0.3, each with a
// password never checked before (a new user per iteration, so every login pays its
// hash), while 200 connections from 127.0.0.2 send wrong passwords in a loop against one
// hash slot. ns/op is the login's latency under the flood; hashes/op how many hashes ran
// meanwhile (the fair share keeps it near 2: the login's own and one guess).
func BenchmarkRightLoginDuringFlood(b *testing.B) {
	s := servertest.Start(b, servertest.WithConfig(func(c *server.Config) {
		c.MaxConcurrentLogins, c.PasswordIterations = 1, 20_000
		c.LoginFailureDelay, c.LoginTimeout = -1, time.Hour
	}))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for i := range 200 {
		g := dialFrom(b, s, "127.0.0.2")
		wg.Go(func() {
			go func() { <-stop; _ = g.nc.Close() }()
			for {
				if g.sendLogin(servertest.Username, fmt.Sprintf("guess-%d", i)) != nil || g.loginResult() == nil {
					return
				}
			}
		})
	}
	testkit.WaitFor(b, "the flood at its cap", func() bool { return server.HashWaiting(s, "127.0.0.2") >= 7 })
	users := make([]string, b.N)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
		if err := server.AddUser(s, users[i], "right-password"); err != nil {
			b.Fatal(err)
		}
	}
	c := dialFrom(b, s, "127.0.0.3")
	before := server.Hashes(s).Computed
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.login(users[i], "right-password"); err != nil {
			b.Fatalf("right login %d during the flood: %v", i, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(server.Hashes(s).Computed-before)/float64(b.N), "hashes/op")
}
