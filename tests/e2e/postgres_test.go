package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
)

// Parameters of the exactly-once PostgreSQL tests.
const (
	pgPartitions   = 3
	pgPerPartition = 30000
	pgChunk        = 500 // messages per send
	pgKills        = 10
	pgBatch        = 1000 // the sink's batch_length
)

// pgDB connects to FERRY_POSTGRES_URL without holding off restarts: this package's tests
// restart the cluster (pgRestart).
func pgDB(t testing.TB) (*pgxpool.Pool, string) { return pgtest.ConnectRestarting(t) }

// pgCount runs a count query, retrying while PostgreSQL restarts; -1 if it does not answer
// within testkit.Patience.
func pgCount(db *pgxpool.Pool, q string) int64 {
	n := int64(-1)
	_ = testkit.Eventually("PostgreSQL to answer "+q, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return db.QueryRow(ctx, q).Scan(&n) == nil
	})
	return n
}

// pgRestart restarts the test cluster with scripts/postgres.sh (needs FERRY_POSTGRES_DIR).
func pgRestart(t *testing.T) {
	t.Helper()
	if os.Getenv("FERRY_POSTGRES_DIR") == "" {
		t.Fatal("FERRY_POSTGRES_DIR is not set: the PostgreSQL restart test needs the cluster of scripts/postgres.sh")
	}
	// The other packages' PostgreSQL tests hold off restarts while they run (pgtest.Connect);
	// go test may run them at the same time, in other processes.
	defer pgtest.LockRestarts(t)()
	out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts", "postgres.sh"), "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("postgres restart: %v\n%s", err, out)
	}
}

