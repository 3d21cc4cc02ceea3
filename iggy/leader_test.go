package iggy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// Roster modes of a testCluster.
const (
	solo      = iota // each server answers a one-node roster of itself (and serves writes)
	aLeads           // a two-node roster: a leads, b follows (refuses writes with 58)
	bLeads           // the same roster after a leader change
	noLeads          // a two-node roster with no healthy leader
	eachOther        // each server says the other one leads (a broken cluster)
)

// testCluster is two embedded servers posing as the nodes of one cluster through
// server.Config.ClusterRoster. They share nothing else: what one stores, the other does
// not have, so the test can tell where each request went. Every request each server
// receives is recorded (by the ReplyDelay hook) with its command code.
type testCluster struct {
	a, b  *server.Server
	mode  atomic.Int32
	addrs atomic.Pointer[[2]string] // a's and b's listen addresses

	// electOnRead: the first roster read in mode noLeads switches the mode to aLeads
	// (it still answers the leaderless roster): an election during the client's wait.
	electOnRead atomic.Bool

	mu   sync.Mutex
	reqs [2][]wire.Code
}

func startCluster(t *testing.T, mode int32) *testCluster {
	t.Helper()
	tc := &testCluster{}
	tc.mode.Store(mode)
	start := func(i int) *server.Server {
		return servertest.Start(t,
			servertest.WithClusterRoster(func() wire.ClusterMetadata { return tc.roster(i) }),
			servertest.WithReplyDelay(func(code wire.Code) time.Duration {
				tc.mu.Lock()
				tc.reqs[i] = append(tc.reqs[i], code)
				tc.mu.Unlock()
				return 0
			}))
	}
	tc.a, tc.b = start(0), start(1)
	tc.addrs.Store(&[2]string{tc.a.Addr(), tc.b.Addr()})
	return tc
}

// roster is what server i answers in the current mode.
func (tc *testCluster) roster(i int) wire.ClusterMetadata {
	addrs := tc.addrs.Load()
	node := func(j int, role wire.NodeRole, status wire.NodeStatus) wire.ClusterNode {
		host, port, _ := net.SplitHostPort(addrs[j])
		p, _ := strconv.ParseUint(port, 10, 16)
		return wire.ClusterNode{Name: []string{"a", "b"}[j], IP: host, TCPPort: uint16(p), Role: role, Status: status}
	}
	leader, follower := wire.NodeLeader, wire.NodeFollower
	mode := tc.mode.Load()
	if mode == noLeads && tc.electOnRead.Load() {
		tc.mode.Store(aLeads)
	}
	switch mode {
	case solo:
		return wire.ClusterMetadata{Name: "solo", Nodes: []wire.ClusterNode{node(i, leader, wire.NodeHealthy)}}
	case aLeads:
		return wire.ClusterMetadata{Name: "c", Nodes: []wire.ClusterNode{node(0, leader, wire.NodeHealthy), node(1, follower, wire.NodeHealthy)}}
	case bLeads:
		return wire.ClusterMetadata{Name: "c", Nodes: []wire.ClusterNode{node(0, follower, wire.NodeHealthy), node(1, leader, wire.NodeHealthy)}}
	case eachOther:
		return wire.ClusterMetadata{Name: "c", Nodes: []wire.ClusterNode{node(i, follower, wire.NodeHealthy), node(1-i, leader, wire.NodeHealthy)}}
	default: // noLeads: the old leader is unreachable, nobody took over yet
		return wire.ClusterMetadata{Name: "c", Nodes: []wire.ClusterNode{node(0, leader, wire.NodeUnreachable), node(1, follower, wire.NodeHealthy)}}
	}
}

// requests returns the command codes server i (0 = a, 1 = b) received so far.
func (tc *testCluster) requests(i int) []wire.Code {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return slices.Clone(tc.reqs[i])
}

