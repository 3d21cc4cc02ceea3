package iggy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	iggyclient "github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/server/servertest"
)

// preflight runs the source's Preflight on cfg: its errors one per line, "" for none.
func preflight(t *testing.T, r *remote, cfg map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	errs := New().Preflight(r.Ctx(), raw)
	if len(errs) == 0 {
		return ""
	}
	return errors.Join(errs...).Error()
}

// TestPreflight: against the embedded server over TCP, the remote topic passes (and no
// consumer group is made); a missing stream, a missing topic, a wrong password and an
// address nothing answers on each name the key and the fix, never the password.
func TestPreflight(t *testing.T) {
	r := startRemote(t, 2)
	if got := preflight(t, r, r.config(nil)); got != "" {
		t.Fatalf("the remote topic: %s", got)
	}
	if groups, err := r.Admin.GetConsumerGroups(r.Ctx(), iggyclient.Name("origin"), iggyclient.Name("events")); err != nil || len(groups) != 0 {
		t.Errorf("the check made consumer groups %v (%v)", groups, err)
	}
	got := preflight(t, r, r.config(map[string]any{"stream": "nowhere"}))
	want := fmt.Sprintf(`plugin_config.stream: the remote Iggy server at %s has no stream "nowhere": create it there, or name an existing one`, r.Addr)
	if got != want {
		t.Errorf("missing stream:\n got %s\nwant %s", got, want)
	}
	got = preflight(t, r, r.config(map[string]any{"topic": "nothing"}))
	want = fmt.Sprintf(`plugin_config.topic: the remote Iggy server at %s (stream "origin") has no topic "nothing": create it there, or name an existing one`, r.Addr)
	if got != want {
		t.Errorf("missing topic:\n got %s\nwant %s", got, want)
	}
	bad := "wrong-" + servertest.Password
	got = preflight(t, r, r.config(map[string]any{"password": bad}))
	want = fmt.Sprintf(`plugin_config.username, password: the remote Iggy server at %[1]s refused the login as user %[2]s: iggy: connect %[1]s: login as "%[2]s": iggy: evicted (InvalidCredentials): iggy: InvalidCredentials (42): fix them, or give that user access on the remote`,
		r.Addr, servertest.Username)
	if got != want || strings.Contains(got, bad) {
		t.Errorf("wrong password:\n got %s\nwant %s", got, want)
	}
	got = preflight(t, r, r.config(map[string]any{"token": "not-a-token-secret"}))
	want = fmt.Sprintf(`plugin_config.token: the remote Iggy server at %[1]s refused the login as a personal access token: iggy: connect %[1]s: login as "<token>": iggy: evicted (InvalidToken): iggy: InvalidPersonalAccessToken (53): make a new token on the remote and set token to it (the value, or file:<path>)`, r.Addr)
	if got != want {
		t.Errorf("wrong token:\n got %s\nwant %s", got, want)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	got = preflight(t, r, r.config(map[string]any{"address": nil, "addresses": []string{dead}}))
	want = fmt.Sprintf("plugin_config.addresses: cannot reach the remote Iggy server at %[1]s: iggy: connect %[1]s: not connected: dial %[1]s: dial tcp %[1]s: connect: connection refused: check the address and that the server runs (with tls_enabled when it serves TLS)", dead)
	if got != want {
		t.Errorf("nothing listening:\n got %s\nwant %s", got, want)
	}
}
