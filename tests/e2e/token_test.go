package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/testkit"
)

// tokenConfig writes a config.toml that logs in with token only (no username or
// password, so nothing else could log it in) against addr, HTTP API off.
func tokenConfig(t *testing.T, dir, addr, token, connectorsDir string) string {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	writeFile(t, path, fmt.Sprintf(`[iggy]
address = %q
token = %q

[state]
path = %q

[connectors]
config_type = "local"
config_dir = %q

[http]
enabled = false
`, addr, token, filepath.Join(dir, "state"), connectorsDir))
	return path
}

// TestRunWithPersonalAccessToken: `ferry run` with [iggy] token = "<token>" and with
// token = "file:<path>" logs in to `ferry server` with personal access tokens created by
// the Go client, and its source sends every message; once the token is deleted, a run
// with it is refused at login with InvalidPersonalAccessToken (53).
func TestRunWithPersonalAccessToken(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startFerry(t, "server", dir, nil, "server", "--addr", addr, "--data", filepath.Join(dir, "data"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var admin *iggy.Client
	testkit.WaitFor(t, "ferry server accepting logins", func() bool {
		c, err := iggy.Dial(ctx, addr, iggy.WithCredentials("iggy", "iggy"), iggy.WithReconnect(10*time.Millisecond, 10*time.Millisecond, 1))
		admin = c
		return err == nil
	})
	defer admin.Close()
	inline, err := admin.CreatePersonalAccessToken(ctx, "inline", 0)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := admin.CreatePersonalAccessToken(ctx, "from-file", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, fromFile+"\n")

	const count = 40
	for _, tc := range []struct{ name, token, stream string }{
		{"inline", inline, "pat-inline"},
		{"file", "file:" + tokenFile, "pat-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdir := filepath.Join(dir, tc.name)
			conns := filepath.Join(rdir, "connectors")
			writeFile(t, filepath.Join(conns, "source.toml"), randomSource(tc.stream, "t", count, 10000, 10))
			p := startFerry(t, "run "+tc.name, rdir, nil, "run", "--config", tokenConfig(t, rdir, addr, tc.token, conns),
				"--create-topics", "--partitions", "1", "--progress", "0", "--exit-when-idle", "500ms")
			p.wait(30 * time.Second)
			td, err := admin.GetTopic(ctx, iggy.Name(tc.stream), iggy.Name("t"))
			if err != nil || td.MessagesCount != count {
				t.Fatalf("topic %s/t after the run: %d messages, %v; want %d", tc.stream, td.MessagesCount, err, count)
			}
		})
	}

	if err := admin.DeletePersonalAccessToken(ctx, "inline"); err != nil {
		t.Fatal(err)
	}
	rdir := filepath.Join(dir, "deleted")
	conns := filepath.Join(rdir, "connectors")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("pat-deleted", "t", count, 10000, 10))
	cmd := exec.Command(ferryBin, "run", "--config", tokenConfig(t, rdir, addr, inline, conns), "--create-topics", "--progress", "0")
	cmd.Dir = rdir
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := "ferry: connect to Iggy at " + addr + " (within --connect-timeout 30s, 1 attempts): iggy: connect " + addr +
		`: login as "<token>": iggy: evicted (InvalidToken): iggy: InvalidPersonalAccessToken (53)`
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || lines[len(lines)-1] != want || strings.Contains(string(out), inline) {
		t.Fatalf("run with a deleted token: %v\n%s", err, out)
	}
}