// streamsOn returns the stream names server s holds, read by a client of its own (the
// cluster must be in solo mode, or s must lead).
func streamsOn(t *testing.T, s *server.Server) []string {
	t.Helper()
	c := dial(t, s)
	defer c.Close()
	ss, err := c.GetStreams(testCtx(t))
	if err != nil {
		t.Fatalf("streams on %s: %v", s.Addr(), err)
	}
	var names []string
	for _, st := range ss {
		names = append(names, st.Name)
	}
	slices.Sort(names)
	return names
}

// logRec records the client's log lines at INFO and above as "LEVEL msg k=v ...".
type logRec struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRec) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *logRec) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" && a.Key != "waited" {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
		}
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	r.mu.Unlock()
	return nil
}
func (r *logRec) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRec) WithGroup(string) slog.Handler      { return r }

// matching returns the recorded lines that contain sub.
func (r *logRec) matching(sub string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

const redirectMsg = "iggy: connected to a node that is not the cluster leader, reconnecting to the leader"

// TestLeaderRedirectFromFollower: a client that dials the follower b reads the roster
// after login, logs one INFO line naming both addresses, and reconnects to the leader a;
// every connection it makes later (the pool's others, a Consumer's, the Producer's
// requests) goes straight to a. b receives exactly one login and one roster read; the
// stream, the messages and the group's offset are on a, and b has nothing.
func TestLeaderRedirectFromFollower(t *testing.T) {
	tc := startCluster(t, aLeads)
	rec := &logRec{}
	ctx := testCtx(t)
	c, err := iggy.Dial(ctx, tc.b.Addr(), iggy.WithLogger(slog.New(rec)), iggy.WithPoolSize(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := fmt.Sprintf("INFO %s link=pool-0 node=%s leader=%s leader_name=a", redirectMsg, tc.b.Addr(), tc.a.Addr())
	if got := rec.matching("cluster leader"); !slices.Equal(got, []string{want}) {
		t.Fatalf("leader log lines = %q, want %q", got, want)
	}

	setup(t, c, 2)
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID})
	if err := p.Send(ctx, payloads("m", 4)); err != nil {
		t.Fatal(err)
	}
	// Concurrent reads use every pool connection.
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.GetTopic(ctx, sID, tID)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("get topic: %v", err)
		}
	}
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	got := 0
	for got < 4 {
		b, err := cn.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		got += len(b.Messages)
		if n := len(b.Messages); n > 0 {
			if err := cn.StoreOffset(ctx, b.Partition, b.Messages[n-1].Offset); err != nil {
				t.Fatalf("store offset: %v", err)
			}
		}
		b.Release()
	}
	if got != 4 {
		t.Fatalf("consumed %d messages, want 4", got)
	}
	if err := cn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	if r := tc.requests(1); !slices.Equal(r, []wire.Code{0, wire.CodeGetClusterMetadata}) {
		t.Fatalf("the follower received %v, want only a login and a roster read", r)
	}
	if got := rec.matching("cluster leader"); len(got) != 1 {
		t.Fatalf("leader log lines = %q, want only the first redirect", got)
	}
	tc.mode.Store(solo)
	if got := streamsOn(t, tc.a); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("streams on the leader = %q, want [s]", got)
	}
	if got := streamsOn(t, tc.b); len(got) != 0 {
		t.Fatalf("streams on the follower = %q, want none", got)
	}
}

