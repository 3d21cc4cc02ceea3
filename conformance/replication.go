package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/replcheck"
)

// iggy-replication runs the Iggy source (builtin:iggy) from a remote server, run as a
// child process (ServerCommand), into the suite's server while a writer appends to the
// remote, SIGKILLs the runtime --soak times at seeded moments and the remote server once
// (restarted on its address and data), then judges the local topic against the remote
// one, message for message (replcheck.Compare): ids, payloads, headers, origin timestamps
// and order per partition, each message once.

const replPartitions = 3

func runIggyReplication(ctx context.Context, r *Runner, _ string) Result {
	kills := max(1, r.cfg.Soak)
	per := 500 * (kills + 1)
	expected := fmt.Sprintf("%d SIGKILLs of the runtime and one of the remote server while %d × %d messages are written to the remote: the local topic equals the remote one (exactly-once replication)",
		kills, replPartitions, per)
	if len(r.cfg.ServerCommand) == 0 {
		return unsupported(expected, errors.New("no server command to run the remote server as a child process"))
	}
	addr, err := freeLoopback()
	if err != nil {
		return broken(expected, err)
	}
	r.seq++
	name := fmt.Sprintf("repl%d_%d", r.seq, time.Now().UnixNano()%1_000_000)
	dir := filepath.Join(r.dir, name)
	remote := &childServer{r: r, addr: addr, dir: filepath.Join(dir, "remote")}
	rc, err := remote.start(ctx)
	if err != nil {
		return broken(expected, err)
	}
	defer func() {
		_ = rc.Close()
		remote.proc.kill()
	}()
	if err := rc.EnsureTopic(ctx, "origin", "events", replPartitions); err != nil {
		return broken(expected, fmt.Errorf("remote topic: %w", err))
	}
	stream := "conformance-" + name
	if err := r.admin.EnsureTopic(ctx, stream, "t", replPartitions); err != nil {
		return broken(expected, fmt.Errorf("local topic: %w", err))
	}
	state, cdir := filepath.Join(dir, "state"), filepath.Join(dir, "connectors")
	for _, d := range []string{state, cdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return broken(expected, err)
		}
	}
	cfgPath, err := r.writeRuntimeConfig(dir, state, cdir, r.addr, "")
	if err != nil {
		return broken(expected, err)
	}
	conn := fmt.Sprintf(`type = "source"
key = "repl"
enabled = true
version = 0
name = "conformance iggy replication"
path = "builtin:iggy"
max_in_flight = 4

[[streams]]
stream = %q
topic = "t"
schema = "raw"
batch_length = 200

[plugin_config]
address = %q
username = %q
password = %q
stream = "origin"
topic = "events"
batch_size = 200
`, stream, addr, r.cfg.Username, r.cfg.Password)
	if err := os.WriteFile(filepath.Join(cdir, "repl.toml"), []byte(conn), 0o644); err != nil {
		return broken(expected, err)
	}
	logPath := filepath.Join(dir, "runtime.log")
	p, err := r.startRuntime(cfgPath, logPath)
	if err != nil {
		return broken(expected, err)
	}
	defer func() { p.kill() }()
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 41))
	// The writer has a client of its own, which follows the remote through its restart.
	wc, err := iggy.Dial(ctx, addr, iggy.WithCredentials(r.cfg.Username, r.cfg.Password), iggy.WithLogger(r.log))
	if err != nil {
		return broken(expected, err)
	}
	defer func() { _ = wc.Close() }()
	w := &replcheck.Writer{Client: wc, Stream: "origin", Topic: "events", Partitions: replPartitions, Size: 64}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	werr := make(chan error, 1)
	pace := time.Duration(kills+1) * 500 * time.Millisecond / time.Duration(per/100)
	go func() { werr <- w.Write(wctx, per, 100, func() { time.Sleep(pace) }) }()
	count := func() uint64 { return replcheck.Count(ctx, r.admin, stream, "t") }
	share := uint64(replPartitions * per / (kills + 1))
	restartAt := (kills + 1) / 2
	for k := 1; k <= kills; k++ {
		before := count()
		if err := r.wait(ctx, fmt.Sprintf("the replication before kill %d", k), func() bool {
			return count() > before+share/2 || p.exited() || count() >= uint64(replPartitions*per)
		}); err != nil || p.exited() {
			if k == 1 && p.exited() && !strings.Contains(p.tail(40), "source running") {
				return unsupported(expected, fmt.Errorf("the runtime did not run builtin:iggy; runtime log: %s", oneLine(p.tail(5))))
			}
			return broken(expected, fmt.Errorf("before kill %d: %w; runtime log: %s", k, exitedOr(err), oneLine(p.tail(5))))
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		p.kill()
		if k == restartAt {
			remote.proc.kill()
			_ = rc.Close()
			if rc, err = remote.start(ctx); err != nil {
				return broken(expected, fmt.Errorf("restart the remote server: %w", err))
			}
		}
		if p, err = r.startRuntime(cfgPath, logPath); err != nil {
			return broken(expected, err)
		}
	}
	if err := <-werr; err != nil {
		return broken(expected, fmt.Errorf("writer: %w", err))
	}
	want := replcheck.Count(ctx, rc, "origin", "events")
	if err := r.wait(ctx, "the local topic as long as the remote one", func() bool { return count() >= want || p.exited() }); err != nil || p.exited() {
		return broken(expected, fmt.Errorf("%w; runtime log: %s", exitedOr(err), oneLine(p.tail(5))))
	}
	_ = p.term(15 * time.Second)
	observed := fmt.Sprintf("%d kills, the remote restarted once; remote %d messages, local %d", kills, want, count())
	if err := replcheck.Compare(ctx, rc, "origin", "events", r.admin, stream, "t", replPartitions); err != nil {
		return Result{Expected: expected, Verdict: Fail, Kills: kills, Observed: observed + "; " + oneLine(err.Error())}
	}
	return Result{Expected: expected, Verdict: Pass, Kills: kills, Observed: observed + ": equal, message for message"}
}
