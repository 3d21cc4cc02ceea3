package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/replcheck"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestIggyReplicationThroughput measures, in one run between the same two `ferry server`
// processes, how fast builtin:iggy (a `ferry run` process) replicates a remote topic of
// FERRY_IGGY_BENCH_MESSAGES messages per partition (default 200,000 × 100 B, 3
// partitions), beside a bare loop of Ferry's own client doing the same work: a consumer
// group member polls the remote, sends each batch to the same local partition, then stores
// the remote offset (poll, send, store, one batch at a time). The bare loop runs before
// and after the runtime (the machine is shared: the ratio is taken against the faster).
// It runs only with FERRY_IGGY_BENCH=1 (scripts/bench.sh sets it) and fails unless the
// replica equals the remote.
func TestIggyReplicationThroughput(t *testing.T) {
	if os.Getenv("FERRY_IGGY_BENCH") == "" {
		t.Skip("FERRY_IGGY_BENCH is not set: the replication throughput run is part of scripts/bench.sh")
	}
	per := 200_000
	if v, err := strconv.Atoi(os.Getenv("FERRY_IGGY_BENCH_MESSAGES")); err == nil && v > 0 {
		per = v
	}
	dir := t.TempDir()
	remoteAddr := freeAddr(t)
	startServerAt(t, "remote server", dir, remoteAddr, filepath.Join(dir, "remote-data"))
	_, localAddr := startServer(t, "local server", dir, filepath.Join(dir, "local-data"))
	rc, lc := dial(t, remoteAddr), dial(t, localAddr)
	ctx := context.Background()
	if err := rc.EnsureTopic(ctx, "origin", "events", replPartitions); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"bare1", "replica", "bare2"} {
		if err := lc.EnsureTopic(ctx, "s", topic, replPartitions); err != nil {
			t.Fatal(err)
		}
	}
	w := &replcheck.Writer{Client: rc, Stream: "origin", Topic: "events", Partitions: replPartitions, Size: 100}
	if err := w.Write(ctx, per, 1000, nil); err != nil {
		t.Fatal(err)
	}
	total := uint64(per * replPartitions)

	bare := func(topic string) float64 {
		start := time.Now()
		bareLoop(t, rc, lc, "bench-"+topic, topic, total)
		return float64(total) / time.Since(start).Seconds()
	}
	b1 := bare("bare1")

	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "repl.toml"), replSource(remoteAddr))
	launched := time.Now()
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, localAddr, conns), "--progress", "0")
	testkit.WaitFor(t, "the first replicated message", func() bool { return replcheck.Count(ctx, lc, "s", "replica") > 0 || run.exited() })
	start, first := time.Now(), replcheck.Count(ctx, lc, "s", "replica")
	testkit.WaitFor(t, "the replica complete", func() bool {
		if run.exited() {
			t.Fatalf("run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return replcheck.Count(ctx, lc, "s", "replica") >= total
	})
	ferry := float64(total-first) / time.Since(start).Seconds()
	startup := start.Sub(launched)
	run.stop(30 * time.Second)
	b2 := bare("bare2")
	if err := replcheck.Compare(ctx, rc, "origin", "events", lc, "s", "replica", replPartitions); err != nil {
		t.Fatalf("the replica differs: %v", err)
	}
	best := max(b1, b2)
	t.Logf("iggy → iggy, %d × %d messages of 100 B: builtin:iggy %.0f msg/s (from its first message; the process took %v to start and open); bare poll+send+store loop %.0f and %.0f msg/s; ratio %.2f of the faster",
		replPartitions, per, ferry, startup.Round(time.Millisecond), b1, b2, ferry/best)
}

// bareLoop replicates the remote topic into the local topic with the client alone: one
// group member, poll → send to the same partition → store, until total messages moved.
func bareLoop(t *testing.T, rc, lc *iggy.Client, group, topic string, total uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cn, err := rc.NewConsumer(ctx, iggy.ConsumerConfig{Stream: iggy.Name("origin"), Topic: iggy.Name("events"), Group: group, BatchSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cn.Close(context.Background()) }()
	var moved uint64
	msgs := make([]iggy.Message, 0, 500)
	for moved < total {
		b, err := cn.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:0]
		for _, m := range b.Messages {
			kvs, err := m.Headers(nil)
			if err != nil {
				t.Fatal(err)
			}
			var id [16]byte
			for i := range 8 {
				id[i], id[8+i] = byte(m.ID.Lo>>(8*i)), byte(m.ID.Hi>>(8*i))
			}
			msgs = append(msgs, iggy.Message{ID: id, Payload: m.Payload, Headers: kvs, OriginTimestamp: m.OriginTimestamp})
		}
		if _, err := lc.SendMessages(ctx, iggy.Name("s"), iggy.Name(topic), wire.ToPartition(b.Partition), msgs); err != nil {
			t.Fatal(err)
		}
		if err := cn.StoreOffset(ctx, b.Partition, b.LastOffset()); err != nil {
			t.Fatal(err)
		}
		moved += uint64(len(b.Messages))
		b.Release()
	}
	if n := replcheck.Count(ctx, lc, "s", topic); n != total {
		t.Fatalf("bare loop: %d messages in s/%s, want %d", n, topic, total)
	}
}