// pgSink is the connector file of the PostgreSQL sink under test.
func pgSink(key, url, table, onFailure string) string {
	dl := ""
	if onFailure == "dead_letter" {
		dl = "\n[dead_letter]\nstream = \"dlq\"\ntopic = \"rejected\"\n"
	}
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "postgres"
path = "builtin:postgres"
offset_commit = "sink_controlled"
on_failure = %q
%s
[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = %d
poll_interval = "5ms"

[retry]
max_retries = 1
initial_backoff = "10ms"

[plugin_config]
connection_string = %q
target_table = %q
offsets_table = %q
auto_create_table = true
payload_format = "json"
`, key, onFailure, dl, pgBatch, url, table, table+"_offsets")
}

// createTopic creates stream s, topic t with n partitions on the server at addr.
func createTopic(t testing.TB, c *iggy.Client, n uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, iggy.Name("s"), "t", n); err != nil {
		t.Fatal(err)
	}
}

func dial(t testing.TB, addr string) *iggy.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, addr, iggy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// pgGroupSink is pgSink with group commit: max_in_flight 3, each partition's transaction
// open for flush (and up to a million rows), batches logged at info (verbose_logging).
func pgGroupSink(key, url, table, flush string) string {
	s := strings.Replace(pgSink(key, url, table, "stop"), "\n[[streams]]", "max_in_flight = 3\n\n[[streams]]", 1)
	// These tests need groups open across batches: a batch that catches up with the
	// producer would commit its group at once (connectors/postgres TestGroupCommitsWhenCaughtUp).
	return s + fmt.Sprintf("flush_interval = %q\nmax_rows_per_transaction = 1000000\ncommit_when_caught_up = false\nverbose_logging = true\n", flush)
}

// groupBatches finds the batch count of each "group written" line.
var groupBatches = regexp.MustCompile(`msg="group written".* batches=(\d+)`)

// openGroup is a query that counts the transactions holding rows of table not yet
// committed (a group in progress).
func openGroup(table string) string {
	return `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE l.relation = to_regclass('` + table + `') AND l.mode = 'RowExclusiveLock' AND a.xact_start IS NOT NULL AND a.pid <> pg_backend_pid()`
}

// exactlyOnceUnderKills runs the sink in ferry processes that are SIGKILLed pgKills times
// at random moments (seeded; the seed is logged) while the partitions are produced, with
// PostgreSQL restarted at the kills listed in pgRestarts, then lets it run to the end:
// every (partition, offset) must be in the table exactly once.
func exactlyOnceUnderKills(t *testing.T, pgRestarts map[int]bool, group bool) {
	db, url := pgDB(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	table := fmt.Sprintf("e2e_kills_%d", seed%1_000_000)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets")
	})
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, pgPartitions)
	conns := filepath.Join(dir, "pg")
	sink := pgSink("pg", url, table, "stop")
	if group {
		sink = pgGroupSink("pg", url, table, "1s")
	}
	writeFile(t, filepath.Join(conns, "sink.toml"), sink)
	inGroup := 0 // kills that landed with a group open
	soak := killSoak{
		load: pgLoad(200 * time.Millisecond), dir: dir, kills: pgKills,
		args: []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"},
		rng:  rand.New(rand.NewPCG(seed, 1)), jitter: 300 * time.Millisecond,
		written:  func() int64 { return pgCount(db, "SELECT coalesce(sum(last_offset + 1), 0) FROM "+table+"_offsets") },
		restart:  pgRestart,
		restarts: pgRestarts,
	}
	if group {
		soak.ready = func() bool { return pgCount(db, openGroup(table)) > 0 }
		soak.atKill = func() {
			if pgCount(db, openGroup(table)) > 0 {
				inGroup++
			}
		}
	}
	runs := soak.run(t, c)
	// A run started after everything was written still takes its signal handler first.
	testkit.WaitFor(t, "the last run consuming", func() bool { return strings.Contains(runs.last.out.String(), "sink running") })
	runs.last.stop(15 * time.Second)
	// The restart lands in Open (the sink retries its setup) or under a batch (the sink
	// steers the lost connection to the runtime, which reconnects it, uncounted:
	// max_retries is 1 here, and delivers the batch again).
	if r := runs.restartedUnder; r != nil && !strings.Contains(r.out.String(), "consume: not connected; reconnecting") &&
		!strings.Contains(r.out.String(), "postgres sink: prepare tables failed; retrying") {
		t.Fatalf("the run PostgreSQL restarted under never retried:\n%s", tail(r.out.String(), 30))
	}
	for _, r := range runs.all {
		if strings.Contains(r.out.String(), url) {
			t.Fatalf("%s logged the connection string", r.name)
		}
	}
	total := pgLoad(0).total()
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	matching := pgCount(db, "SELECT count(*) FROM "+table+" WHERE (payload->>'p')::int = iggy_partition_id AND (payload->>'o')::bigint = iggy_offset")
	if rows != total || distinct != total || matching != total {
		t.Fatalf("rows %d, distinct (partition, offset) %d, payload matching its offset %d; want %d each", rows, distinct, matching, total)
	}
	// A group may commit between the last look and the kill (a second's group, a look of
	// a millisecond): most kills, not all, are seen to land in one.
	if group && inGroup < pgKills/2 {
		t.Fatalf("%d of %d kills landed during a group; want at least %d", inGroup, pgKills, pgKills/2)
	}
	if group {
		spanned := 0 // groups that held more than one batch
		for _, r := range runs.all {
			for _, m := range groupBatches.FindAllStringSubmatch(r.out.String(), -1) {
				if n, _ := strconv.Atoi(m[1]); n > 1 {
					spanned++
				}
			}
		}
		if spanned == 0 {
			t.Fatal("no group held more than one batch")
		}
	}
	t.Logf("%d kills (%d seen in a group), %d PostgreSQL restarts: %d rows, %d distinct, 0 lost, 0 duplicated", pgKills, inGroup, len(pgRestarts), rows, distinct)
}

// pgLoad is the PostgreSQL soaks' load, the producer pausing pause between rounds.
func pgLoad(pause time.Duration) soakLoad {
	return soakLoad{parts: pgPartitions, perPartition: pgPerPartition, chunk: pgChunk, pause: pause}
}

// TestPostgresExactlyOnceUnderSIGKILL: 10 SIGKILLs while 3 × 30000 messages are produced.
func TestPostgresExactlyOnceUnderSIGKILL(t *testing.T) {
	exactlyOnceUnderKills(t, nil, false)
}

// TestPostgresGroupCommitUnderSIGKILL: the same with group commit (a transaction per
// partition open for a second across batches, max_in_flight 3), each of the 10 SIGKILLs
// landing while a group holds uncommitted rows: 0 lost, 0 duplicated.
func TestPostgresGroupCommitUnderSIGKILL(t *testing.T) {
	exactlyOnceUnderKills(t, nil, true)
}

// TestPostgresExactlyOnceUnderSIGKILLAndRestarts: the same, with PostgreSQL restarted twice
// mid-stream: once while no runtime runs (after kill 3) and once under a running one.
func TestPostgresExactlyOnceUnderSIGKILLAndRestarts(t *testing.T) {
	exactlyOnceUnderKills(t, map[int]bool{3: true, 0: true}, false)
}

// TestPostgresGroupTakeover: two ferry processes in one consumer group write to one table;
// one is SIGKILLed mid-stream and the other takes its partitions over from the offsets in
// the database: 0 lost, 0 duplicated.
func TestPostgresGroupTakeover(t *testing.T) {
	db, url := pgDB(t)
	table := fmt.Sprintf("e2e_group_%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets")
	})
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, pgPartitions)
	start := func(name string) *proc {
		d := filepath.Join(dir, name)
		writeFile(t, filepath.Join(d, "pg", "sink.toml"), pgSink("pg", url, table, "stop"))
		return startFerry(t, name, d, nil, "run", "--config", remoteConfig(t, d, addr, filepath.Join(d, "pg")), "--progress", "0")
	}
	groupTakeover(t, c, pgLoad(60*time.Millisecond), start, func() int64 {
		return pgCount(db, "SELECT coalesce(sum(last_offset + 1), 0) FROM "+table+"_offsets")
	}, func() bool {
		return pgCount(db, "SELECT count(*) FROM "+table+"_offsets") == pgPartitions
	})
	total := pgLoad(0).total()
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	if rows != total || distinct != total {
		t.Fatalf("rows %d, distinct %d; want %d", rows, distinct, total)
	}
}

// TestPostgresPoisonRowToDeadLetter: one message of 200 is not JSON (payload_format json):
// under on_failure = dead_letter it alone goes to the dead-letter topic, with ferry-stage
// consume and its source offset, and the 199 others are in the table.
func TestPostgresPoisonRowToDeadLetter(t *testing.T) {
	db, url := pgDB(t)
	table := fmt.Sprintf("e2e_poison_%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets")
	})
	dir := t.TempDir()
	addr := poisonedTopic(t, dir)
	// schema raw: the runtime hands the payload over as is (the database rejects it).
	sink := strings.Replace(pgSink("pg", url, table, "dead_letter"), `schema = "json"`, `schema = "raw"`, 1)
	writeFile(t, filepath.Join(dir, "pg", "sink.toml"), sink)
	// --create-topics: the dead-letter topic exists only if someone creates it.
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, filepath.Join(dir, "pg")), "--create-topics", "--progress", "0")
	testkit.WaitFor(t, "the batch written", func() bool {
		return pgCount(db, "SELECT coalesce(max(last_offset), -1) FROM "+table+"_offsets") == 199
	})
	run.stop(15 * time.Second)
	if n := pgCount(db, "SELECT count(*) FROM "+table+" WHERE iggy_offset <> 42"); n != 199 {
		t.Fatalf("rows other than offset 42 = %d, want 199", n)
	}
	if n := pgCount(db, "SELECT count(*) FROM "+table); n != 199 {
		t.Fatalf("rows = %d, want 199", n)
	}
	dumpTopic(t, dir, addr, "dlq", "rejected")
	b, err := os.ReadFile(filepath.Join(dir, "dump.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
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
	if hs["ferry-stage"] != "consume" || hs["ferry-source-topic"] != "t" || !strings.Contains(hs["ferry-error"], "22P02") {
		t.Fatalf("dead-letter headers = %v; want ferry-stage consume, source topic t, ferry-error with SQLSTATE 22P02", hs)
	}
	if !strings.Contains(string(lines[0]), "not json at all") && !strings.Contains(rec.Payload, "bm90IGpzb24") {
		t.Fatalf("dead-letter payload = %q, want the rejected message's", rec.Payload)
	}
}

// TestPostgresExample runs docs/postgres.md's example as written (examples/postgres,
// the connection string from the environment override) until it is idle: the 100,000
// random events are in iggy_messages, once each.
func TestPostgresExample(t *testing.T) {
	db, url := pgDB(t)
	drop := func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS iggy_messages, ferry_offsets") }
	drop()
	t.Cleanup(drop)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(repoRoot, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	run := startFerry(t, "example", dir, []string{"IGGY_CONNECTORS_SINK_PG_PLUGIN_CONFIG_CONNECTION_STRING=" + url},
		"run", "--config", "examples/postgres/config.toml", "--embedded", "--embedded-addr", "127.0.0.1:0",
		"--progress", "0", "--exit-when-idle", "2s")
	run.wait(90 * time.Second)
	rows := pgCount(db, "SELECT count(*) FROM iggy_messages")
	distinct := pgCount(db, "SELECT count(DISTINCT iggy_offset) FROM iggy_messages WHERE iggy_stream = 'pg' AND iggy_topic = 'events'")
	if rows != 100000 || distinct != 100000 {
		t.Fatalf("iggy_messages: %d rows, %d distinct offsets; want 100000 each\n%s", rows, distinct, tail(run.out.String(), 20))
	}
	if strings.Contains(run.out.String(), url) {
		t.Fatal("the example run logged the connection string")
	}
}

// TestPostgresGroupCommitRevokeMidGroup: a runs group commit (groups open for 2 s) and
// owns all three partitions; b joins while a holds open groups, so partitions are revoked
// from a mid-group. a commits those groups (the offset goes to Iggy during the drain) and
// b starts each partition after what the table holds: 0 lost, 0 duplicated.
func TestPostgresGroupCommitRevokeMidGroup(t *testing.T) {
	db, url := pgDB(t)
	table := fmt.Sprintf("e2e_revoke_%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets")
	})
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, pgPartitions)
	start := func(name string) *proc {
		d := filepath.Join(dir, name)
		writeFile(t, filepath.Join(d, "pg", "sink.toml"), pgGroupSink("pg", url, table, "2s"))
		return startFerry(t, name, d, nil, "run", "--config", remoteConfig(t, d, addr, filepath.Join(d, "pg")), "--progress", "0")
	}
	var wg sync.WaitGroup
	var prodErr error
	wg.Go(func() { prodErr = pgLoad(60 * time.Millisecond).produce(c) })
	a := start("a")
	testkit.WaitFor(t, "a holding an open group", func() bool { return pgCount(db, openGroup(table)) > 0 })
	b := start("b")
	revoked := regexp.MustCompile(`msg="assignment changed".* revoked="?\[(\d+)`)
	var m []string
	testkit.WaitFor(t, "a partition revoked from a", func() bool {
		m = revoked.FindStringSubmatch(a.out.String())
		return m != nil
	})
	at := strings.Index(a.out.String(), m[0])
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	total := int64(pgPartitions * pgPerPartition)
	testkit.WaitFor(t, "every message in the table", func() bool {
		if a.exited() || b.exited() {
			t.Fatalf("a or b exited: %v, %v", a.err, b.err)
		}
		return pgCount(db, "SELECT coalesce(sum(last_offset + 1), 0) FROM "+table+"_offsets") == total
	})
	a.stop(15 * time.Second)
	b.stop(15 * time.Second)
	// a wrote the revoked partition's open group after the revocation.
	if !regexp.MustCompile(`msg="group written".* partition=` + m[1] + ` `).MatchString(a.out.String()[at:]) {
		t.Fatalf("a wrote no group of partition %s after it was revoked:\n%s", m[1], tail(a.out.String()[at:], 30))
	}
	if !regexp.MustCompile(`msg="group written".* partition=` + m[1] + ` `).MatchString(b.out.String()) {
		t.Fatalf("b never wrote partition %s:\n%s", m[1], tail(b.out.String(), 30))
	}
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	matching := pgCount(db, "SELECT count(*) FROM "+table+" WHERE (payload->>'p')::int = iggy_partition_id AND (payload->>'o')::bigint = iggy_offset")
	if rows != total || distinct != total || matching != total {
		t.Fatalf("rows %d, distinct %d, matching %d; want %d each", rows, distinct, matching, total)
	}
}

// TestPostgresGroupCommitUnderBackpressure: commit.max_uncommitted (2000) is below what a
// group would hold (a second's worth, up to a million rows), so each partition pauses with
// its group open; the group's timer still commits it, the pause lifts, and every message
// lands once. No group holds more than max_uncommitted plus the one batch polled ahead.
func TestPostgresGroupCommitUnderBackpressure(t *testing.T) {
	db, url := pgDB(t)
	table := fmt.Sprintf("e2e_backpressure_%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets")
	})
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, pgPartitions)
	if err := pgLoad(0).produce(c); err != nil {
		t.Fatal(err)
	}
	sink := strings.Replace(pgGroupSink("pg", url, table, "300ms"), "[plugin_config]", "[commit]\nmax_uncommitted = 2000\n\n[plugin_config]", 1)
	writeFile(t, filepath.Join(dir, "pg", "sink.toml"), sink)
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, filepath.Join(dir, "pg")), "--progress", "0")
	total := int64(pgPartitions * pgPerPartition)
	testkit.WaitFor(t, "every message in the table", func() bool {
		if run.exited() {
			t.Fatalf("run exited: %v", run.err)
		}
		return pgCount(db, "SELECT coalesce(sum(last_offset + 1), 0) FROM "+table+"_offsets") == total
	})
	run.stop(15 * time.Second)
	groupRows := regexp.MustCompile(`msg="group written".* rows=(\d+)`)
	groups := groupRows.FindAllStringSubmatch(run.out.String(), -1)
	if len(groups) == 0 {
		t.Fatalf("no group written:\n%s", tail(run.out.String(), 30))
	}
	for _, m := range groups {
		if n, _ := strconv.Atoi(m[1]); n > 2000+pgBatch {
			t.Fatalf("a group held %d rows, past max_uncommitted (2000) and one batch", n)
		}
	}
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	if rows != total || distinct != total {
		t.Fatalf("rows %d, distinct %d; want %d each", rows, distinct, total)
	}
	t.Logf("%d groups, each at most %d rows", len(groups), 2000+pgBatch)
}