// TestLeaderChange: a client settled on the leader a follows a leader change to b: the
// roster is switched (b leads) and a refuses writes with 58 TransientNotAccepted; the
// next write reads the roster on a, moves the client to b (one INFO line naming both)
// and is executed there, once. Every other connection of the client is moved too: the
// Producer's sends go to b, and the Consumer rejoins its group on b and polls b's
// messages.
func TestLeaderChange(t *testing.T) {
	tc := startCluster(t, solo)
	for _, s := range []*server.Server{tc.a, tc.b} { // the same topic on both nodes
		sc := dial(t, s)
		setup(t, sc, 1)
		_ = sc.Close()
	}
	tc.mode.Store(aLeads)
	rec := &logRec{}
	ctx := testCtx(t)
	c, err := iggy.Dial(ctx, tc.a.Addr(), iggy.WithLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID})
	if err := p.Send(ctx, payloads("a", 3)); err != nil {
		t.Fatal(err)
	}
	// The member joins on a (the group is created there) and polls nothing yet: the two
	// nodes do not replicate, so positions on a mean nothing on b.
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	if g, err := c.GetConsumerGroup(ctx, sID, tID, iggy.Name("g")); err != nil || g.MembersCount != 1 {
		t.Fatalf("group on a: %+v, %v", g, err)
	}
	if got := rec.matching("leader"); len(got) != 0 {
		t.Fatalf("leader log lines before the change: %q", got)
	}

	tc.mode.Store(bLeads)
	if _, err := c.CreateStream(ctx, "after"); err != nil {
		t.Fatalf("create stream after the leader change: %v", err)
	}
	want := fmt.Sprintf("INFO iggy: the server is not the cluster leader (58 TransientNotAccepted), reconnecting to the leader link=pool-%%d node=%s leader=%s leader_name=b", tc.a.Addr(), tc.b.Addr())
	got := rec.matching("not the cluster leader")
	if len(got) != 1 || (got[0] != fmt.Sprintf(want, 0) && got[0] != fmt.Sprintf(want, 1)) {
		t.Fatalf("leader change log lines = %q, want one %q", got, want)
	}
	if err := p.Send(ctx, payloads("b", 2)); err != nil {
		t.Fatalf("send after the leader change: %v", err)
	}
	if got := pollPayloads(t, cn, 2); !slices.Equal(got, []string{"b-0", "b-1"}) {
		t.Fatalf("polled after the leader change: %q, want b's messages", got)
	}
	if err := cn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	tc.mode.Store(solo)
	if got := streamsOn(t, tc.b); !slices.Equal(got, []string{"after", "s"}) {
		t.Fatalf("streams on the new leader = %q, want [after s]", got)
	}
	if got := streamsOn(t, tc.a); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("streams on the old leader = %q, want [s]", got)
	}
	sa, sb := dial(t, tc.a), dial(t, tc.b)
	if a, b := counts(t, sa, 1), counts(t, sb, 1); a[0] != 3 || b[0] != 2 {
		t.Fatalf("messages: a %v, b %v; want 3 on a, 2 on b", a, b)
	}
	if _, err := sb.GetConsumerGroup(ctx, sID, tID, iggy.Name("g")); err != nil {
		t.Fatalf("the member did not move to b: %v", err)
	}
}

// pollPayloads polls cn until n messages arrived and returns their payloads in order.
func pollPayloads(t *testing.T, cn *iggy.Consumer, n int) []string {
	t.Helper()
	ctx := testCtx(t)
	var out []string
	for len(out) < n {
		b, err := cn.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d: %v", len(out), n, err)
		}
		for _, m := range b.Messages {
			out = append(out, string(m.Payload))
		}
		b.Release()
	}
	return out
}

