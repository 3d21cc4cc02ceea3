package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/searchtest"
	"github.com/ferryio/ferry/internal/testkit"
)

// searchRun is the size of one Elasticsearch run under SIGKILL. CI runs searchSmall;
// FERRY_ELASTICSEARCH_SOAK=1 (scripts/soak.sh) the full size.
type searchRun struct {
	perPartition uint64
	kills        int
}

var (
	searchSmall = searchRun{perPartition: 1000, kills: 6}
	searchSoak  = searchRun{perPartition: 30000, kills: 10}
)

// searchSink is the connector file of the Elasticsearch sink under test: a drop-in file
// of upstream's keys (no offset_commit: the sink's one mode, sink_controlled), Iggy's
// stored offsets lagging the index by seconds (so every kill makes the next run deliver
// again what is already there).
func searchSink(key, url, index, onFailure, extra string) string {
	dl := ""
	if onFailure == "dead_letter" {
		dl = "\n[dead_letter]\nstream = \"dlq\"\ntopic = \"rejected\"\n"
	}
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "elasticsearch"
path = "builtin:elasticsearch"
on_failure = %q
%s
[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 500
poll_interval = "5ms"

[commit]
interval = "2s"

[retry]
max_retries = 1000
initial_backoff = "50ms"

[plugin_config]
url = %q
index = %q
create_index_if_not_exists = true
batch_size = 250
timeout_seconds = 30
retry_backoff = "50ms"
%s`, key, onFailure, dl, url, index, extra)
}

// judgeSearch reads the index with curl, in pages sorted by partition and offset:
// exactly parts × per documents, one for each (partition, offset), its _id
// "s:t:partition:offset", its fields the message's JSON and the partition and offset.
func judgeSearch(t *testing.T, node *searchtest.Node, index string, parts uint32, per uint64) {
	t.Helper()
	hits := node.All(t, index, "_iggy_partition", "_iggy_offset")
	seen := map[[2]uint64]bool{}
	for _, h := range hits {
		var d struct {
			P, O      uint64
			Pad       string
			Partition uint64 `json:"_iggy_partition"`
			Offset    uint64 `json:"_iggy_offset"`
			Stream    string `json:"_iggy_stream"`
			Topic     string `json:"_iggy_topic"`
		}
		if err := json.Unmarshal(h.Source, &d); err != nil {
			t.Fatalf("document %s: %v: %s", h.ID, err, h.Source)
		}
		key := [2]uint64{d.Partition, d.Offset}
		if seen[key] {
			t.Fatalf("partition %d offset %d: two documents", d.Partition, d.Offset)
		}
		seen[key] = true
		if want := fmt.Sprintf("s:t:%d:%d", d.Partition, d.Offset); h.ID != want || d.Stream != "s" || d.Topic != "t" {
			t.Fatalf("document %s of stream %q topic %q, want %s of s/t", h.ID, d.Stream, d.Topic, want)
		}
		if d.P != d.Partition || d.O != d.Offset || d.Pad != fmt.Sprintf("%0*d", soakPad, 0) || d.Partition >= uint64(parts) || d.Offset >= per {
			t.Fatalf("document %s: %s, want the message's payload", h.ID, h.Source)
		}
	}
	if want := int(parts) * int(per); len(hits) != want || len(seen) != want {
		t.Fatalf("%d documents, %d distinct (partition, offset); want %d", len(hits), len(seen), want)
	}
}

// searchExactlyOnceUnderKills runs the Elasticsearch sink in ferry processes SIGKILLed
// size.kills times at seeded random moments while 3 partitions are produced, the node
// killed and started again once under a running process, then to the end: the index
// holds each message once, under its (partition, offset) id, its payload intact.
func searchExactlyOnceUnderKills(t *testing.T, size searchRun) {
	node := searchtest.Connect(t)
	index := node.Index(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, 3 × %d messages, %d kills", seed, size.perPartition, size.kills)
	rng := rand.New(rand.NewPCG(seed, 42))
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	conns := filepath.Join(dir, "search")
	writeFile(t, filepath.Join(conns, "sink.toml"), searchSink("search", node.URL, index, "stop", ""))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}

	var wg sync.WaitGroup
	var prodErr error
	// The production lasts about three seconds per kill (the sink outruns a slower
	// producer), so the kills land while it flows.
	pause := time.Duration(size.kills) * 3 * time.Second / time.Duration(size.perPartition/100)
	wg.Go(func() { prodErr = produceN(c, 3, size.perPartition, pause) })
	total := 3 * size.perPartition
	share := total / uint64(size.kills+1)
	count := func() uint64 {
		n, err := node.Count(index)
		if err != nil {
			return 0
		}
		return uint64(n)
	}
	run := startFerry(t, "run 0", dir, nil, args...)
	restartAt := size.kills / 2
	for i := 1; i <= size.kills; i++ {
		before := count()
		testkit.WaitFor(t, fmt.Sprintf("run %d writing", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return count() > before+share/2 || count() >= total
		})
		if i == restartAt { // the node killed and started again under the running process
			took := node.Restart(t)
			t.Logf("node killed and restarted under run %d (%v)", i-1, took.Round(time.Second))
			after := count()
			testkit.WaitFor(t, "writing after the node's restart", func() bool {
				return count() > after || count() >= total
			})
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		run.kill()
		t.Logf("kill %d: %d documents", i, count())
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	testkit.WaitFor(t, "every message in the index", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return count() >= total
	})
	testkit.WaitFor(t, "the last run's commits of every partition's end", func() bool {
		offs, err := offsets(t, addr, "s", "t", "iggy-connect-sink-search")
		if err != nil || len(offs) != 3 {
			return false
		}
		for _, o := range offs {
			if o.stored != int64(size.perPartition)-1 {
				return false
			}
		}
		return true
	})
	// A run killed before it handles signals would die of the SIGTERM below: wait for its
	// sink to be open (the commits above may all be the earlier runs').
	run.waitOutput("elasticsearch sink open", 1)
	run.stop(30 * time.Second)
	judgeSearch(t, node, index, 3, size.perPartition)
	t.Logf("%d kills, 1 node restart: %d documents, 0 lost, 0 duplicated", size.kills, total)
}

// TestElasticsearchExactlyOnceUnderSIGKILL: CI's size; FERRY_ELASTICSEARCH_SOAK=1 runs 3
// partitions × 30,000 messages and 10 kills.
func TestElasticsearchExactlyOnceUnderSIGKILL(t *testing.T) {
	size := searchSmall
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_ELASTICSEARCH_SOAK")); v {
		size = searchSoak
	}
	searchExactlyOnceUnderKills(t, size)
}

// TestElasticsearchMappingConflictToDeadLetter: the index maps n as a long; one message of
// 200 has a string there: under on_failure = dead_letter it alone goes to the dead-letter
// topic, with ferry-stage consume and the cluster's refusal naming its offset, and the 199
// others are in the index.
func TestElasticsearchMappingConflictToDeadLetter(t *testing.T) {
	node := searchtest.Connect(t)
	index := node.Index(t)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := make([]iggy.Message, 200)
	for i := range msgs {
		msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, `{"n":%d,"o":%d}`, i, i)}
		if i == 42 {
			msgs[i].Payload = []byte(`{"n":"forty-two","o":42}`)
		}
	}
	if _, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(0), msgs); err != nil {
		t.Fatal(err)
	}
	conns := filepath.Join(dir, "search")
	writeFile(t, filepath.Join(conns, "sink.toml"), searchSink("search", node.URL, index, "dead_letter",
		`index_mapping = { mappings = { properties = { n = { type = "long" } } } }`))
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, conns), "--create-topics", "--progress", "0")
	testkit.WaitFor(t, "the batch indexed and resolved", func() bool {
		offs, err := offsets(t, addr, "s", "t", "iggy-connect-sink-search")
		return err == nil && offs[0].stored == 199
	})
	run.stop(15 * time.Second)
	if n := node.MustCount(t, index); n != 199 {
		t.Fatalf("%d documents, want 199", n)
	}
	for _, h := range node.All(t, index) {
		if h.ID == "s:t:0:42" {
			t.Fatalf("the refused message is in the index: %s", h.Source)
		}
	}
	dumpTopic(t, dir, addr, "dlq", "rejected")
	b, _ := os.ReadFile(filepath.Join(dir, "dump.jsonl"))
	lines := bytes.Split(bytes.TrimSpace(b), []byte{'\n'})
	if len(lines) != 1 {
		t.Fatalf("dead-letter topic has %d messages, want 1:\n%s", len(lines), b)
	}
	var rec struct {
		Payload string `json:"payload"`
		Headers []struct{ Key, Kind, Value string }
	}
	if err := json.Unmarshal(lines[0], &rec); err != nil {
		t.Fatal(err)
	}
	hs := map[string]string{}
	for _, h := range rec.Headers {
		hs[h.Key] = h.Value
	}
	if hs["ferry-stage"] != "consume" || !strings.Contains(hs["ferry-error"], "offset 42: index "+index+": 400 ") {
		t.Fatalf("dead-letter headers = %v; want ferry-stage consume, ferry-error naming offset 42, the index and 400", hs)
	}
	if !strings.Contains(string(lines[0]), "forty-two") {
		t.Fatalf("dead-letter message %s, want offset 42's", lines[0])
	}
}

// TestElasticsearchCheckConnect: `ferry check --connect` passes a sink that can index and
// names what is wrong with one whose cluster is unreachable and one whose index is
// missing with create_index_if_not_exists off; nothing is created.
func TestElasticsearchCheckConnect(t *testing.T) {
	node := searchtest.Connect(t)
	index := node.Index(t)
	dir := t.TempDir()
	conns := filepath.Join(dir, "search")
	writeFile(t, filepath.Join(conns, "good.toml"), searchSink("good", node.URL, index, "stop", ""))
	writeFile(t, filepath.Join(conns, "dead.toml"), searchSink("dead", "http://127.0.0.1:1", index, "stop", ""))
	missing := strings.Replace(searchSink("missing", node.URL, index, "stop", ""), "create_index_if_not_exists = true", "create_index_if_not_exists = false", 1)
	writeFile(t, filepath.Join(conns, "missing.toml"), missing)
	cfg := remoteConfig(t, dir, "127.0.0.1:1", conns)
	out, err := exec.Command(ferryBin, "check", "--config", cfg, "--connect").CombinedOutput()
	if err == nil {
		t.Fatalf("check --connect passed:\n%s", out)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "sink" {
			lines[f[1]] = l
		}
	}
	if !strings.HasSuffix(lines["good"], "ok") {
		t.Errorf("good: %q, want ok", lines["good"])
	}
	if !strings.Contains(lines["dead"], "GET http://127.0.0.1:1/: cannot reach the cluster (plugin_config.url)") {
		t.Errorf("dead: %q", lines["dead"])
	}
	if !strings.Contains(lines["missing"], fmt.Sprintf("index %q does not exist at %s and plugin_config.create_index_if_not_exists is false", index, node.URL)) {
		t.Errorf("missing: %q", lines["missing"])
	}
	if code := searchtest.Status(t, node.URL+"/"+index, "HEAD"); code != 404 {
		t.Errorf("check created index %s (HEAD %d)", index, code)
	}
}
