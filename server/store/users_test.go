package store

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestUsersAndRoot(t *testing.T) {
	s := openMem(t)
	root, created, err := s.EnsureRoot("iggy", "iggy")
	check(t, err)
	if !created || root.ID != 0 || root.Username != "iggy" {
		t.Fatalf("EnsureRoot = %+v created=%v", root, created)
	}
	if _, created, _ := s.EnsureRoot("other", "pw"); created {
		t.Fatal("second EnsureRoot created a user")
	}
	wantErr(t, second(s.Authenticate("other", "pw")), ErrInvalidCredentials)
	if u := must[User](t)(s.Authenticate("iggy", "iggy")); u.ID != 0 {
		t.Fatalf("Authenticate = %+v", u)
	}
	wantErr(t, second(s.Authenticate("iggy", "wrong")), ErrInvalidCredentials)
	a := must[User](t)(s.CreateUser("alice", "a", 1, []byte{1}))
	b := must[User](t)(s.CreateUser("bob", "b", 2, nil))
	if a.ID != 1 || b.ID != 2 {
		t.Fatalf("user ids %d %d", a.ID, b.ID)
	}
	wantErr(t, second(s.CreateUser("alice", "x", 1, nil)), ErrUserExists)
	check(t, s.DeleteUser(a.ID))
	wantErr(t, s.DeleteUser(a.ID), ErrUserNotFound)
	if c := must[User](t)(s.CreateUser("carol", "c", 1, nil)); c.ID != 1 {
		t.Fatalf("user id after delete %d, want 1", c.ID)
	}
	check(t, s.ChangePassword(b.ID, "b2"))
	wantErr(t, second(s.Authenticate("bob", "b")), ErrInvalidCredentials)
	must[User](t)(s.Authenticate("bob", "b2"))
	if u := must[User](t)(s.UserByName("bob")); u.Status != 2 {
		t.Fatalf("UserByName = %+v", u)
	}
	if us := must[[]User](t)(s.Users()); len(us) != 3 || us[1].Username != "carol" {
		t.Fatalf("Users = %+v", us)
	}
}

func TestPasswordHashFormat(t *testing.T) {
	h, err := hashPassword("secret", 1000)
	check(t, err)
	if !strings.HasPrefix(h, "pbkdf2-sha256$1000$") || !checkPassword(h, "secret") || checkPassword(h, "Secret") {
		t.Fatalf("hash %q", h)
	}
	h2, _ := hashPassword("secret", 1000)
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt missing")
	}
	for _, bad := range []string{"", "x$1$a$b", "pbkdf2-sha256$0$AA$AA", "pbkdf2-sha256$1$!$AA"} {
		if checkPassword(bad, "secret") {
			t.Fatalf("malformed hash %q accepted", bad)
		}
	}
}

func TestTokens(t *testing.T) {
	s := openMem(t)
	root, _, err := s.EnsureRoot("iggy", "iggy")
	check(t, err)
	tok, pat, err := s.CreateToken(root.ID, "ci", 1000)
	check(t, err)
	if len(tok) != 68 || pat.Name != "ci" || pat.ExpiresAt != 1000 {
		t.Fatalf("CreateToken = %q %+v", tok, pat)
	}
	if u := must[User](t)(s.AuthenticateToken(tok, 999)); u.ID != root.ID {
		t.Fatalf("AuthenticateToken = %+v", u)
	}
	wantErr(t, second(s.AuthenticateToken(tok, 1000)), ErrInvalidToken)
	wantErr(t, second(s.AuthenticateToken("nope", 0)), ErrInvalidToken)
	_, _, err = s.CreateToken(root.ID, "ci", 0)
	wantErr(t, err, ErrTokenExists)
	_, _, err = s.CreateToken(9, "ci", 0)
	wantErr(t, err, ErrUserNotFound)
	for i := 1; i < MaxTokensPerUser; i++ {
		_, _, err := s.CreateToken(root.ID, "t"+strings.Repeat("x", i), 0)
		check(t, err)
	}
	_, _, err = s.CreateToken(root.ID, "ci", 0) // limit is checked before the name
	wantErr(t, err, ErrTokenLimit)
	check(t, s.DeleteToken(root.ID, "ci"))
	wantErr(t, s.DeleteToken(root.ID, "ci"), ErrTokenNotFound)
	wantErr(t, second(s.AuthenticateToken(tok, 0)), ErrInvalidToken)
	if ts := must[[]PersonalAccessToken](t)(s.Tokens(root.ID)); len(ts) != MaxTokensPerUser-1 || ts[0].Name != "tx" {
		t.Fatalf("Tokens: %d, first %+v", len(ts), ts[0])
	}
}

// TestDeleteExpiredTokens: only tokens expired at now go (ExpiresAt ≤ now; 0 = never),
// the deletion is durable, and the name can be used again.
func TestDeleteExpiredTokens(t *testing.T) {
	o := testOpts("db", vfs.NewMem())
	s := mustOpen(t, o)
	root, _, err := s.EnsureRoot("iggy", "iggy")
	check(t, err)
	for name, exp := range map[string]uint64{"never": 0, "early": 1000, "late": 2000} {
		_, _, err := s.CreateToken(root.ID, name, exp)
		check(t, err)
	}
	if n := must[int](t)(s.DeleteExpiredTokens(root.ID, 999)); n != 0 {
		t.Fatalf("deleted %d at 999", n)
	}
	if n := must[int](t)(s.DeleteExpiredTokens(root.ID, 1000)); n != 1 {
		t.Fatalf("deleted %d at 1000, want 1", n)
	}
	ts := must[[]PersonalAccessToken](t)(s.Tokens(root.ID))
	if len(ts) != 2 || ts[0].Name != "late" || ts[1].Name != "never" {
		t.Fatalf("Tokens after: %+v", ts)
	}
	check(t, s.Close())
	s = mustOpen(t, o)
	if ts := must[[]PersonalAccessToken](t)(s.Tokens(root.ID)); len(ts) != 2 || ts[0].Name != "late" || ts[1].Name != "never" {
		t.Fatalf("Tokens after reopening: %+v", ts)
	}
	_, _, err = s.CreateToken(root.ID, "early", 0)
	check(t, err)
	_, err = s.DeleteExpiredTokens(7, 0)
	wantErr(t, err, ErrUserNotFound)
}
