package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	conns := filepath.Join(dir, "s3")
	writeFile(t, filepath.Join(conns, "sink.toml"), s3Sink(srv, bucket))
	runs := killSoak{
		load: s3Load(perPartition), dir: dir, kills: kills,
		args: []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"},
		rng:  rand.New(rand.NewPCG(seed, 1)), jitter: 400 * time.Millisecond,
		written:  func() int64 { _, n := s3Ranges(t, srv, bucket); return int64(n) },
		restart:  func(t *testing.T) { srv.Restart(t, repoRoot) },
		restarts: restarts,
	}.run(t, c)
	run := runs.last
	testkit.WaitFor(t, "the last run's sink running", func() bool {
		return strings.Contains(run.out.String(), `msg="sink running"`)
	})
	run.stop(30 * time.Second)
	if runs.restartedUnder != nil && !strings.Contains(runs.restartedUnder.out.String(), "upload failed") {
		t.Fatalf("the run the S3 server restarted under never retried an upload:\n%s", tail(runs.restartedUnder.out.String(), 30))
	}
	for _, r := range runs.all {
		if strings.Contains(r.out.String(), srv.SecretKey) {
			t.Fatalf("%s logged the secret key", r.name)
		}
	}
	rows := checkExactlyOnce(t, srv, bucket, perPartition)
	t.Logf("%d kills, %d S3 restarts: %d rows in %d objects, 0 lost, 0 duplicated", kills, len(restarts), rows, len(srv.Keys(t, bucket)))
}

// s3Load is the S3 soaks' load: 3 partitions of perPartition messages, 100 a send, 150 ms
// between rounds.
func s3Load(perPartition uint64) soakLoad {
	return soakLoad{parts: 3, perPartition: perPartition, chunk: 100, pause: 150 * time.Millisecond}
}

// checkExactlyOnce judges the bucket of a 3-partition run of perPartition messages each:
// the objects' ranges of each partition contiguous from 0 to the end, none overlapping;
// pyarrow reads exactly 3 × perPartition rows, each (partition, offset) once with its own
// payload. It returns the number of rows.
func checkExactlyOnce(t *testing.T, srv *s3test.Server, bucket string, perPartition uint64) int {
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
			want := soakPayload(r.Partition, r.Offset)
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
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
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

// TestS3GroupTakeover: two ferry processes in one consumer group write to one bucket; one
// is SIGKILLed mid-stream and the other takes its partitions over from the bucket: each
// message in exactly one object, no two objects overlapping.
func TestS3GroupTakeover(t *testing.T) {
	srv := s3test.Connect(t)
	s3test.Python(t)
	perPartition, _ := s3Scale(t)
	bucket := srv.Bucket(t)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	start := func(name string) *proc {
		d := filepath.Join(dir, name)
		writeFile(t, filepath.Join(d, "s3", "sink.toml"), s3Sink(srv, bucket))
		return startFerry(t, name, d, nil, "run", "--config", remoteConfig(t, d, addr, filepath.Join(d, "s3")), "--progress", "0")
	}
	groupTakeover(t, c, s3Load(perPartition), start, func() int64 { _, n := s3Ranges(t, srv, bucket); return int64(n) })
	rows := checkExactlyOnce(t, srv, bucket, perPartition)
	t.Logf("%d rows in %d objects, 0 lost, 0 duplicated", rows, len(srv.Keys(t, bucket)))
}
