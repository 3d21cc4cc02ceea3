package e2e

import (
	"fmt"
	"github.com/ferryio/ferry/iggy"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/internal/testkit"
)

// s3Scale is the size of the exactly-once S3 tests: 3 partitions × 3000 messages and 3
// kills by default (CI); FERRY_S3_E2E_MESSAGES and FERRY_S3_E2E_KILLS raise it (the issue's
// full run is 30000 and 10).
func s3Scale(t *testing.T) (perPartition uint64, kills int) {
	perPartition, kills = 3000, 3
	if v := os.Getenv("FERRY_S3_E2E_MESSAGES"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 || n%100 != 0 {
			t.Fatalf("FERRY_S3_E2E_MESSAGES=%q: want a positive multiple of 100", v)
		}
		perPartition = n
	}
	if v := os.Getenv("FERRY_S3_E2E_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FERRY_S3_E2E_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	return perPartition, kills
}

// s3Sink is the connector file of the S3 sink under test: Parquet, 700 messages an object
// (not a multiple of the producer's 100 nor of the batch's 1000), idle partitions flushed
// after 300ms, and less memory than three partitions' objects need, so the largest buffer
// is uploaded early at moments that depend on timing: objects' boundaries differ from run
// to run, and only the seek on assignment keeps a restarted run from writing a range again
// under other boundaries.
func s3Sink(srv *s3test.Server, bucket string) string {
	return fmt.Sprintf(`type = "sink"
key = "s3"
enabled = true
version = 0
name = "s3"
path = "builtin:s3"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 1000
poll_interval = "5ms"

# Iggy's stored offsets lag the objects by seconds: after a kill, Iggy alone would send
# again what is already in the bucket.
[commit]
interval = "3s"
delay = "3s"

[retry]
max_retries = 1000
initial_backoff = "50ms"

[plugin_config]
bucket = %q
region = %q
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = "lake"
output_format = "parquet"
file_rotation = "messages"
max_messages_per_file = 700
flush_interval = "300ms"
max_buffered_bytes = "300KB"
max_attempts = 2
retry_delay = "100ms"
`, bucket, srv.Region, srv.Endpoint, srv.AccessKey, srv.SecretKey)
}

// produceN sends n soak payloads to each of partitions 0..parts-1, 100 a send, round-robin,
// pausing pause between rounds so the stream lasts while the test kills.
func produceN(c *iggy.Client, parts uint32, n uint64, pause time.Duration) error {
	return producePadded(c, parts, 0, n, pause, soakPad)
}

// payloadOf is the payload producePadded sends to partition p at offset o.
func payloadOf(p uint32, o uint64, pad int) string { return soakPayloadPadded(p, o, pad) }

// producePadded is produceN of offsets from to n (from a multiple of 100, the offsets
// before it already sent) with pad digits of padding in each message.
func producePadded(c *iggy.Client, parts uint32, from, n uint64, pause time.Duration, pad int) error {
	return soakLoad{parts: parts, perPartition: n, chunk: 100, pause: pause, from: from, pad: pad}.produce(c)
}

var s3KeyRE = regexp.MustCompile(`^lake/s/t/\d{4}-\d{2}-\d{2}/\d{2}/(\d{5})-(\d{20})-(\d{20})\.parquet$`)

// s3Ranges reads the bucket's keys as (partition → [first, last] ranges, sorted); a key of
// another shape fails the test.
func s3Ranges(t *testing.T, srv *s3test.Server, bucket string) (map[uint64][][2]uint64, uint64) {
	t.Helper()
	out := map[uint64][][2]uint64{}
	var total uint64
	for _, k := range srv.Keys(t, bucket) {
		m := s3KeyRE.FindStringSubmatch(k)
		if m == nil {
			t.Fatalf("unexpected key %s", k)
		}
		p, _ := strconv.ParseUint(m[1], 10, 32)
		first, _ := strconv.ParseUint(m[2], 10, 64)
		last, _ := strconv.ParseUint(m[3], 10, 64)
		out[p] = append(out[p], [2]uint64{first, last})
		total += last - first + 1
	}
	for p := range out {
		slices.SortFunc(out[p], func(a, b [2]uint64) int { return int(a[0]) - int(b[0]) })
	}
	return out, total
}

// s3ExactlyOnceUnderKills runs the S3 sink in ferry processes SIGKILLed kills times at
// seeded random moments while 3 partitions are produced (the S3 server restarted at the
// kills in restarts, 0 meaning under a running process), then to the end; pyarrow then
// reads every object: exactly 3N rows, 3N distinct (partition, offset), each payload its
// own, and the objects' ranges of each partition contiguous from 0, none overlapping.
func s3ExactlyOnceUnderKills(t *testing.T, restarts map[int]bool) {
	srv := s3test.Connect(t)
	s3test.Python(t)
	perPartition, kills := s3Scale(t)
	bucket := srv.Bucket(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, 3 × %d messages, %d kills", seed, perPartition, kills)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	conns := filepath.Join(dir, "s3")
	writeFile(t, filepath.Join(conns, "sink.toml"), s3Sink(srv, bucket))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}

	// With an outage under a running process, the last fifth is produced only once the
	// server is down, so that process has uploads to fail and retry.
	var wg sync.WaitGroup
	var prodErr error
	holdAt, gate := perPartition, make(chan struct{})
	if restarts[0] {
		holdAt = perPartition * 4 / 5 / 100 * 100
	}
	wg.Go(func() {
		if prodErr = produceN(c, 3, holdAt, 150*time.Millisecond); prodErr != nil || holdAt == perPartition {
			return
		}
		<-gate
		prodErr = producePadded(c, 3, holdAt, perPartition, 150*time.Millisecond, 170)
	})
	total := 3 * perPartition
	written := func() uint64 { _, n := s3Ranges(t, srv, bucket); return n }
	run := startFerry(t, "run 0", dir, nil, args...)
	var restartedUnder *proc
	var all []*proc // every run, for the secret-key check
	for i := 1; i <= kills; i++ {
		before := written()
		testkit.WaitFor(t, fmt.Sprintf("run %d writing", i-1), func() bool {
			return run.exited() || written() > before || before == total || before == 3*holdAt
		})
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		if run.exited() {
			t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
		}
		run.kill()
		all = append(all, run)
		if restarts[i] {
			srv.Restart(t, repoRoot)
		}
		t.Logf("kill %d: %d messages in the bucket", i, written())
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
		if i == (kills+1)/2 && restarts[0] { // an outage under a running process
			testkit.WaitFor(t, "the run's sink running", func() bool {
				return strings.Contains(run.out.String(), `msg="sink running"`)
			})
			// The run retries whatever S3 request the outage meets: an upload, or the
			// listing of its assignment.
			srv.Outage(t, repoRoot, func() { close(gate) }, func() bool { return retriedS3(run) })
			restartedUnder = run
		}
	}
	if restarts[0] && restartedUnder == nil {
		t.Fatal("no outage under a running process: too few kills")
	}
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	testkit.WaitFor(t, "every message in the bucket", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return written() >= total
	})
	testkit.WaitFor(t, "the last run's sink running", func() bool {
		return strings.Contains(run.out.String(), `msg="sink running"`)
	})
	run.stop(30 * time.Second)
	if restartedUnder != nil && !retriedS3(restartedUnder) {
		t.Fatalf("the run the S3 server restarted under never retried an upload:\n%s", tail(restartedUnder.out.String(), 30))
	}
	for _, r := range append(all, run) {
		if strings.Contains(r.out.String(), srv.SecretKey) {
			t.Fatalf("%s logged the secret key", r.name)
		}
	}
	rows := checkExactlyOnce(t, srv, bucket, perPartition)
	t.Logf("%d kills, %d S3 restarts: %d rows in %d objects, 0 lost, 0 duplicated", kills, len(restarts), rows, len(srv.Keys(t, bucket)))
}

