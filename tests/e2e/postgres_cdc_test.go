package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/cdccheck"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
)

// cdcRun is the size of one CDC crash run. CI runs cdcSmall; FERRY_CDC_SOAK=1 runs the
// full size.
type cdcRun struct {
	txns, kills int
	restarts    map[int]bool // after which kills PostgreSQL is restarted
}

var (
	cdcSmall = cdcRun{txns: 3000, kills: 5, restarts: map[int]bool{3: true}}
	cdcSoak  = cdcRun{txns: 30000, kills: 10, restarts: map[int]bool{3: true, 7: true}}
)

const cdcPartitions = 3

// cdcSource is the connector file of the CDC source under test: max_in_flight 4, so up to
// four batches are read ahead of their acknowledgement (sent and acknowledged in order).
func cdcSource(url, slot string, tables []string) string {
	return cdccheck.Source{Key: "cdc", Name: "pg cdc", Stream: "s", Topic: "cdc", URL: url, Slot: slot, Tables: tables,
		Top: "max_in_flight = 4\n"}.File()
}

// cdcExactlyOnce runs the CDC source in ferry processes SIGKILLed size.kills times at
// seeded random moments while the writer commits size.txns transactions, PostgreSQL
// restarted after the kills size.restarts names, then checks that the topic holds every
// committed change exactly once, in commit order, and that the slot is confirmed up to
// the server's WAL while idle.
func cdcExactlyOnce(t *testing.T, size cdcRun) {
	db, url := pgDB(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	slot := fmt.Sprintf("e2e_cdc_%d", seed%1_000_000)
	tables := []string{slot + "_a", slot + "_b", slot + "_c"}
	ctx := context.Background()
	for _, tb := range tables {
		if _, err := db.Exec(ctx, "CREATE TABLE "+tb+" (id int PRIMARY KEY, v int NOT NULL)"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, "CREATE TABLE "+tables[0]+"_log (n int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(ctx, testkit.Patience)
		defer cancel()
		if err := pgtest.DropSlot(dctx, db, slot); err != nil {
			t.Log(err)
		}
		_, _ = db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+slot+"_pub")
		_, _ = db.Exec(ctx, "DROP TABLE IF EXISTS "+strings.Join(tables, ", ")+", "+tables[0]+"_log")
	})
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctxT, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.CreateStream(ctxT, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctxT, iggy.Name("s"), "cdc", cdcPartitions); err != nil {
		t.Fatal(err)
	}
	cancel()
	conns := filepath.Join(dir, "pg")
	writeFile(t, filepath.Join(conns, "cdc.toml"), cdcSource(url, slot, tables))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}

	run := startFerry(t, "run 0", dir, nil, args...)
	// The slot exists once the first run opened the source: changes from here on are captured.
	testkit.WaitFor(t, "the replication slot", func() bool {
		return pgCount(db, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"'") == 1
	})
	w := &cdccheck.Writer{DB: db, Tables: tables, Log: tables[0] + "_log", Rand: rand.New(rand.NewPCG(seed, 3))}
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		for n := range size.txns {
			if writeErr = w.Txn(ctx, n); writeErr != nil {
				return
			}
			if n%20 == 19 {
				time.Sleep(20 * time.Millisecond) // spread the writes over the kills
			}
		}
	})
	var runs []*proc
	// About 3 changes per transaction: each run sends its share of them before its kill,
	// so the kills spread over the whole write.
	share := uint64(size.txns * 3 / (size.kills + 1))
	for i := 1; i <= size.kills; i++ {
		before := topicMessages(c, "cdc")
		testkit.WaitFor(t, fmt.Sprintf("run %d sending", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return topicMessages(c, "cdc") > before+share/2
		})
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		run.kill()
		if size.restarts[i] {
			pgRestart(t)
		}
		t.Logf("kill %d: %d messages in the topic", i, topicMessages(c, "cdc"))
		runs = append(runs, run)
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	want := uint64(len(w.Want()))
	if err := testkit.Eventually("every committed change in the topic", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return topicMessages(c, "cdc") >= want
	}); err != nil {
		// Say whether changes are missing for good or the source stalled, and where: a
		// failure that is only "timed out" cannot be told from a slow machine.
		ctxR, cancelR := context.WithTimeout(ctx, 60*time.Second)
		got, rerr := cdccheck.ReadTopic(ctxR, c, "s", "cdc", cdcPartitions)
		cancelR()
		v := cdccheck.Judge(got, w.Want())
		t.Fatalf("%v: %d of %d changes in the topic (read back: %v): lost %d, duplicated %d, out of order %d; first difference: %s",
			err, len(got), want, rerr, v.Lost, v.Duplicated, v.Disorder, v.First)
	}

	// Idle: WAL written to a table outside the publication is confirmed too.
	for i := range 3 {
		if _, err := db.Exec(ctx, "INSERT INTO "+tables[0]+"_log VALUES ($1)", -1-i); err != nil {
			t.Fatal(err)
		}
	}
	var target string
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "confirmed_flush_lsn reaching "+target+" while idle", func() bool {
		return pgCount(db, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"' AND confirmed_flush_lsn >= '"+target+"'") == 1
	})
	run.stop(15 * time.Second)
	for _, r := range append(runs, run) {
		if strings.Contains(r.out.String(), url) {
			t.Fatalf("%s logged the connection string", r.name)
		}
	}

	ctxR, cancelR := context.WithTimeout(ctx, 60*time.Second)
	got, err := cdccheck.ReadTopic(ctxR, c, "s", "cdc", cdcPartitions)
	cancelR()
	if err != nil {
		t.Fatal(err)
	}
	// In commit order, the topic holds exactly the writer's changes, and each partition's
	// positions strictly grow (one row's changes keep their order).
	if v := cdccheck.Judge(got, w.Want()); !v.OK() || len(got) != len(w.Want()) {
		t.Fatalf("%d changes committed, %d in the topic: lost %d, duplicated %d, out of order %d; first difference: %s",
			len(w.Want()), len(got), v.Lost, v.Duplicated, v.Disorder, v.First)
	}
	skipped := 0
	for _, r := range append(runs, run) {
		skipped += strings.Count(r.out.String(), "Iggy holds changes past the saved state")
	}
	t.Logf("%d transactions, %d changes, %d kills, %d PostgreSQL restarts: %d messages, 0 lost, 0 duplicated; %d partitions read back past the saved state at open",
		size.txns, len(w.Want()), size.kills, len(size.restarts), len(got), skipped)
}

// TestPostgresCDCExactlyOnceUnderSIGKILL: CI's size; FERRY_CDC_SOAK=1 runs 30,000
// transactions, 10 kills and 2 PostgreSQL restarts.
func TestPostgresCDCExactlyOnceUnderSIGKILL(t *testing.T) {
	size := cdcSmall
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_CDC_SOAK")); v {
		size = cdcSoak
	}
	cdcExactlyOnce(t, size)
}
