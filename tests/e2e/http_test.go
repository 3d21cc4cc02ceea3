package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/webhooktest"
)

func httpSink(url, mode string, batch int) string {
	return fmt.Sprintf(`type = "sink"
key = "hook"
enabled = true
version = 0
name = "webhook"
path = "builtin:http"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = %d
poll_interval = "5ms"

[plugin_config]
url = %q
batch_mode = %q
retry_delay = "5ms"
max_retry_delay = "50ms"
`, batch, url, mode)
}

// httpRun is the size of one HTTP sink soak: CI's httpSmall; FERRY_HTTP_SOAK=1 the
// issue's 10 kills over more messages.
type httpRun struct {
	perPartition uint64
	kills        int
}

var (
	httpSmall = httpRun{perPartition: 4000, kills: 4}
	httpSoak  = httpRun{perPartition: 40000, kills: 10}
)

// TestHTTPSinkExactlyOnceAfterDedupUnderSIGKILL: ferry runs the HTTP sink (ndjson,
// sink_controlled) into a receiver that refuses one request in ten (503), SIGKILLed again
// and again. After the receiver's deduplication by the idempotency key every message is
// there exactly once: each retry and each replay after a kill carried the key of the
// request it repeats. The topic is filled before the first run, so every batch is
// batch_length long and a replay cuts the same batches (docs/http.md says what a live
// partition's replay may do).
func TestHTTPSinkExactlyOnceAfterDedupUnderSIGKILL(t *testing.T) {
	size := httpSmall
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_HTTP_SOAK")); v {
		size = httpSoak
	}
	const parts = 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	// Each answer takes 40 ms (a pace, so the kills fall while batches are in flight, not
	// a wait for anything); one in ten is a refusal.
	rc := webhooktest.Start("", func(n int, _ *webhooktest.Request) webhooktest.Answer {
		if n%10 == 0 {
			return webhooktest.Answer{Status: 503, Delay: 40 * time.Millisecond}
		}
		return webhooktest.Answer{Delay: 40 * time.Millisecond}
	})
	t.Cleanup(rc.Close)

	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, parts)
	if err := producePadded(c, parts, 0, size.perPartition, 0, 20); err != nil {
		t.Fatal(err)
	}
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "hook.toml"), httpSink(rc.URL()+"/hook", "ndjson", 100))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
	total := int(parts * size.perPartition)
	accepted := func() int {
		n := 0
		for _, b := range rc.Accepted() {
			n += strings.Count(string(b), "\n")
		}
		return n
	}
	run := startFerry(t, "run 0", dir, nil, args...)
	share := total / (size.kills + 1)
	var runs []*proc
	for i := 1; i <= size.kills; i++ {
		before := accepted()
		testkit.WaitFor(t, fmt.Sprintf("run %d delivering", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return accepted() >= min(before+share/2, total)
		})
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		run.kill()
		t.Logf("kill %d: %d messages accepted, %d requests", i, accepted(), len(rc.Requests()))
		runs = append(runs, run)
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	testkit.WaitFor(t, "every message accepted", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return accepted() >= total
	})
	run.stop(15 * time.Second)
	for _, r := range runs {
		if !r.killed {
			t.Fatalf("%s was not killed", r.name)
		}
	}

	seen := map[[2]uint64]int{}
	for _, body := range rc.Accepted() {
		for line := range strings.Lines(string(body)) {
			var env struct {
				Metadata struct {
					Partition uint64 `json:"iggy_partition_id"`
					Offset    uint64 `json:"iggy_offset"`
				}
				Payload struct{ P, O uint64 }
			}
			if err := json.Unmarshal([]byte(line), &env); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if env.Payload.P != env.Metadata.Partition || env.Payload.O != env.Metadata.Offset {
				t.Fatalf("partition %d offset %d holds the payload of %d/%d", env.Metadata.Partition, env.Metadata.Offset, env.Payload.P, env.Payload.O)
			}
			seen[[2]uint64{env.Metadata.Partition, env.Metadata.Offset}]++
		}
	}
	for p := range uint64(parts) {
		for o := range size.perPartition {
			if n := seen[[2]uint64{p, o}]; n != 1 {
				t.Fatalf("partition %d offset %d: %d times after deduplication by the key", p, o, n)
			}
		}
	}
	refused := 0
	for _, r := range rc.Requests() {
		if r.Status == 503 {
			refused++
		}
	}
	t.Logf("%d messages, %d kills: %d requests (%d refused, %d replays of an accepted key), every message exactly once after deduplication",
		total, size.kills, len(rc.Requests()), refused, rc.Replays())
}
