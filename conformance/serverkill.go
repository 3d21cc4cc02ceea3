package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// childServer is an Iggy-compatible server run as a child process (Config.ServerCommand),
// so that it can be SIGKILLed and started again on the same address and data directory.
type childServer struct {
	r         *Runner
	addr, dir string
	proc      *proc
	starts    int
}

func (c *childServer) start(ctx context.Context) (*iggy.Client, error) {
	c.starts++
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	args := make([]string, len(c.r.cfg.ServerCommand))
	for i, a := range c.r.cfg.ServerCommand {
		args[i] = strings.NewReplacer("{addr}", c.addr, "{data}", filepath.Join(c.dir, "data")).Replace(a)
	}
	p, err := startProcess(args, nil, c.dir, filepath.Join(c.dir, fmt.Sprintf("server%d.log", c.starts)))
	if err != nil {
		return nil, fmt.Errorf("conformance: start server: %w", err)
	}
	c.proc = p
	// Dial until the server answers (a safety net bounded by the runner's timeout).
	var client *iggy.Client
	deadline := time.Now().Add(c.r.cfg.Timeout)
	for {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		client, err = iggy.Dial(dctx, c.addr, iggy.WithCredentials(c.r.cfg.Username, c.r.cfg.Password), iggy.WithLogger(c.r.log))
		cancel()
		if err == nil {
			return client, nil
		}
		if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			p.kill()
			return nil, fmt.Errorf("conformance: server %q did not answer on %s: %w; log: %s", args, c.addr, err, oneLine(p.tail(5)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func runServerSigkill(ctx context.Context, r *Runner, mode string) Result {
	expected := promise(mode, "the server is SIGKILLed with batches in flight and restarted on its address and data: lost 0",
		"the server is SIGKILLed with batches in flight and restarted on its address and data: delivered only what was produced (losses allowed)")
	if len(r.cfg.ServerCommand) == 0 {
		return unsupported(expected, errors.New("no server command to run a server as a child process"))
	}
	addr, err := freeLoopback()
	if err != nil {
		return broken(expected, err)
	}
	r.seq++
	srv := &childServer{r: r, addr: addr, dir: filepath.Join(r.dir, fmt.Sprintf("server-sigkill-%s-%d", mode, r.seq))}
	admin, err := srv.start(ctx)
	if err != nil {
		return broken(expected, err)
	}
	// The fixture talks to the child server: a runner of its own, sharing the sequence.
	sr := *r
	sr.addr, sr.admin, sr.server = addr, admin, nil
	defer func() {
		r.seq = sr.seq
		if sr.admin != nil { // nil when the restart failed
			_ = sr.admin.Close()
		}
		srv.proc.kill()
	}()
	f, p, err := sr.begin(ctx, "server-sigkill", mode, setup{partitions: 2, before: 200,
		conn: connector{batch: 20, maxRetries: -1, probe: map[string]string{"sleep_ms": "20"}}})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.wait(ctx, "100 recorded messages", func() bool { return f.count('M') >= 100 }); err != nil {
		return broken(expected, err)
	}
	srv.proc.kill()
	before := f.count('M')
	_ = sr.admin.Close()
	if sr.admin, err = srv.start(ctx); err != nil {
		return broken(expected, fmt.Errorf("restart after SIGKILL: %w", err))
	}
	// A server that lost messages it had acknowledged cannot have them redelivered: the
	// run fails and says so, instead of counting them as the runtime's loss.
	lost, held, err := f.serverLoss(ctx)
	if err != nil {
		return broken(expected, fmt.Errorf("after the restart: %w", err))
	}
	if lost > 0 {
		return Result{Expected: expected, Verdict: Fail, Observed: fmt.Sprintf(
			"server SIGKILLed after %d recorded, restarted; the server lost %d acknowledged messages (%s)", before, lost, held)}
	}
	if err := f.produce(ctx, 200, nil); err != nil {
		return broken(expected, err)
	}
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		return fmt.Sprintf("server SIGKILLed after %d recorded, restarted; %s", before, t), t.clean() && noLoss(mode, t)
	}, p)
}

// serverLoss compares what the server holds per partition with what the fixture produced
// (every produce was acknowledged): lost is the number of acknowledged messages missing,
// held says per partition how many it holds of how many produced. A missing stream or
// topic holds none.
func (f *fixture) serverLoss(ctx context.Context) (lost uint64, held string, err error) {
	have := map[uint32]uint64{}
	t, err := f.r.admin.GetTopic(ctx, iggy.Name(f.stream), iggy.Name(f.topic))
	switch {
	case errors.Is(err, wire.ErrStreamIDNotFound) || errors.Is(err, wire.ErrTopicIDNotFound):
	case err != nil:
		return 0, "", fmt.Errorf("get topic %s/%s: %w", f.stream, f.topic, err)
	default:
		for _, p := range t.Partitions {
			if p.MessagesCount > 0 {
				have[p.ID] = p.CurrentOffset + 1
			}
		}
	}
	var parts []string
	for p := uint32(0); p < f.partitions; p++ {
		if f.next[p] > have[p] {
			lost += f.next[p] - have[p]
		}
		parts = append(parts, fmt.Sprintf("partition %d holds %d of %d", p, have[p], f.next[p]))
	}
	return lost, strings.Join(parts, ", "), nil
}