var assignmentRE = regexp.MustCompile(`assignment changed.* revoked="?\[([\d ]*)\]"? assigned="?\[([\d ]*)\]"?`)

// ownedPartitions replays a ferry process's "assignment changed" lines: the partitions it
// owns after the last one.
func ownedPartitions(out string) map[uint64]bool {
	owned := map[uint64]bool{}
	for _, m := range assignmentRE.FindAllStringSubmatch(out, -1) {
		for _, f := range strings.Fields(m[1]) {
			p, _ := strconv.ParseUint(f, 10, 32)
			delete(owned, p)
		}
		for _, f := range strings.Fields(m[2]) {
			p, _ := strconv.ParseUint(f, 10, 32)
			owned[p] = true
		}
	}
	return owned
}

// retriedS3 reports whether p logged a failed S3 request it retries.
func retriedS3(p *proc) bool {
	out := p.out.String()
	return strings.Contains(out, "upload failed") || strings.Contains(out, "sink could not say where its assigned partitions start")
}

// checkExactlyOnce judges the bucket of a 3-partition run of perPartition messages each:
// the objects' ranges of each partition contiguous from 0 to the end, none overlapping;
// pyarrow reads exactly 3 × perPartition rows, each (partition, offset) once with its own
// payload. It returns the number of rows.
func checkExactlyOnce(t *testing.T, srv *s3test.Server, bucket string, perPartition uint64) int {
	t.Helper()
	return checkExactlyOncePadded(t, srv, bucket, perPartition, 170)
}

