package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
)

// redisWrite appends entries first..last−1 to each of the streams <prefix>:<k> with
// redis-cli (commands on its standard input), payload "<k>:<i>".
func redisWrite(url, prefix string, streams, first, last int) error {
	var b strings.Builder
	for i := first; i < last; i++ {
		for k := range streams {
			fmt.Fprintf(&b, "XADD %s:%d * payload %d:%d\n", prefix, k, k, i)
		}
	}
	cmd := exec.Command("redis-cli", "-u", url)
	cmd.Stdin = strings.NewReader(b.String())
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "ERR") {
		err = errors.New("an error reply")
	}
	if err != nil {
		return fmt.Errorf("redis-cli XADD %d..%d: %w: %s", first, last, err, tail(string(out), 3))
	}
	return nil
}

// readRedisTopic reads s/redis whole: per stream number, the entry indexes in partition
// order.
func readRedisTopic(t *testing.T, c *iggy.Client) map[int][]int {
	t.Helper()
	return readPairs(t, c, "redis", "%d:%d")
}

// readPairs reads the 3 partitions of s/<topic> whole, each payload two numbers k and i
// (format, for fmt.Sscanf): per k, the i in the order of their partition.
func readPairs(t *testing.T, c *iggy.Client, topic, format string) map[int][]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[int][]int{}
	for p := range uint32(3) {
		next := uint64(0)
		for {
			part := p
			res, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
				Stream: iggy.Name("s"), Topic: iggy.Name(topic), Partition: &part, Strategy: wire.PollOffset(next), Count: 1000})
			if err != nil {
				t.Fatalf("read partition %d at %d: %v", p, next, err)
			}
			if len(res.Messages) == 0 {
				res.Release()
				break
			}
			for _, m := range res.Messages {
				var k, i int
				if _, err := fmt.Sscanf(string(m.Payload), format, &k, &i); err != nil {
					t.Fatalf("partition %d offset %d: payload %q", p, m.Offset, m.Payload)
				}
				out[k] = append(out[k], i)
				next = m.Offset + 1
			}
			res.Release()
		}
	}
	return out
}

// TestRedisSourceUnderSIGKILL: redis-cli appends numbered entries to several streams while
// the ferry process running builtin:redis as a source is SIGKILLed (4 times;
// FERRY_REDIS_SOAK=1: 10 streams × 3,000 entries and 10 kills). Every entry is in Iggy, each
// stream's entries first seen in order, the duplicates counted and within one batch per
// kill (the read-back finds the batch a kill leaves appended and not acknowledged, so none
// is expected); and redis-cli finds nothing left pending in the group.
func TestRedisSourceUnderSIGKILL(t *testing.T) {
	url := os.Getenv("FERRY_REDIS_URL")
	if url == "" {
		t.Skip(`FERRY_REDIS_URL is not set (eval "$(bash scripts/redis.sh start)")`)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not installed (bash scripts/redis.sh install)")
	}
	streams, per, kills, batch := 5, 1200, 4, 100
	if os.Getenv("FERRY_REDIS_SOAK") == "1" {
		streams, per, kills = 10, 3000, 10
	}
	total := streams * per
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	prefix := fmt.Sprintf("e2esrc%d", seed%1_000_000)
	keys := make([]string, streams)
	for k := range keys {
		keys[k] = strconv.Quote(fmt.Sprintf("%s:%d", prefix, k))
	}
	t.Cleanup(func() {
		args := []string{"-u", url, "DEL"}
		for k := range streams {
			args = append(args, fmt.Sprintf("%s:%d", prefix, k))
		}
		_ = exec.Command("redis-cli", args...).Run()
	})

	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, iggy.Name("s"), "redis", 3); err != nil {
		t.Fatal(err)
	}
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "rs.toml"), fmt.Sprintf(`type = "source"
key = "rs"
enabled = true
version = 0
name = "redis in"
path = "builtin:redis"

[[streams]]
stream = "s"
topic = "redis"
schema = "raw"

[plugin_config]
url = %q
stream_keys = [%s]
batch_size = %d
block = "100ms"
`, url, strings.Join(keys, ", "), batch))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}

	// A first chunk before the first run (the group starts at the streams' beginning), the
	// rest while the runs are killed.
	chunk := 200
	if err := redisWrite(url, prefix, streams, 0, chunk); err != nil {
		t.Fatal(err)
	}
	var wErr error
	var wFailed atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for from := chunk; from < per; from += chunk {
			if wErr = redisWrite(url, prefix, streams, from, min(from+chunk, per)); wErr != nil {
				wFailed.Store(true)
				return
			}
		}
	})
	run := startFerry(t, "run 0", dir, nil, args...)
	share := uint64(total / (kills + 1))
	for i := 1; i <= kills; i++ {
		before := topicMessages(c, "redis")
		testkit.WaitFor(t, fmt.Sprintf("run %d sending", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return topicMessages(c, "redis") >= before+share/2 || wFailed.Load()
		})
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		run.kill()
		t.Logf("kill %d: %d messages in the topic", i, topicMessages(c, "redis"))
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if wErr != nil {
		t.Fatal(wErr)
	}
	testkit.WaitFor(t, "every entry in the topic", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		if topicMessages(c, "redis") < uint64(total) {
			return false
		}
		n := 0
		for _, seqs := range readRedisTopic(t, c) {
			n += len(distinctInts(seqs))
		}
		return n == total
	})
	testkit.WaitFor(t, "nothing pending in the group", func() bool {
		for k := range streams {
			if out := redisCLI(t, url, "XPENDING", fmt.Sprintf("%s:%d", prefix, k), "ferry-rs"); len(out) == 0 || out[0] != "0" {
				return false
			}
		}
		return true
	})
	run.stop(15 * time.Second)
	got := readRedisTopic(t, c)
	dups := 0
	for k := range streams {
		next := 0
		for _, i := range got[k] {
			switch {
			case i == next:
				next++
			case i > next:
				t.Fatalf("stream %d: entry %d before %d (a gap, or out of order)", k, i, next)
			default:
				dups++
			}
		}
		if next != per {
			t.Fatalf("stream %d: %d entries first seen, want %d", k, next, per)
		}
	}
	if bound := kills * batch * streams; dups > bound {
		t.Fatalf("%d duplicates, more than kills × one batch = %d", dups, bound)
	}
	t.Logf("%d entries in %d streams, %d kills: none lost, %d duplicates", total, streams, kills, dups)
}
