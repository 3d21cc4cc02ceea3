package iggy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
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

// restart closes s and starts a new server on the same data directory and address.
func restart(t *testing.T, s *server.Server, dir string) *server.Server {
	t.Helper()
	addr := s.Addr()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return servertest.Start(t, servertest.WithDataDir(dir), servertest.WithConfig(func(c *server.Config) { c.Addr = addr }))
}

func TestReconnectAfterServerRestart(t *testing.T) {
	dir := t.TempDir()
	s := servertest.Start(t, servertest.WithDataDir(dir))
	c := dial(t, s, iggy.WithReconnect(10*time.Millisecond, 100*time.Millisecond, 0), iggy.WithHeartbeat(100*time.Millisecond))
	ctx := testCtx(t)
	setup(t, c, 2)
	fill(t, c, []uint32{0, 1}, 0, 3)
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	got := drain(t, cn, 6)
	if !slices.Equal(got[0], seq(0, 3)) || !slices.Equal(got[1], seq(0, 3)) {
		t.Fatalf("before restart = %v", got)
	}
	if err := cn.StoreOffset(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	genBefore, _ := cn.Assignment()

	restart(t, s, dir)

	// Reads are retried transparently.
	streams, err := c.GetStreams(ctx)
	if err != nil || len(streams) != 1 || streams[0].Name != "s" {
		t.Fatalf("streams after restart = %v, %v", streams, err)
	}
	// The conns were seen closed while idle, so a send goes to a new connection; if
	// the outcome is unknown anyway the error says so and is retriable.
	for p := uint32(0); p < 2; p++ {
		msgs := []iggy.Message{{Payload: []byte("p" + string(rune('0'+p)) + "-3")}}
		_, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(p), msgs)
		if errors.Is(err, iggy.ErrOutcomeUnknown) && iggy.Retriable(err) {
			t.Logf("send after restart: %v (retrying)", err)
			_, err = c.SendMessages(ctx, sID, tID, wire.ToPartition(p), msgs)
		}
		if err != nil {
			t.Fatalf("send after restart: %v", err)
		}
	}
	// The consumer rejoins and resyncs by itself; positions of partitions it still owns
	// stay local (no re-read of 0..2 although only 0..1 of partition 0 was committed).
	got = drain(t, cn, 2)
	if !slices.Equal(got[0], []uint64{3}) || !slices.Equal(got[1], []uint64{3}) {
		t.Fatalf("after restart = %v", got)
	}
	o, found, err := c.GetOffset(ctx, wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}, sID, tID, 0)
	if err != nil || !found || o.StoredOffset != 1 {
		t.Fatalf("committed offset after restart = %+v %v %v", o, found, err)
	}
	if err := cn.StoreOffset(ctx, 0, 3); err != nil {
		t.Fatalf("commit after restart: %v", err)
	}
	if gen, parts := cn.Assignment(); gen < genBefore || len(parts) != 2 {
		t.Fatalf("assignment after restart = %d %v", gen, parts)
	}
	g, err := c.GetConsumerGroup(ctx, sID, tID, iggy.Name("g"))
	if err != nil || g.MembersCount != 1 {
		t.Fatalf("group after restart = %+v, %v", g, err)
	}
}

func TestServerGone(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s, iggy.WithReconnect(10*time.Millisecond, 50*time.Millisecond, 3), iggy.WithRequestTimeout(2*time.Second))
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := c.Ping(testCtx(t))
	if !errors.Is(err, iggy.ErrNotConnected) || !iggy.SafeToRetry(err) || !iggy.Retriable(err) {
		t.Fatalf("ping with the server gone: %v", err)
	}
	var op *iggy.OpError
	if !errors.As(err, &op) || op.Op != "ping" {
		t.Fatalf("not an OpError: %#v", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error does not name the cause: %v", err)
	}
	_ = c.Close()
	if err := c.Ping(testCtx(t)); !errors.Is(err, iggy.ErrClosed) || iggy.Retriable(err) {
		t.Fatalf("ping after close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s, iggy.WithMaxFrameSize(1<<20))
	ctx := testCtx(t)
	setup(t, c, 1)
	_, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: single("c"), Stream: iggy.Name("orders"), Topic: iggy.ID(0),
		Partition: u32(2), Strategy: wire.PollFirst(), Count: 1})
	if !errors.Is(err, wire.ErrStreamIDNotFound) || Retriable(err) {
		t.Fatalf("unknown stream: %v", err)
	}
	if want := `iggy: poll stream "orders" topic 0 partition 2: StreamIdNotFound (1009)`; err.Error() != want {
		t.Fatalf("error text %q, want %q", err, want)
	}
	_, err = c.PollMessages(ctx, iggy.PollRequest{Consumer: single("c"), Stream: sID, Topic: iggy.Name("nope"),
		Partition: u32(0), Strategy: wire.PollFirst(), Count: 1})
	if !errors.Is(err, wire.ErrTopicIDNotFound) {
		t.Fatalf("unknown topic: %v", err)
	}
	_, err = c.PollMessages(ctx, iggy.PollRequest{Consumer: single("c"), Stream: sID, Topic: tID,
		Partition: u32(9), Strategy: wire.PollFirst(), Count: 1})
	if !errors.Is(err, wire.ErrPartitionNotFound) {
		t.Fatalf("unknown partition: %v", err)
	}
	_, err = c.SendMessages(ctx, sID, iggy.Name("nope"), wire.ToPartition(0), payloads("x", 1))
	if !errors.Is(err, wire.ErrResourceNotFound) || !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("send to unknown topic: %v", err)
	}
	_, err = c.SendMessages(ctx, sID, tID, wire.ToPartition(0), []iggy.Message{{Payload: make([]byte, 1<<20)}})
	if !errors.Is(err, iggy.ErrTooLarge) || Retriable(err) {
		t.Fatalf("oversized message: %v", err)
	}
	_, err = c.SendMessages(ctx, sID, tID, wire.ToPartition(0), []iggy.Message{{}})
	if !errors.Is(err, wire.ErrPayloadSize) {
		t.Fatalf("empty payload: %v", err)
	}
	if _, err := c.CreateStream(ctx, ""); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("empty stream name: %v", err)
	}
	// The connection survived all of that.
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// Retriable is iggy.Retriable, short for the table above.
func Retriable(err error) bool { return iggy.Retriable(err) }

