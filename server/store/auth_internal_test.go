package store

import (
	"errors"
	"testing"
)

// TestUnknownUserCostsAHash: an unknown user name goes through the same key
// derivation as a wrong password, so user names cannot be told apart by timing
// (issue 14: 81 ms vs 0.09 ms).
func TestUnknownUserCostsAHash(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), PasswordIterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, _, err := s.EnsureRoot("root", "secret"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ user, pass string }{{"root", "wrong"}, {"nobody", "wrong"}, {"nobody", "again"}} {
		before := passwordChecks.Load()
		_, err := s.Authenticate(tc.user, tc.pass)
		if !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("%s: %v", tc.user, err)
		}
		if n := passwordChecks.Load() - before; n != 1 {
			t.Fatalf("%s: %d key derivations, want 1", tc.user, n)
		}
	}
}

// TestRepeatedLoginCostsOneDerivation: the first right password costs a key derivation, the
// same one again none; a wrong password always costs one (also after a match), and a
// changed password refuses the old one and derives for the new one once.
func TestRepeatedLoginCostsOneDerivation(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), PasswordIterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	root, _, err := s.EnsureRoot("root", "secret")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		pass        string
		ok          bool
		derivations int64
		change      string // the password set after this login
	}{
		{"secret", true, 1, ""},
		{"secret", true, 0, ""},
		{"secret", true, 0, ""},
		{"wrong", false, 1, ""},
		{"secret", true, 0, "newer"},
		{"secret", false, 1, ""},
		{"newer", true, 1, ""},
		{"newer", true, 0, ""},
	} {
		before := passwordChecks.Load()
		_, err := s.Authenticate("root", tc.pass)
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrInvalidCredentials)) {
			t.Fatalf("login %d with %q: %v", i, tc.pass, err)
		}
		if n := passwordChecks.Load() - before; n != tc.derivations {
			t.Fatalf("login %d with %q: %d key derivations, want %d", i, tc.pass, n, tc.derivations)
		}
		if tc.change != "" {
			if err := s.ChangePassword(root.ID, tc.change); err != nil {
				t.Fatal(err)
			}
		}
	}
}
