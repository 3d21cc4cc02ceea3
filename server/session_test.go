package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
	"github.com/ferryio/ferry/server/store"
)

func TestLoginVariants(t *testing.T) {
	s := servertest.Start(t)

	a := dial(t, s)
	if _, err := a.call(wire.PingRequest{}); err != nil {
		t.Fatalf("ping before login: %v", err)
	}
	la, err := a.login("iggy", "iggy")
	if err != nil {
		t.Fatal(err)
	}
	if la.UserID != 0 || la.ServerProtocolVersion != wire.ProtocolVersion || la.ServerVersion != wire.ServerVersion {
		t.Fatalf("login reply %+v", la)
	}
	// A second login on the same connection replays the bound session.
	again, err := a.login("iggy", "iggy")
	if err != nil || again.Session != la.Session {
		t.Fatalf("re-login: %+v %v, want session %d", again, err, la.Session)
	}
	b := login(t, s)
	if b.session <= la.Session {
		t.Fatalf("session ids not increasing: %d then %d", la.Session, b.session)
	}
	// GetClusterMetadata answers (single node), as the SDKs expect after login.
	a.must(wire.GetClusterMetadataRequest{})

	cases := []struct {
		name   string
		body   []byte
		reason wire.EvictionReason
	}{
		{"bad password", wire.LoginPasswordRequest{Client: vinfo(wire.ProtocolVersion), PasswordCredentials: wire.PasswordCredentials{Username: "iggy", Password: "nope!"}}.Append(nil), wire.EvictionInvalidCredentials},
		{"unknown user", wire.LoginPasswordRequest{Client: vinfo(wire.ProtocolVersion), PasswordCredentials: wire.PasswordCredentials{Username: "nobody", Password: "iggy"}}.Append(nil), wire.EvictionInvalidCredentials},
		{"short password", wire.LoginPasswordRequest{Client: vinfo(wire.ProtocolVersion), PasswordCredentials: wire.PasswordCredentials{Username: "iggy", Password: "ig"}}.Append(nil), wire.EvictionInvalidCredentials},
		{"old protocol", wire.LoginPasswordRequest{Client: vinfo(wire.PackVersion(0, 10, 0)), PasswordCredentials: wire.PasswordCredentials{Username: "iggy", Password: "iggy"}}.Append(nil), wire.EvictionIncompatibleProtocol},
		{"newer minor", wire.LoginPasswordRequest{Client: vinfo(wire.PackVersion(0, 12, 0)), PasswordCredentials: wire.PasswordCredentials{Username: "iggy", Password: "iggy"}}.Append(nil), wire.EvictionIncompatibleProtocol},
		{"no version prefix", []byte{1, 2}, wire.EvictionMalformedLogin},
		{"bad token", wire.LoginPATRequest{Client: vinfo(wire.ProtocolVersion), TokenCredentials: wire.TokenCredentials{Token: "not-a-token"}}.Append(nil), wire.EvictionInvalidToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			_, err := c.loginRaw(tc.body)
			if got := evictionReason(err); got != tc.reason {
				t.Fatalf("got %v (%v), want eviction %v", got, err, tc.reason)
			}
			if tc.reason == wire.EvictionIncompatibleProtocol {
				var ev *wire.EvictionError
				if !errors.As(err, &ev) || ev.ServerMax != wire.ProtocolVersion || ev.ServerMin != wire.ProtocolVersion {
					t.Fatalf("version window %+v", ev)
				}
			}
			// The socket stays usable: Ping still works, reads still need a login.
			c.must(wire.PingRequest{})
			c.wantErr(wire.GetStreamsRequest{}, wire.ErrUnauthenticated)
		})
	}

	// PAT: create, log in with it, list, delete; a deleted token is refused.
	raw := a.must(wire.CreatePATRequest{Name: "ci", Expiry: 0})
	tok, err := wire.DecodeRawToken(raw)
	if err != nil || len(tok.Token) == 0 {
		t.Fatalf("token %v %v", tok, err)
	}
	a.wantErr(wire.CreatePATRequest{Name: "ci"}, wire.ErrPATAlreadyExists)
	p := dial(t, s)
	if _, err := p.loginRaw(wire.LoginPATRequest{Client: vinfo(wire.ProtocolVersion), TokenCredentials: wire.TokenCredentials{Token: tok.Token}}.Append(nil)); err != nil {
		t.Fatalf("PAT login: %v", err)
	}
	pats, err := wire.DecodePATs(p.must(wire.GetPATsRequest{}))
	if err != nil || len(pats) != 1 || pats[0].Name != "ci" || pats[0].ExpiryAt != 0 {
		t.Fatalf("pats %+v %v", pats, err)
	}
	a.must(wire.DeletePATRequest{Name: "ci"})
	a.wantErr(wire.DeletePATRequest{Name: "ci"}, wire.ErrResourceNotFound)
	q := dial(t, s)
	if _, err := q.loginRaw(wire.LoginPATRequest{Client: vinfo(wire.ProtocolVersion), TokenCredentials: wire.TokenCredentials{Token: tok.Token}}.Append(nil)); evictionReason(err) != wire.EvictionInvalidToken {
		t.Fatalf("deleted token login: %v", err)
	}

	// GetMe.
	me, err := wire.DecodeClientDetails(a.must(wire.GetMeRequest{}))
	if err != nil || me.UserID != 0 || me.Transport != wire.TransportTCP || me.ClientID == 0 {
		t.Fatalf("me %+v %v", me, err)
	}

	// Logout ends the session: reads need a login again, replicated ops are evicted.
	a.must(wire.LogoutRequest{})
	a.wantErr(wire.GetStreamsRequest{}, wire.ErrUnauthenticated)
	if _, err := a.call(wire.CreateStreamRequest{Name: "x"}); evictionReason(err) != wire.EvictionNoSession {
		t.Fatalf("create after logout: %v", err)
	}
}