func TestLoginErrors(t *testing.T) {
	s := servertest.Start(t)
	ctx := testCtx(t)
	_, err := iggy.Dial(ctx, s.Addr(), iggy.WithCredentials("iggy", "wrong"), iggy.WithLogger(quietLogger()))
	if !errors.Is(err, wire.ErrInvalidCredentials) || iggy.Retriable(err) {
		t.Fatalf("wrong password: %v", err)
	}
	_, err = iggy.Dial(ctx, s.Addr(), iggy.WithToken("no-such-token"), iggy.WithLogger(quietLogger()))
	if !errors.Is(err, wire.ErrInvalidPAT) {
		t.Fatalf("bad token: %v", err)
	}
	_, err = iggy.Dial(ctx, s.Addr(), iggy.WithProtocolVersion(wire.PackVersion(0, 12, 0)), iggy.WithLogger(quietLogger()))
	if !errors.Is(err, wire.ErrIncompatibleProtocolVersion) {
		t.Fatalf("version mismatch: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "client speaks 0.12.0") || !strings.Contains(msg, "0.11.0") {
		t.Fatalf("version error does not name both versions: %v", err)
	}
	_, err = iggy.Dial(ctx, "127.0.0.1:1", iggy.WithLogger(quietLogger()))
	if !errors.Is(err, iggy.ErrNotConnected) {
		t.Fatalf("nothing listening: %v", err)
	}
	_, err = iggy.Dial(ctx, s.Addr(), iggy.WithPoolSize(0))
	if err == nil || !strings.Contains(err.Error(), "pool size") {
		t.Fatalf("bad option: %v", err)
	}
}

// fakeServer accepts connections and answers the login and the roster read after it (a
// one-node cluster), then lets reply craft the answer to every later request from its
// header. It is a faulty peer, not a mock: it checks the client copes with broken replies.
func fakeServer(t *testing.T, reply func(nc net.Conn, h wire.RequestHeader)) string {
	t.Helper()
	addr, _ := fakePeer(t, reply)
	return addr
}

// fakePeer is fakeServer that also counts the logins it answered.
func fakePeer(t *testing.T, reply func(nc net.Conn, h wire.RequestHeader)) (string, *atomic.Int32) {
	t.Helper()
	logins := new(atomic.Int32)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				for {
					hdr := make([]byte, wire.HeaderSize)
					if _, err := io.ReadFull(nc, hdr); err != nil {
						return
					}
					fi, _ := wire.ReadFrameInfo(hdr, 0)
					if _, err := io.CopyN(io.Discard, nc, int64(fi.BodyLen())); err != nil {
						return
					}
					h, _ := wire.DecodeRequestHeader(hdr)
					if h.Operation == wire.OpRegister {
						logins.Add(1)
						_, _ = nc.Write(wire.AppendOKReply(nil, h, wire.LoginReply{UserID: 0, Session: 1,
							ServerProtocolVersion: wire.ProtocolVersion, ServerVersion: "fake"}.Append(nil)))
						continue
					}
					if h.Operation == wire.OpNonReplicated && h.Code == wire.CodeGetClusterMetadata {
						// The roster read after every login: one node, so the client stays.
						_, _ = nc.Write(wire.AppendOKReply(nil, h, wire.ClusterMetadata{Name: "fake",
							Nodes: []wire.ClusterNode{{Name: "fake", IP: "127.0.0.1", Role: wire.NodeLeader}}}.Append(nil)))
						continue
					}
					reply(nc, h)
				}
			}()
		}
	}()
	return ln.Addr().String(), logins
}

