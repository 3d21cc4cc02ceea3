package iggy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

// TestCancelledPollKeepsMembership is the regression test of "a caller-side timeout on
// Consumer.Poll kills the member connection": the member dropped out of the group, the
// server rebalanced, and the member rejoined with a new client id having lost the
// partitions it held (pending-revoked ones included). Here a member's Polls (and some
// Commits) are cut short by 1–5 ms timeouts 200 times on a topic with data and 200
// times without; throughout, the member keeps its first login (same client id), the
// group shows it as the only member owning both partitions, no assignment change follows
// the first, and the messages delivered are exactly 0..999 of each partition in order
// (batches of polls outliving their Poll are delivered by the next one), then exactly
// the new 1000..1002.
//
// A poll on an idle machine completes well within 1 ms, so the slowness that cuts polls
// short is made deterministic: during the two loops of tiny timeouts the server
// (servertest.WithReplyDelay) holds every other PollMessages request for 20 ms, longer
// than any of the timeouts, so polls certainly outlive their Poll call, while the other
// polls, the syncs and the commits stay fast. Draining and the final polls are not held.
func TestCancelledPollKeepsMembership(t *testing.T) {
	const hold = 20 * time.Millisecond // > every tiny timeout (1–5 ms)
	var (
		slow  atomic.Bool  // hold polls (during the loops of tiny timeouts)
		polls atomic.Int64 // PollMessages requests seen while slow
	)
	s := servertest.Start(t, servertest.WithReplyDelay(func(code wire.Code) time.Duration {
		if code == wire.CodePollMessages && slow.Load() && polls.Add(1)%2 == 1 {
			return hold
		}
		return 0
	}))
	c := dial(t, s)
	setup(t, c, 2)
	const n = 1000
	fill(t, c, []uint32{0, 1}, 0, n)
	acfg, alog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 10})
	a := newConsumer(t, c, acfg)
	epoch, client := iggy.MemberLogin(a)
	if epoch != 1 || client.IsZero() {
		t.Fatalf("member login %d %v", epoch, client)
	}
	checkMember := func(when string) {
		t.Helper()
		if e, cl := iggy.MemberLogin(a); e != epoch || cl != client {
			t.Fatalf("%s: member login %d %v, want %d %v (reconnected)", when, e, cl, epoch, client)
		}
		g, err := c.GetConsumerGroup(testCtx(t), sID, tID, iggy.Name("g"))
		if err != nil {
			t.Fatalf("%s: get group: %v", when, err)
		}
		if len(g.Members) != 1 || g.Members[0].ID != 0 || !slices.Equal(slices.Sorted(slices.Values(g.Members[0].Partitions)), []uint32{0, 1}) {
			t.Fatalf("%s: group members %+v, want one member 0 owning [0 1]", when, g.Members)
		}
		if chs := alog.take(); len(chs) != 0 {
			t.Fatalf("%s: assignment changes %+v after the first", when, chs)
		}
	}
	next := map[uint32]uint64{0: 0, 1: 0}
	// take checks b continues its partition exactly where the last batch ended.
	take := func(b *iggy.Batch) {
		t.Helper()
		for i, m := range b.Messages {
			want := next[b.Partition] + uint64(i)
			if m.Offset != want || string(m.Payload) != fmt.Sprintf("p%d-%d", b.Partition, want) {
				t.Fatalf("partition %d message %d: offset %d payload %q, want offset %d", b.Partition, i, m.Offset, m.Payload, want)
			}
		}
		next[b.Partition] += uint64(len(b.Messages))
		b.Release()
	}
	tiny := func(i int) (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Duration(1+i%5)*time.Millisecond)
	}
	batches := 0
	slow.Store(true)
	for i := range 200 {
		ctx, cancel := tiny(i)
		b, err := a.Poll(ctx)
		cancel()
		if i == 0 { // the first Poll reports the assignment, whatever its ctx
			alog.want(t, "first poll", change(nil, []uint32{0, 1}))
		}
		switch {
		case err == nil:
			batches++
			take(b)
		case !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("poll %d: %v", i, err)
		}
		if i%10 == 5 && next[0] > 0 {
			ctx, cancel := tiny(i)
			err := a.StoreOffset(ctx, 0, next[0]-1) // often abandoned mid-request
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("commit %d: %v", i, err)
			}
		}
		if i%25 == 0 {
			checkMember(fmt.Sprintf("with data, iteration %d", i))
		}
	}
	slow.Store(false)
	outlived := iggy.OutlivedPolls(a)
	t.Logf("with data: %d batches within tiny timeouts, %d polls outlived their Poll, delivered %v", batches, outlived, next)
	if outlived == 0 {
		t.Fatal("no poll outlived its Poll call: the test did not cut any poll short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	for next[0] < n || next[1] < n {
		b, err := a.Poll(ctx)
		if err != nil {
			t.Fatalf("drain at %v: %v", next, err)
		}
		take(b)
	}
	cancel()
	if next[0] != n || next[1] != n {
		t.Fatalf("delivered up to %v, want %d of each", next, n)
	}
	checkMember("after draining")

	slow.Store(true)
	for i := range 200 {
		ctx, cancel := tiny(i)
		b, err := a.Poll(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("poll %d without data: batch %v, %v", i, b, err)
		}
		if i%25 == 0 {
			checkMember(fmt.Sprintf("without data, iteration %d", i))
		}
	}
	slow.Store(false)
	fill(t, c, []uint32{0, 1}, n, 3)
	got := pollWithin(t, a, 6, 5*time.Second)
	if len(got) != 2 || !slices.Equal(got[0], seq(n, n+3)) || !slices.Equal(got[1], seq(n, n+3)) {
		t.Fatalf("after the cancelled polls got %v, want offsets %d..%d of both partitions", got, n, n+2)
	}
	for _, p := range []uint32{0, 1} {
		if err := a.StoreOffset(testCtx(t), p, n+2); err != nil {
			t.Fatalf("commit %d: %v", p, err)
		}
	}
	checkMember("at the end")
}