// checkExactlyOncePadded is checkExactlyOnce of messages sent by producePadded.
func checkExactlyOncePadded(t *testing.T, srv *s3test.Server, bucket string, perPartition uint64, pad int) int {
	t.Helper()
	total := 3 * perPartition
	ranges, n := s3Ranges(t, srv, bucket)
	if n != total {
		t.Fatalf("objects hold %d messages, want %d", n, total)
	}
	for p := range uint64(3) {
		next := uint64(0)
		for _, r := range ranges[p] {
			if r[0] != next {
				t.Fatalf("partition %d: object %d-%d after offset %d (overlap or gap); ranges %v", p, r[0], r[1], next-1, ranges[p])
			}
			next = r[1] + 1
		}
		if next != perPartition {
			t.Fatalf("partition %d ends at %d, want %d", p, next, perPartition)
		}
	}
	rows, seen := 0, map[[2]uint64]bool{}
	for _, o := range srv.ReadParquet(t, bucket) {
		for _, r := range o.Rows {
			rows++
			k := [2]uint64{uint64(r.Partition), r.Offset}
			want := payloadOf(r.Partition, r.Offset, pad)
			if seen[k] || r.Payload != want {
				t.Fatalf("%s: row (%d, %d) seen before %v, payload %.60s", o.Key, r.Partition, r.Offset, seen[k], r.Payload)
			}
			seen[k] = true
		}
	}
	if uint64(rows) != total || uint64(len(seen)) != total {
		t.Fatalf("pyarrow read %d rows, %d distinct (partition, offset); want %d each", rows, len(seen), total)
	}
	return rows
}

// TestS3ExactlyOnceUnderSIGKILL: SIGKILLs at random moments while 3 partitions are
// produced; every message in the bucket once.
func TestS3ExactlyOnceUnderSIGKILL(t *testing.T) {
	s3ExactlyOnceUnderKills(t, nil)
}

// TestS3ExactlyOnceUnderSIGKILLAndRestarts: the same with the S3 server restarted twice:
// after the first kill (no runtime running) and under a running one.
func TestS3ExactlyOnceUnderSIGKILLAndRestarts(t *testing.T) {
	s3ExactlyOnceUnderKills(t, map[int]bool{1: true, 0: true})
}

// TestS3MissingBucket: `ferry run` with a bucket that does not exist says so, naming it.
func TestS3MissingBucket(t *testing.T) {
	srv := s3test.Connect(t)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	createTopic(t, dial(t, addr), 1)
	conns := filepath.Join(dir, "s3")
	writeFile(t, filepath.Join(conns, "sink.toml"), s3Sink(srv, "ferry-no-such-bucket"))
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0")
	want := `s3 sink: bucket \"ferry-no-such-bucket\" does not exist`
	testkit.WaitFor(t, "the missing bucket named", func() bool {
		return strings.Contains(run.out.String(), want)
	})
}

