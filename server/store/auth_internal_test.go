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
