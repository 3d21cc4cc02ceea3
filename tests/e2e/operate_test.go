package e2e

import (
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// freeAddr returns a loopback address nothing listens on (it was free a moment ago).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// exitCode is the process's exit status (-1 when it did not exit normally).
func (p *proc) exitCode() int {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err == nil {
		return 0
	}
	return -1
}

// TestSecondSignalExitsAtOnce: a sink stuck in a native consume with shutdown_timeout
// = 60s holds the graceful stop; the second SIGTERM ends the process at once with
// status 130 (the first one alone would wait the whole minute).
func TestSecondSignalExitsAtOnce(t *testing.T) {
	p, firstSignal := stuckInGracefulStop(t, "2m")
	// The same signal within a second is the same stop request (timeout(1) and a process
	// group deliver it twice); a second one after that is an operator who insists.
	testkit.WaitFor(t, "1.2 s since the first signal", func() bool { return time.Since(firstSignal) > 1200*time.Millisecond })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantExitAtOnce(t, p, "terminated")
}

// TestConnectWaitsForServer: `ferry run` started before its Iggy server retries the
// connection within --connect-timeout and runs once the server is up; with nothing
// listening it gives up after --connect-timeout, naming the address.
func TestConnectWaitsForServer(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	addr := freeAddr(t)
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", 100, 0, 50))
	cfg := remoteConfig(t, dir, addr, conns)
	p := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--create-topics", "--progress", "0",
		"--connect-timeout", "60s", "--exit-when-idle", "500ms")
	testkit.WaitFor(t, "a connection retry", func() bool {
		if p.exited() {
			t.Fatalf("run exited before the server was up: %v", p.err)
		}
		return strings.Contains(p.out.String(), "Iggy not reachable yet; retrying")
	})
	startFerry(t, "server", dir, nil, "server", "--addr", addr, "--data", filepath.Join(dir, "data"))
	p.wait(30 * time.Second)
	if !strings.Contains(p.out.String(), "stopped  produced=100 sent=100 acked=100") {
		t.Fatalf("final status missing: %s", tail(p.out.String(), 10))
	}

	start := time.Now()
	q := startFerry(t, "run2", dir, nil, "run", "--config", remoteConfig(t, t.TempDir(), freeAddr(t), conns),
		"--progress", "0", "--connect-timeout", "1s")
	select {
	case <-q.done:
	case <-time.After(30 * time.Second):
		t.Fatal("run with nothing listening did not give up")
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("gave up after %v, before --connect-timeout 1s", took)
	}
	if q.exitCode() != 1 || !strings.Contains(q.out.String(), "within --connect-timeout 1s") {
		t.Fatalf("exit %d, output %s", q.exitCode(), tail(q.out.String(), 5))
	}
}

// TestAllFailedExitsNonZero: when every enabled connector has failed for good (here a
// sink whose plugin does not exist, restarted twice), the process exits with status 1
// by itself, so a service manager restarts it.
func TestAllFailedExitsNonZero(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	writeFile(t, filepath.Join(conns, "sink.toml"), `type = "sink"
key = "ghost"
enabled = true
version = 0
name = "missing plugin"
path = "plugins/libno_such_sink"

[[streams]]
stream = "s"
topics = ["t"]
schema = "raw"

[restart]
max_restarts = 2
initial_backoff = "10ms"
max_backoff = "20ms"
`)
	p := startFerry(t, "run", dir, nil, "run", "--config", runtimeConfig(t, dir, conns), "--embedded", "--progress", "0")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("still running with every connector failed")
	}
	out := p.out.String()
	if p.exitCode() != 1 || !strings.Contains(out, "reason=\"every connector failed for good\"") ||
		strings.Count(out, "sink failed; restarting") != 2 || !strings.Contains(out, "sink failed for good: not restarted") {
		t.Fatalf("exit %d; output:\n%s", p.exitCode(), tail(out, 20))
	}
}