// streamsReply answers a GetStreams request with one stream called name.
func streamsReply(nc net.Conn, h wire.RequestHeader, name string) {
	_, _ = nc.Write(wire.AppendOKReply(nil, h, wire.AppendStreams(nil, []wire.StreamResponse{{ID: 7, Name: name}})))
}

// TestCancelledCallKeepsConnection: a call whose ctx ends while the (fake) server is
// slow returns ctx's error at once; the next call waits for the late reply, which is
// discarded (never taken as its answer), and succeeds on the same connection. A late
// reply echoing another request number, or none within the request timeout, kills the
// connection and the next call succeeds on a new one.
func TestCancelledCallKeepsConnection(t *testing.T) {
	const timeout = 400 * time.Millisecond
	cases := []struct {
		name       string
		first      func(nc net.Conn, h wire.RequestHeader) // answers the first request
		wantLogins int32
		minWait    time.Duration // the second call waits at least this long after the first began
	}{
		{"late reply discarded", func(nc net.Conn, h wire.RequestHeader) {
			time.Sleep(300 * time.Millisecond)
			streamsReply(nc, h, "late")
		}, 1, 300 * time.Millisecond},
		{"late reply to another request", func(nc net.Conn, h wire.RequestHeader) {
			time.Sleep(200 * time.Millisecond)
			h.Request += 7
			streamsReply(nc, h, "late")
		}, 2, 200 * time.Millisecond},
		{"no reply within the request timeout", func(net.Conn, wire.RequestHeader) {}, 2, timeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var requests atomic.Int32
			addr, logins := fakePeer(t, func(nc net.Conn, h wire.RequestHeader) {
				if requests.Add(1) == 1 {
					tc.first(nc, h)
					return
				}
				streamsReply(nc, h, "fresh")
			})
			c, err := iggy.Dial(testCtx(t), addr, iggy.WithPoolSize(1), iggy.WithLogger(quietLogger()),
				iggy.WithRequestTimeout(timeout), iggy.WithReconnect(time.Millisecond, time.Millisecond, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			_, err = c.GetStreams(ctx)
			cancel()
			if !errors.Is(err, iggy.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("cancelled call: %v", err)
			}
			if d := time.Since(start); d > 150*time.Millisecond {
				t.Fatalf("cancelled call returned after %v", d)
			}
			// Not a wait: the second call starts 100 ms later so that its own request timeout
			// outlasts the owed reply's, with room to reconnect and log in again.
			time.Sleep(100 * time.Millisecond)
			streams, err := c.GetStreams(testCtx(t))
			if err != nil || len(streams) != 1 || streams[0].Name != "fresh" {
				t.Fatalf("next call: %+v, %v (want the stream \"fresh\")", streams, err)
			}
			if d := time.Since(start); d < tc.minWait {
				t.Fatalf("next call answered %v after the first began, before the owed reply was settled (%v)", d, tc.minWait)
			}
			if got := logins.Load(); got != tc.wantLogins {
				t.Fatalf("%d logins, want %d", got, tc.wantLogins)
			}
			if got := requests.Load(); got != 2 {
				t.Fatalf("%d requests reached the server, want 2", got)
			}
		})
	}
}