// TestS3PoisonToDeadLetter: one message of a json stream is not JSON; under on_failure =
// dead_letter it alone goes to the dead-letter topic, the 199 others are in the bucket once
// (the object around it spans the gap), and a second run writes nothing more.
func TestS3PoisonToDeadLetter(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	dir := t.TempDir()
	addr := poisonedTopic(t, dir)
	sink := strings.NewReplacer(`offset_commit = "sink_controlled"`, "offset_commit = \"sink_controlled\"\non_failure = \"dead_letter\"\n\n[dead_letter]\nstream = \"dlq\"\ntopic = \"rejected\"",
		`output_format = "parquet"`, `output_format = "json_lines"`, "max_messages_per_file = 700", "max_messages_per_file = 50").Replace(s3Sink(srv, bucket))
	conns := filepath.Join(dir, "s3")
	writeFile(t, filepath.Join(conns, "sink.toml"), sink)
	// --create-topics: the dead-letter topic exists only if someone creates it.
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--create-topics", "--progress", "0"}
	lines := func() []string {
		var out []string
		for _, k := range srv.Keys(t, bucket) {
			out = append(out, strings.Split(strings.TrimSpace(string(srv.Get(t, bucket, k))), "\n")...)
		}
		return out
	}
	for round := range 2 {
		run := startFerry(t, fmt.Sprintf("run %d", round), dir, nil, args...)
		testkit.WaitFor(t, "199 messages in the bucket", func() bool { return len(lines()) >= 199 })
		testkit.WaitFor(t, "the sink running", func() bool { return strings.Contains(run.out.String(), `msg="sink running"`) })
		run.stop(15 * time.Second)
	}
	got := lines()
	if len(got) != 199 {
		t.Fatalf("%d lines in the bucket, want 199", len(got))
	}
	for i, l := range got {
		o := i
		if i >= 42 {
			o = i + 1
		}
		if !strings.HasPrefix(l, fmt.Sprintf(`{"offset":%d,`, o)) || !strings.HasSuffix(l, fmt.Sprintf(`"payload":{"o":%d}}`, o)) {
			t.Fatalf("line %d: %s; want offset %d", i, l, o)
		}
	}
	keys := srv.Keys(t, bucket)
	if want := "lake/s/t/"; len(keys) != 4 || !strings.HasPrefix(keys[0], want) || !strings.HasSuffix(keys[0], "00000-00000000000000000000-00000000000000000050.jsonl") {
		t.Fatalf("keys %v; want 4 objects of 50 messages, the first 0-50 (without 42)", keys)
	}
	dl := dumpTopic(t, dir, addr, "dlq", "rejected")
	if len(dl) != 1 || dl[0].Payload != "not json at all" {
		t.Fatalf("dead-letter topic holds %+v, want only the message that is not JSON", dl)
	}
}

// s3Group is the setup of the tests with two ferry processes in one consumer group: an S3
// bucket of the test's own (pyarrow to judge it), a ferry server with a 3-partition topic and
// a client on it, the messages per partition, and start, which starts one more ferry process
// (its own directory, the same sink file) named name.
func s3Group(t *testing.T) (srv *s3test.Server, bucket string, c *iggy.Client, perPartition uint64, start func(name string) *proc) {
	t.Helper()
	srv = s3test.Connect(t)
	s3test.Python(t)
	perPartition, _ = s3Scale(t)
	bucket = srv.Bucket(t)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c = dial(t, addr)
	createTopic(t, c, 3)
	start = func(name string) *proc {
		d := filepath.Join(dir, name)
		writeFile(t, filepath.Join(d, "s3", "sink.toml"), s3Sink(srv, bucket))
		return startFerry(t, name, d, nil, "run", "--config", remoteConfig(t, d, addr, filepath.Join(d, "s3")), "--progress", "0")
	}
	return srv, bucket, c, perPartition, start
}

