package iggy_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

// TestPersonalAccessTokens runs the PAT life cycle against the embedded server over TCP:
// create (the raw token is returned once), log in with it, a command works, list (names
// and expiry only), duplicate name refused, delete, and a new login with it refused with
// InvalidPersonalAccessToken (Eviction 10 → 53).
func TestPersonalAccessTokens(t *testing.T) {
	s := servertest.Start(t)
	ctx := testCtx(t)
	admin := dial(t, s)
	token, err := admin.CreatePersonalAccessToken(ctx, "ci", 0)
	if err != nil || len(token) != 68 {
		t.Fatalf("create token = %q, %v", token, err)
	}
	_, err = admin.CreatePersonalAccessToken(ctx, "ci", time.Hour)
	if !errors.Is(err, wire.ErrPATAlreadyExists) || err.Error() != `iggy: create personal access token token "ci": PersonalAccessTokenAlreadyExists (51)` {
		t.Fatalf("duplicate name: %v", err)
	}

	pc := dial(t, s, iggy.WithToken(token))
	if _, err := pc.CreateStream(ctx, "by-token"); err != nil {
		t.Fatalf("command with a token login: %v", err)
	}
	if me, err := pc.GetMe(ctx); err != nil || me.UserID != 0 {
		t.Fatalf("get me: %+v, %v", me, err)
	}
	streams, err := admin.GetStreams(ctx)
	if err != nil || len(streams) != 1 || streams[0].Name != "by-token" {
		t.Fatalf("streams %+v, %v", streams, err)
	}
	pats, err := pc.PersonalAccessTokens(ctx)
	if err != nil || !reflect.DeepEqual(pats, []wire.PATInfo{{Name: "ci", ExpiryAt: 0}}) {
		t.Fatalf("list = %+v, %v", pats, err)
	}

	if err := admin.DeletePersonalAccessToken(ctx, "ci"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	err = admin.DeletePersonalAccessToken(ctx, "ci")
	if !errors.Is(err, wire.ErrResourceNotFound) || err.Error() != `iggy: delete personal access token token "ci": ResourceNotFound (20)` {
		t.Fatalf("delete again: %v", err)
	}
	if pats, err := admin.PersonalAccessTokens(ctx); err != nil || len(pats) != 0 {
		t.Fatalf("list after delete = %+v, %v", pats, err)
	}
	_, err = iggy.Dial(ctx, s.Addr(), iggy.WithToken(token), iggy.WithLogger(quietLogger()))
	want := "iggy: connect " + s.Addr() + `: login as "<token>": iggy: evicted (InvalidToken): iggy: InvalidPersonalAccessToken (53)`
	if !errors.Is(err, wire.ErrInvalidPAT) || err.Error() != want {
		t.Fatalf("login with a deleted token: %v", err)
	}
}
