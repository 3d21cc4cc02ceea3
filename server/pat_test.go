package server_test

import (
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

// TestPATReplayAndExpiry: a replayed CreatePersonalAccessToken (same request number) is
// refused with R:51 instead of resending the raw token, which is never kept; a token's
// expiry (a duration from creation) ends PAT logins with Eviction 10, after which the
// token is not listed and its name is free; the list shows the absolute expiry.
func TestPATReplayAndExpiry(t *testing.T) {
	s := servertest.Start(t)
	a := login(t, s)

	body := wire.CreatePATRequest{Name: "once", Expiry: 0}.Append(nil)
	h := a.header(wire.CodeCreatePAT)
	_, p, err := a.roundTrip(h, body)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wire.DecodeRawToken(p)
	if err != nil || len(tok.Token) != 68 {
		t.Fatalf("token %q: %v", tok.Token, err)
	}
	hdr, rbody, err := a.rawRoundTrip(append(wire.AppendRequestHeader(nil, h, len(body)), body...))
	if err != nil {
		t.Fatal(err)
	}
	if string(rbody) != "\x01\x00\x00\x00\x00\x00\x00\x00\x33\x00\x00\x00" || hdr[208] != byte(wire.OpCreatePAT) {
		t.Fatalf("replayed create: op %d body %x, want R:51", hdr[208], rbody)
	}

	const ttl = 300 * time.Millisecond
	before := uint64(time.Now().UnixMicro())
	p = a.must(wire.CreatePATRequest{Name: "short", Expiry: uint64(ttl / time.Microsecond)})
	short, err := wire.DecodeRawToken(p)
	if err != nil {
		t.Fatal(err)
	}
	pats, err := wire.DecodePATs(a.must(wire.GetPATsRequest{}))
	if err != nil || len(pats) != 2 || pats[0].Name != "once" || pats[0].ExpiryAt != 0 || pats[1].Name != "short" ||
		pats[1].ExpiryAt < before+uint64(ttl/time.Microsecond) || pats[1].ExpiryAt > uint64(time.Now().UnixMicro())+uint64(ttl/time.Microsecond) {
		t.Fatalf("pats %+v %v", pats, err)
	}
	patLogin := func(token string) error {
		_, err := dial(t, s).loginRaw(wire.LoginPATRequest{Client: vinfo(wire.ProtocolVersion), TokenCredentials: wire.TokenCredentials{Token: token}}.Append(nil))
		return err
	}
	if err := patLogin(short.Token); err != nil {
		t.Fatalf("login before expiry: %v", err)
	}
	expiry := time.UnixMicro(int64(pats[1].ExpiryAt))
	testkit.WaitFor(t, "the clock to pass the token's expiry", func() bool { return time.Now().After(expiry) })
	if err := patLogin(short.Token); evictionReason(err) != wire.EvictionInvalidToken {
		t.Fatalf("login after expiry: %v, want Eviction 10", err)
	}
	if err := patLogin(tok.Token); err != nil {
		t.Fatalf("login with the other token: %v", err)
	}
	// An expired token is no longer listed, and its name is free again.
	pats, err = wire.DecodePATs(a.must(wire.GetPATsRequest{}))
	if err != nil || len(pats) != 1 || pats[0].Name != "once" {
		t.Fatalf("pats after expiry %+v %v", pats, err)
	}
	if _, err := wire.DecodeRawToken(a.must(wire.CreatePATRequest{Name: "short"})); err != nil {
		t.Fatalf("name of an expired token: %v", err)
	}
}