// TestS3GroupTakeover: two ferry processes in one consumer group write to one bucket; one
// is SIGKILLed mid-stream and the other takes its partitions over from the bucket: each
// message in exactly one object, no two objects overlapping.
func TestS3GroupTakeover(t *testing.T) {
	srv, bucket, c, perPartition, start := s3Group(t)
	var wg sync.WaitGroup
	var prodErr error
	wg.Go(func() { prodErr = produceN(c, 3, perPartition, 150*time.Millisecond) })
	a := start("a")
	b := start("b")
	owns := regexp.MustCompile(`assignment changed.* assigned="?\[\d`)
	testkit.WaitFor(t, "both members owning partitions", func() bool {
		return owns.MatchString(a.out.String()) && owns.MatchString(b.out.String())
	})
	written := func() uint64 { _, n := s3Ranges(t, srv, bucket); return n }
	// An object of a partition a owns is in the bucket: b's takeover must find it there.
	testkit.WaitFor(t, "an object of a partition a owns", func() bool {
		ranges, _ := s3Ranges(t, srv, bucket)
		for p := range ownedPartitions(a.out.String()) {
			if len(ranges[p]) > 0 {
				return true
			}
		}
		return false
	})
	seeksBefore := strings.Count(b.out.String(), "partition starts where the sink says")
	a.kill()
	t.Logf("a killed with %d messages in the bucket", written())
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	testkit.WaitFor(t, "every message in the bucket", func() bool {
		if b.exited() {
			t.Fatalf("b exited: %v", b.err)
		}
		return written() >= 3*perPartition
	})
	b.stop(30 * time.Second)
	if strings.Count(b.out.String(), "partition starts where the sink says") <= seeksBefore {
		t.Fatalf("b took a's partitions over without reading where they stand from the bucket:\n%s", tail(b.out.String(), 30))
	}
	rows := checkExactlyOnce(t, srv, bucket, perPartition)
	t.Logf("%d rows in %d objects, 0 lost, 0 duplicated", rows, len(srv.Keys(t, bucket)))
}

// TestS3Rebalance: two live ferry processes in one consumer group hand partitions to each
// other while 3 partitions are produced: a owns all, b joins (the server moves a's surplus
// partitions once a has committed what it polled of them), then b stops and a takes them
// back. Neither process is killed, so both may hold a partition at once from their own
// point of view: every message must still be in exactly one object, no two overlapping.
func TestS3Rebalance(t *testing.T) {
	srv, bucket, c, perPartition, start := s3Group(t)
	written := func() uint64 { _, n := s3Ranges(t, srv, bucket); return n }
	var wg sync.WaitGroup
	var prodErr error
	wg.Go(func() { prodErr = produceN(c, 3, perPartition, 150*time.Millisecond) })
	a := start("a")
	testkit.WaitFor(t, "a writing", func() bool { return written() > 0 })
	b := start("b")
	owns := regexp.MustCompile(`assignment changed.* assigned="?\[\d`)
	testkit.WaitFor(t, "b owning partitions a owned", func() bool {
		if b.exited() || a.exited() {
			t.Fatalf("a process exited: a %v, b %v", a.err, b.err)
		}
		return owns.MatchString(b.out.String())
	})
	// b writes an object of a partition it took over before it leaves.
	moved := regexp.MustCompile(`assignment changed.* assigned="?\[([\d ]+)\]`).FindStringSubmatch(b.out.String())[1]
	objectsOf := func() (n int) {
		ranges, _ := s3Ranges(t, srv, bucket)
		for _, p := range strings.Fields(moved) {
			id, _ := strconv.ParseUint(p, 10, 32)
			n += len(ranges[id])
		}
		return n
	}
	before := objectsOf()
	testkit.WaitFor(t, "b writing partitions "+moved, func() bool { return objectsOf() > before })
	revokedFromA := strings.Count(a.out.String(), "revoked=[") - strings.Count(a.out.String(), "revoked=[]")
	b.stop(30 * time.Second)
	testkit.WaitFor(t, "a owning b's partitions again", func() bool {
		return len(regexp.MustCompile(`assignment changed.* assigned="?\[\d`).FindAllString(a.out.String(), -1)) >= 2
	})
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	testkit.WaitFor(t, "every message in the bucket", func() bool {
		if a.exited() {
			t.Fatalf("a exited: %v", a.err)
		}
		return written() >= 3*perPartition
	})
	a.stop(30 * time.Second)
	if revokedFromA == 0 {
		t.Fatalf("a never gave a partition up:\n%s", tail(a.out.String(), 30))
	}
	rows := checkExactlyOnce(t, srv, bucket, perPartition)
	t.Logf("%d rows in %d objects across two hand-overs, 0 lost, 0 duplicated", rows, len(srv.Keys(t, bucket)))
	for name, p := range map[string]*proc{"a": a, "b": b} {
		for _, l := range strings.Split(p.out.String(), "\n") {
			if strings.Contains(l, "assignment changed") || strings.Contains(l, "released") || strings.Contains(l, "already in the bucket") {
				t.Logf("%s: %s", name, l)
			}
		}
	}
}