// TestLeaderSeeds: Dial takes a comma-separated list of seed addresses and tries them in
// order: a dead first seed is skipped (and the follower named second still redirects to
// the leader); when every seed is dead the error is ErrNotConnected naming each; an
// empty or malformed entry is refused before dialling.
func TestLeaderSeeds(t *testing.T) {
	tc := startCluster(t, aLeads)
	dead := deadAddr(t)
	ctx := testCtx(t)
	c, err := iggy.Dial(ctx, dead+", "+tc.b.Addr(), iggy.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	tc.mode.Store(solo)
	if got := streamsOn(t, tc.a); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("streams on the leader = %q", got)
	}

	dead2 := deadAddr(t)
	_, err = iggy.Dial(ctx, dead+","+dead2, iggy.WithLogger(quietLogger()))
	if !errors.Is(err, iggy.ErrNotConnected) || !strings.Contains(err.Error(), "dial "+dead+":") || !strings.Contains(err.Error(), "dial "+dead2+":") {
		t.Fatalf("dial of dead seeds: %v", err)
	}
	for _, bad := range []string{"", tc.a.Addr() + ",", "nohost"} {
		_, err = iggy.Dial(ctx, bad, iggy.WithLogger(quietLogger()))
		if err == nil || errors.Is(err, iggy.ErrNotConnected) {
			t.Fatalf("dial %q: %v, want an address error", bad, err)
		}
	}
}

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestLeaderUnreachable: a roster naming a leader nobody can reach fails Dial with
// ErrNotConnected naming the leader and the node that named it (the client does not
// stay on a follower, which would refuse every write); a roster with no healthy leader
// is read again for the leaderless wait and then the client stays on its node, with a
// WARN line, and its reads work.
func TestLeaderUnreachable(t *testing.T) {
	tc := startCluster(t, aLeads)
	ctx := testCtx(t)
	aAddr := tc.a.Addr()
	if err := tc.a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := iggy.Dial(ctx, tc.b.Addr(), iggy.WithLogger(quietLogger()))
	want := fmt.Sprintf("cluster leader %s (named by %s) unreachable: dial %s:", aAddr, tc.b.Addr(), aAddr)
	if !errors.Is(err, iggy.ErrNotConnected) || !strings.Contains(err.Error(), want) {
		t.Fatalf("dial with the leader down: %v, want ErrNotConnected containing %q", err, want)
	}

	tc.mode.Store(noLeads)
	rec := &logRec{}
	c, err := iggy.Dial(ctx, tc.b.Addr(), iggy.WithLogger(slog.New(rec)), iggy.WithLeaderWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := rec.matching("leader"), []string{fmt.Sprintf("WARN iggy: the cluster has no healthy leader, staying on this node link=pool-0 node=%s", tc.b.Addr())}; !slices.Equal(got, want) {
		t.Fatalf("log lines = %q, want %q", got, want)
	}
	if _, err := c.GetStreams(ctx); err != nil {
		t.Fatalf("read on the follower: %v", err)
	}
}

// TestLeaderElected: a roster with no healthy leader at login is read again (every
// 250ms, within the leaderless wait, 5s by default) until one is elected, and then the
// client moves to it.
func TestLeaderElected(t *testing.T) {
	tc := startCluster(t, noLeads)
	tc.electOnRead.Store(true)
	rec := &logRec{}
	ctx := testCtx(t)
	c, err := iggy.Dial(ctx, tc.b.Addr(), iggy.WithLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := fmt.Sprintf("INFO %s link=pool-0 node=%s leader=%s leader_name=a", redirectMsg, tc.b.Addr(), tc.a.Addr())
	if got := rec.matching("leader"); !slices.Equal(got, []string{want}) {
		t.Fatalf("log lines = %q, want %q", got, want)
	}
	if r := tc.requests(1); !slices.Equal(r, []wire.Code{0, wire.CodeGetClusterMetadata, wire.CodeGetClusterMetadata}) {
		t.Fatalf("b received %v, want a login and two roster reads", r)
	}
}

// TestLeaderRedirectLimit: rosters that keep naming another node (each server says the
// other leads) are followed 3 times in one connect; then the client stays where it is,
// with a WARN line.
func TestLeaderRedirectLimit(t *testing.T) {
	tc := startCluster(t, eachOther)
	rec := &logRec{}
	c, err := iggy.Dial(testCtx(t), tc.b.Addr(), iggy.WithLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, b := tc.a.Addr(), tc.b.Addr()
	line := func(node, leader, name string) string {
		return fmt.Sprintf("INFO %s link=pool-0 node=%s leader=%s leader_name=%s", redirectMsg, node, leader, name)
	}
	want := []string{line(b, a, "a"), line(a, b, "b"), line(b, a, "a"),
		fmt.Sprintf("WARN iggy: too many leader redirects, staying on this node link=pool-0 node=%s leader=%s redirects=3", a, b)}
	if got := rec.matching("leader"); !slices.Equal(got, want) {
		t.Fatalf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