func vinfo(v uint32) wire.ClientVersionInfo {
	return wire.ClientVersionInfo{ProtocolVersion: v, SDKName: "t", SDKVersion: "1"}
}

func TestUnauthenticatedAndCommandRouting(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	c.session = 1 // the wire value is not trusted; the connection has no session
	for _, r := range []wire.Request{wire.GetStreamsRequest{}, wire.GetMeRequest{}, wire.GetStatsRequest{},
		wire.PollMessagesRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(1)}, Stream: wire.NumericID(0), Topic: wire.NumericID(0), Count: 1},
		wire.SyncConsumerGroupRequest{Stream: wire.NumericID(0), Topic: wire.NumericID(0), Group: wire.NumericID(0)},
		wire.GetClusterMetadataRequest{}} {
		c.wantErr(r, wire.ErrUnauthenticated)
	}
	for _, r := range []wire.Request{wire.CreateStreamRequest{Name: "x"},
		wire.SendMessagesRequest{Stream: wire.NumericID(0), Topic: wire.NumericID(0), Partitioning: wire.Balanced()},
		wire.StoreConsumerOffsetRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(1)}, Stream: wire.NumericID(0), Topic: wire.NumericID(0)}} {
		if _, err := c.call(r); evictionReason(err) != wire.EvictionNoSession {
			t.Fatalf("%v before login: %v, want eviction 1", r.Code(), err)
		}
	}
	// Legacy login codes are evicted with MalformedLogin, before or after login.
	h := c.header(wire.CodePing)
	h.Code = wire.CodeLoginUser
	if _, _, err := c.roundTrip(h, nil); evictionReason(err) != wire.EvictionMalformedLogin {
		t.Fatalf("code 38: %v", err)
	}
	if _, err := c.login("iggy", "iggy"); err != nil {
		t.Fatal(err)
	}
	h = c.header(wire.CodePing)
	h.Code = wire.CodeLoginWithPAT
	if _, _, err := c.roundTrip(h, nil); evictionReason(err) != wire.EvictionMalformedLogin {
		t.Fatalf("code 44: %v", err)
	}
	h.Code = 9999
	if _, _, err := c.roundTrip(h, nil); !errors.Is(err, wire.ErrInvalidCommand) {
		t.Fatalf("unknown code: %v", err)
	}
	h.Code = wire.CodeCreateStream // replicated code sent as op 2
	if _, _, err := c.roundTrip(h, nil); !errors.Is(err, wire.ErrFeatureUnavailable) {
		t.Fatalf("replicated as op 2: %v", err)
	}
	h.Code = wire.CodeLogoutUser // known, served by the generic empty-ok path
	if _, _, err := c.roundTrip(h, nil); err != nil {
		t.Fatalf("code 39 as op 2: %v", err)
	}
	// A stamped request checksum is verified.
	body := wire.CreateStreamRequest{Name: "sum"}.Append(nil)
	h = c.header(wire.CodeCreateStream)
	h.RequestChecksum = wire.Uint128{Lo: 12345}
	if _, _, err := c.roundTrip(h, body); !errors.Is(err, wire.ErrInvalidFormat) {
		t.Fatalf("bad checksum: %v", err)
	}
	h = c.header(wire.CodeCreateStream)
	h.RequestChecksum = wire.RequestChecksum(body)
	if _, _, err := c.roundTrip(h, body); err != nil {
		t.Fatalf("good checksum: %v", err)
	}
	st, err := wire.DecodeStats(c.must(wire.GetStatsRequest{}))
	if err != nil || st.StreamsCount != 1 || st.ServerVersion != wire.ServerVersion || st.ClientsCount != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

