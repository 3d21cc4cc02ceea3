package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// TestPostgresAfterPollingFirstWriteKilled is the loss the conformance suite's
// postgres-soak found once under after_polling (47 rows): the exactly-once PostgreSQL sink
// resumes a partition that has no row in its offsets table yet at the group's offset in
// Iggy, and the server had stored that offset with the poll, before the write. Here the
// target table is locked before anything is written, 2 × 100 messages are produced, and
// the runtime is SIGKILLed while its first write waits on the lock (its session is then
// ended, as a crash of its machine would): the restarted runtime must write all 200, once.
// Before, it resumed after what the dead one had polled and wrote none.
func TestPostgresAfterPollingFirstWriteKilled(t *testing.T) {
	db, url := pgDB(t)
	table := fmt.Sprintf("e2e_first_write_%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets") })
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 2)
	conns := filepath.Join(dir, "pg")
	sink := strings.Replace(pgSink("pg", url, table, "stop"), `offset_commit = "sink_controlled"`, `offset_commit = "after_polling"`, 1)
	writeFile(t, filepath.Join(conns, "sink.toml"), sink)
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
	run := startFerry(t, "run 0", dir, nil, args...)
	testkit.WaitFor(t, "the sink running (its tables created)", func() bool {
		if run.exited() {
			t.Fatalf("run 0 exited: %v", run.err)
		}
		return strings.Contains(run.out.String(), "sink running")
	})
	ctx := context.Background()
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, "LOCK TABLE "+table+" IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	if err := produceN(c, 2, 100, 0); err != nil {
		t.Fatal(err)
	}
	waiting := "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = '" + table + "' AND NOT l.granted"
	testkit.WaitFor(t, "the sink's first write waiting on the lock", func() bool { return pgCount(db, waiting) > 0 })
	run.kill()
	if _, err := db.Exec(ctx, "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = $1 AND NOT l.granted", table); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the dead runtime's write ended", func() bool { return pgCount(db, waiting) == 0 })
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pgCount(db, "SELECT count(*) FROM "+table); n != 0 {
		t.Fatalf("%d rows after the kill, want 0 (the write died with the process)", n)
	}

	run = startFerry(t, "run 1", dir, nil, args...)
	if err := testkit.Eventually("200 rows", func() bool {
		if run.exited() {
			t.Fatalf("run 1 exited: %v", run.err)
		}
		return pgCount(db, "SELECT count(*) FROM "+table) >= 200
	}); err != nil {
		o, oerr := offsets(t, addr, "s", "t", "iggy-connect-sink-pg")
		t.Fatalf("%v: %d rows; the group's offsets %+v (%v)", err, pgCount(db, "SELECT count(*) FROM "+table), o, oerr)
	}
	run.stop(15 * time.Second)
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	matching := pgCount(db, "SELECT count(*) FROM "+table+" WHERE (payload->>'p')::int = iggy_partition_id AND (payload->>'o')::bigint = iggy_offset")
	if rows != 200 || distinct != 200 || matching != 200 {
		t.Fatalf("rows %d, distinct (partition, offset) %d, payload matching its offset %d; want 200 each", rows, distinct, matching)
	}
}
