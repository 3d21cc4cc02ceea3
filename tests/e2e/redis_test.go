package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
)

// redisCLI runs redis-cli against FERRY_REDIS_URL (the reader nobody here wrote) and
// returns its raw output lines.
func redisCLI(t *testing.T, url string, args ...string) []string {
	t.Helper()
	out, err := exec.Command("redis-cli", append([]string{"-u", url, "--raw"}, args...)...).Output()
	if err != nil {
		t.Fatalf("redis-cli %v: %v", args, err)
	}
	s := strings.TrimRight(string(out), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func redisLen(t *testing.T, url, prefix string, partitions int) int {
	n := 0
	for p := range partitions {
		v, _ := strconv.Atoi(strings.Join(redisCLI(t, url, "XLEN", fmt.Sprintf("%s:%d", prefix, p)), ""))
		n += v
	}
	return n
}

// TestRedisExactlyOnceUnderSIGKILL: builtin:redis (sink_controlled) drains 3 partitions
// into Redis streams while ferry run is SIGKILLed (4 times; FERRY_REDIS_SOAK=1: 10) at
// random moments; redis-cli then finds every message exactly once, in offset order, with
// the entry id its offset gives.
func TestRedisExactlyOnceUnderSIGKILL(t *testing.T) {
	url := os.Getenv("FERRY_REDIS_URL")
	if url == "" {
		t.Skip(`FERRY_REDIS_URL is not set (eval "$(bash scripts/redis.sh start)")`)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not installed (bash scripts/redis.sh install)")
	}
	per, kills := 3000, 4
	if os.Getenv("FERRY_REDIS_SOAK") == "1" {
		per, kills = 30000, 10
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	prefix := fmt.Sprintf("e2e%d", seed%1_000_000)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.EnsureTopic(ctx, "s", "t", 3); err != nil {
		t.Fatal(err)
	}
	for p := range uint32(3) {
		for from := 0; from < per; from += 1000 {
			msgs := make([]iggy.Message, 0, 1000)
			for i := from; i < min(from+1000, per); i++ {
				msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"p":%d,"i":%d}`, p, i)})
			}
			if _, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(p), msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "redis.toml"), fmt.Sprintf(`type = "sink"
key = "redis"
enabled = true
version = 0
name = "redis"
path = "builtin:redis"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "raw"
batch_length = 100

[plugin_config]
url = %q
stream_key = "%s:{partition}"
`, url, prefix))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
	total := 3 * per
	run := startFerry(t, "run 0", dir, nil, args...)
	for i := 1; i <= kills; i++ {
		before := redisLen(t, url, prefix, 3)
		testkit.WaitFor(t, fmt.Sprintf("run %d writing", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			n := redisLen(t, url, prefix, 3)
			return n > before+total/(2*(kills+1)) || n >= total
		})
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		run.kill()
		t.Logf("kill %d: %d entries", i, redisLen(t, url, prefix, 3))
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	testkit.WaitFor(t, "every message in Redis", func() bool { return redisLen(t, url, prefix, 3) >= total || run.exited() })
	// A clean stop finishes whatever is in flight: a duplicate would be written by then.
	testkit.WaitFor(t, "the last run started", func() bool { return strings.Contains(run.out.String(), "All sources and sinks spawned") })
	run.stop(30 * time.Second)
	for p := range 3 {
		key := fmt.Sprintf("%s:%d", prefix, p)
		lines := redisCLI(t, url, "XRANGE", key, "-", "+")
		if len(lines) != 3*per {
			t.Fatalf("%s: %d lines, want %d entries of 3 lines (exactly once)", key, len(lines), per)
		}
		for i := range per {
			id, field, value := lines[3*i], lines[3*i+1], lines[3*i+2]
			if id != fmt.Sprintf("%d-%d", i+1, p) || field != "payload" || value != fmt.Sprintf(`{"p":%d,"i":%d}`, p, i) {
				t.Fatalf("%s entry %d: %s %s %s", key, i, id, field, value)
			}
		}
	}
	redisCLI(t, url, "DEL", prefix+":0", prefix+":1", prefix+":2")
}
