package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/replcheck"
	"github.com/ferryio/ferry/internal/testkit"
)

// replRun is the size of one replication crash run. CI runs replSmall;
// FERRY_IGGY_REPL_SOAK=1 runs the size (3 partitions × 30,000 messages, 10 kills).
type replRun struct {
	perPartition, kills int
	remoteRestartAfter  int // the kill after which the remote server is restarted too
}

var (
	replSmall = replRun{perPartition: 3000, kills: 4, remoteRestartAfter: 2}
	replSoak  = replRun{perPartition: 30000, kills: 10, remoteRestartAfter: 5}
)

const replPartitions = 3

// replSource is the connector file of builtin:iggy under test: the remote's origin/events
// into the local s/replica, max_in_flight 4 (four batches read ahead of their ack).
func replSource(remote string) string {
	return fmt.Sprintf(`type = "source"
key = "repl"
enabled = true
version = 0
name = "replicate origin/events"
path = "builtin:iggy"
max_in_flight = 4

[[streams]]
stream = "s"
topic = "replica"
schema = "raw"
batch_length = 500

[plugin_config]
address = %q
stream = "origin"
topic = "events"
batch_size = 500
`, remote)
}

// startServerAt runs `ferry server` on a fixed address (so that a restart keeps it).
func startServerAt(t testing.TB, name, dir, addr, dataDir string) *proc {
	t.Helper()
	srv := startFerry(t, name, dir, nil, "server", "--addr", addr, "--data", dataDir)
	testkit.WaitFor(t, name+" listening", func() bool {
		if srv.exited() {
			t.Fatalf("%s exited: %v\n%s", name, srv.err, tail(srv.out.String(), 20))
		}
		return serverAddrRE.MatchString(srv.out.String())
	})
	return srv
}

// TestIggyReplicationUnderSIGKILL: builtin:iggy replicates a remote `ferry server`'s topic
// into the local one while a writer appends to the remote; ferry run is SIGKILLed
// size.kills times at random moments and the remote server is killed and restarted once.
// In the end the local topic equals the remote one, partition by partition: every message
// once, in order, with its id, origin timestamp, payload and headers, plus the origin
// headers (replcheck.Compare).
func TestIggyReplicationUnderSIGKILL(t *testing.T) {
	size := replSmall
	if os.Getenv("FERRY_IGGY_REPL_SOAK") == "1" {
		size = replSoak
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 41))
	dir := t.TempDir()
	remoteAddr := freeAddr(t)
	remoteData := filepath.Join(dir, "remote-data")
	remoteSrv := startServerAt(t, "remote server", dir, remoteAddr, remoteData)
	_, localAddr := startServer(t, "local server", dir, filepath.Join(dir, "local-data"))
	rc, lc := dial(t, remoteAddr), dial(t, localAddr)
	ctx := context.Background()
	ctxT, cancel := context.WithTimeout(ctx, 10*time.Second)
	for _, s := range []struct {
		c             *iggy.Client
		stream, topic string
	}{{rc, "origin", "events"}, {lc, "s", "replica"}} {
		if _, err := s.c.CreateStream(ctxT, s.stream); err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.CreateTopic(ctxT, iggy.Name(s.stream), s.topic, replPartitions); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "repl.toml"), replSource(remoteAddr))
	args := []string{"run", "--config", remoteConfig(t, dir, localAddr, conns), "--progress", "0"}

	w := &replcheck.Writer{Client: rc, Stream: "origin", Topic: "events", Partitions: replPartitions, Size: 100}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	var wg sync.WaitGroup
	var writeErr error
	var written atomic.Bool
	// The writing spreads over the kills: about a second of writing per run.
	pace := time.Duration(size.kills+1) * time.Second / time.Duration(size.perPartition/100)
	wg.Go(func() {
		writeErr = w.Write(wctx, size.perPartition, 100, func() { time.Sleep(pace) })
		written.Store(true)
	})
	total := uint64(size.perPartition * replPartitions)
	share := total / uint64(size.kills+1)
	run := startFerry(t, "run 0", dir, nil, args...)
	for i := 1; i <= size.kills; i++ {
		before := replcheck.Count(ctx, lc, "s", "replica")
		testkit.WaitFor(t, fmt.Sprintf("run %d replicating", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			n := replcheck.Count(ctx, lc, "s", "replica")
			return n > before+share/2 || (written.Load() && n >= replcheck.Count(ctx, rc, "origin", "events"))
		})
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		run.kill()
		if i == size.remoteRestartAfter {
			remoteSrv.kill()
			remoteSrv = startServerAt(t, "remote server (restarted)", dir, remoteAddr, remoteData)
		}
		t.Logf("kill %d: %d messages in the local topic", i, replcheck.Count(ctx, lc, "s", "replica"))
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	testkit.WaitFor(t, "the local topic as long as the remote one", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return replcheck.Count(ctx, lc, "s", "replica") >= replcheck.Count(ctx, rc, "origin", "events")
	})
	testkit.WaitFor(t, "the last run started", func() bool { return strings.Contains(run.out.String(), "All sources and sinks spawned") })
	run.stop(30 * time.Second)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := replcheck.Compare(cctx, rc, "origin", "events", lc, "s", "replica", replPartitions); err != nil {
		t.Fatalf("the replica differs from the remote topic:\n%v", err)
	}
	t.Logf("replica equal to the remote: %d messages", replcheck.Count(ctx, lc, "s", "replica"))
}