func TestReplyCache(t *testing.T) {
	s := servertest.Start(t)
	c := login(t, s)
	body := wire.CreateStreamRequest{Name: "s"}.Append(nil)
	h := c.header(wire.CodeCreateStream)
	frame := append(wire.AppendRequestHeader(nil, h, len(body)), body...)
	hdr1, body1, err := c.rawRoundTrip(frame)
	if err != nil {
		t.Fatal(err)
	}
	// Same request number: the cached reply, byte for byte, not a duplicate-name error.
	hdr2, body2, err := c.rawRoundTrip(frame)
	if err != nil || string(hdr1) != string(hdr2) || string(body1) != string(body2) {
		t.Fatalf("replay differs: %v", err)
	}
	for i := range 6 {
		c.must(wire.CreateStreamRequest{Name: "x" + strings.Repeat("y", i+1)})
	}
	// Aged out of the 5-entry cache: RequestAlreadyApplied.
	_, _, err = c.roundTrip(h, body)
	if !errors.Is(err, wire.ErrRequestAlreadyApplied) {
		t.Fatalf("old request: %v", err)
	}
	streams, _ := wire.DecodeStreams(c.must(wire.GetStreamsRequest{}))
	if len(streams) != 7 {
		t.Fatalf("%d streams, want 7", len(streams))
	}
}

func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"no data dir", server.Config{}, "DataDir"},
		{"public default creds", server.Config{DataDir: "x", Addr: "0.0.0.0:8090"}, "loopback"},
		{"half creds off loopback", server.Config{DataDir: "x", Addr: "0.0.0.0:0", RootUsername: "admin"}, "loopback"},
		{"default password off loopback", server.Config{DataDir: "x", Addr: "[::]:0", RootUsername: "admin", RootPassword: "iggy"}, "must not be the default"},
		{"empty host is every interface", server.Config{DataDir: "x", Addr: ":0"}, "loopback"},
		{"bad fsync", server.Config{DataDir: "x", Fsync: "sometimes"}, "Fsync"},
	}
	for _, tc := range cases {
		_, err := server.New(tc.cfg)
		if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrConfig mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := server.New(server.Config{DataDir: "x", Addr: "0.0.0.0:0", RootUsername: "admin", RootPassword: "secret"}); err != nil {
		t.Errorf("explicit creds on a public address: %v", err)
	}
	var nilServer *server.Server
	if err := nilServer.Close(context.Background()); err != nil {
		t.Errorf("nil Close: %v", err)
	}
}

func TestDataDirLockedAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := servertest.Start(t, servertest.WithDataDir(dir))
	second, err := server.New(server.Config{Addr: "127.0.0.1:0", DataDir: dir, PasswordIterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(context.Background()); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second server on the same dir: %v, want ErrLocked", err)
	}
	closeServer(t, second)

	c := login(t, s)
	st, tp := setup(t, c, 2)
	c.send(st, tp, wire.ToPartition(1), "a", "b", "c")
	c.must(wire.StoreConsumerOffsetRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(7)}, Stream: st, Topic: tp, Partition: wire.PartitionID(1), Offset: 1})
	c.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"})
	closeServer(t, s)
	closeServer(t, s) // idempotent

	s2 := servertest.Start(t, servertest.WithDataDir(dir))
	c2 := login(t, s2)
	got := c2.poll(wire.PollMessagesRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(7)}, Stream: st, Topic: tp, Partition: wire.PartitionID(1), Strategy: wire.PollNext(), Count: 10})
	if strings.Join(got.payloads, ",") != "c" || got.offsets[0] != 2 || got.head.CurrentOffset != 2 {
		t.Fatalf("after restart: %+v", got)
	}
	g, found, err := wire.DecodeGroupDetails(c2.must(wire.GetConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")}))
	if err != nil || !found || g.ID != 0 || g.PartitionsCount != 2 || g.MembersCount != 0 {
		t.Fatalf("group after restart %+v %v %v", g, found, err)
	}
	// New offsets continue after the recovered ones.
	if off := c2.send(st, tp, wire.ToPartition(1), "d"); off != 3 {
		t.Fatalf("offset after restart %d, want 3", off)
	}
}