func TestFaultyReplies(t *testing.T) {
	truncated := func(nc net.Conn, h wire.RequestHeader) {
		f := wire.AppendOKReply(nil, h, make([]byte, 100))
		_, _ = nc.Write(f[:wire.HeaderSize+10])
		_ = nc.Close()
	}
	badSize := func(nc net.Conn, h wire.RequestHeader) {
		f := wire.AppendOKReply(nil, h, nil)
		binary.LittleEndian.PutUint32(f[48:], 100) // < 256
		_, _ = nc.Write(f)
	}
	wrongRequest := func(nc net.Conn, h wire.RequestHeader) {
		h.Request += 7
		_, _ = nc.Write(wire.AppendOKReply(nil, h, nil))
	}
	corruptPayload := func(nc net.Conn, h wire.RequestHeader) {
		_, _ = nc.Write(wire.AppendOKReply(nil, h, []byte{1, 2, 3})) // not a StreamResponse list
	}
	stale := func(nc net.Conn, h wire.RequestHeader) {
		_, _ = nc.Write(wire.AppendEvictionHeader(nil, wire.EvictionHeader{Client: wire.Uint128{Lo: 1}, Reason: wire.EvictionStaleClient}))
	}
	silent := func(net.Conn, wire.RequestHeader) {}
	cases := []struct {
		name  string
		reply func(net.Conn, wire.RequestHeader)
		check func(error) bool
	}{
		{"truncated", truncated, func(err error) bool {
			return errors.Is(err, iggy.ErrOutcomeUnknown) && errors.Is(err, io.ErrUnexpectedEOF)
		}},
		{"bad size", badSize, func(err error) bool {
			return errors.Is(err, iggy.ErrOutcomeUnknown) && errors.Is(err, iggy.ErrProtocol) && errors.Is(err, wire.ErrFrameSize)
		}},
		{"wrong request number", wrongRequest, func(err error) bool {
			return errors.Is(err, iggy.ErrOutcomeUnknown) && errors.Is(err, iggy.ErrProtocol) && strings.Contains(err.Error(), "answers request 8 (CreateStream), sent 1 (CreateStream)")
		}},
		{"corrupt payload", corruptPayload, func(err error) bool {
			return errors.Is(err, iggy.ErrProtocol) && errors.Is(err, wire.ErrMalformed) && !errors.Is(err, iggy.ErrOutcomeUnknown)
		}},
		{"eviction", stale, func(err error) bool {
			return errors.Is(err, iggy.ErrOutcomeUnknown) && errors.Is(err, wire.ErrStaleClient) && iggy.Retriable(err)
		}},
		{"no reply", silent, func(err error) bool {
			return errors.Is(err, iggy.ErrOutcomeUnknown) && errors.Is(err, context.DeadlineExceeded) && iggy.Retriable(err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, tc.reply)
			c, err := iggy.Dial(testCtx(t), addr, iggy.WithPoolSize(1), iggy.WithLogger(quietLogger()),
				iggy.WithRequestTimeout(300*time.Millisecond), iggy.WithReconnect(time.Millisecond, time.Millisecond, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// CreateStream is not retried, so the first failure shows.
			_, err = c.CreateStream(testCtx(t), "x")
			t.Logf("%s: %v", tc.name, err)
			if err == nil || !tc.check(err) {
				t.Fatalf("create stream: %v", err)
			}
			if tc.name == "corrupt payload" {
				_, err = c.GetStreams(testCtx(t))
				if !tc.check(err) {
					t.Fatalf("get streams: %v", err)
				}
			}
		})
	}
}

// TestCancelInFlight: cancelling a call whose reply is outstanding returns at once
// with ErrOutcomeUnknown wrapping context.Canceled. The connection is no longer killed
// for it (a cancelled caller must not drop a healthy connection, which for a group
// member is its membership): it keeps waiting for the owed reply, up to the request
// timeout (TestCancelledCallKeepsConnection). Close still ends it at once.
func TestCancelInFlight(t *testing.T) {
	addr := fakeServer(t, func(net.Conn, wire.RequestHeader) {}) // never answers
	c, err := iggy.Dial(testCtx(t), addr, iggy.WithPoolSize(1), iggy.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = c.CreateStream(ctx, "x")
	if !errors.Is(err, iggy.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) || iggy.Retriable(err) {
		t.Fatalf("cancelled: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
	// The owed reply would be awaited for 30 s; Close does not wait for it.
	start = time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("close with a reply owed took %v", d)
	}
}
