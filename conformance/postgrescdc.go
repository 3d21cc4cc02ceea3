package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/cdccheck"
	"github.com/ferryio/ferry/internal/pgtest"
)

// postgres-cdc runs the PostgreSQL CDC source (builtin:postgres as a source) on three
// tables of its own while a writer commits transactions of 1–5 changes and the runtime is
// SIGKILLed --soak times at seeded moments, then judges from the topic alone: read back in
// commit order (the pg_commit_lsn and pg_txn_index headers), it must hold exactly the
// changes the writer committed, each once, and each partition's positions must grow.

const cdcPartitions = 3

func runPostgresCDC(ctx context.Context, r *Runner, _ string) Result {
	kills := max(1, r.cfg.Soak)
	txns := 200 * kills
	expected := fmt.Sprintf("%d SIGKILLs while a writer commits %d transactions: every committed change in the topic once, in commit order (exactly-once CDC)", kills, txns)
	if r.cfg.Postgres == "" {
		return unsupported(expected, errors.New("no PostgreSQL database given (--postgres URL)"))
	}
	db, err := pgxpool.New(ctx, r.cfg.Postgres)
	if err != nil {
		return broken(expected, fmt.Errorf("PostgreSQL (--postgres): %w", err))
	}
	defer db.Close()
	var level string
	if err := db.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return broken(expected, fmt.Errorf("PostgreSQL (--postgres): %w", err))
	}
	if level != "logical" {
		return unsupported(expected, fmt.Errorf("the database's wal_level is %s; CDC needs logical", level))
	}
	r.seq++
	name := fmt.Sprintf("pgcdc%d_%d", r.seq, time.Now().UnixNano()%1_000_000)
	tables := []string{name + "_a", name + "_b", name + "_c"}
	logTable := name + "_log"
	defer func() {
		if r.cfg.Keep {
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = pgtest.DropSlot(dctx, db, name) // a killed runtime's walsender releases the slot a moment later
		_, _ = db.Exec(dctx, "DROP PUBLICATION IF EXISTS "+name+"_pub")
		_, _ = db.Exec(dctx, "DROP TABLE IF EXISTS "+strings.Join(append(slices.Clone(tables), logTable), ", "))
	}()
	for _, t := range tables {
		if _, err := db.Exec(ctx, "CREATE TABLE "+t+" (id int PRIMARY KEY, v int NOT NULL)"); err != nil {
			return broken(expected, fmt.Errorf("create table %s: %w", t, err))
		}
	}
	if _, err := db.Exec(ctx, "CREATE TABLE "+logTable+" (n int PRIMARY KEY)"); err != nil {
		return broken(expected, fmt.Errorf("create table %s: %w", logTable, err))
	}
	stream := "conformance-" + name
	if err := r.admin.EnsureTopic(ctx, stream, "t", cdcPartitions); err != nil {
		return broken(expected, fmt.Errorf("create topic: %w", err))
	}
	dir := filepath.Join(r.dir, name)
	state := filepath.Join(dir, "state")
	cdir := filepath.Join(dir, "connectors")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return broken(expected, err)
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return broken(expected, err)
	}
	cfgPath, err := r.writeRuntimeConfig(dir, state, cdir, r.addr, "")
	if err != nil {
		return broken(expected, err)
	}
	conn := cdccheck.Source{Key: "pgcdc", Name: "conformance postgres cdc", Stream: stream, Topic: "t",
		URL: r.cfg.Postgres, Slot: name, Tables: tables}.File()
	if err := os.WriteFile(filepath.Join(cdir, "pgcdc.toml"), []byte(conn), 0o644); err != nil {
		return broken(expected, err)
	}
	logPath := filepath.Join(dir, "runtime.log")
	p, err := r.startRuntime(cfgPath, logPath)
	if err != nil {
		return broken(expected, err)
	}
	defer func() { p.kill() }()
	slotUp := func() bool {
		var n int
		_ = db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&n)
		return n == 1 || p.exited()
	}
	if err := r.wait(ctx, "the source to create its replication slot", slotUp); err != nil || p.exited() {
		return unsupported(expected, fmt.Errorf("the runtime did not open builtin:postgres as a source: %w; runtime log: %s", exitedOr(err), oneLine(p.tail(5))))
	}
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 1))
	w := &cdccheck.Writer{DB: db, Tables: tables, Log: logTable, Rand: rand.New(rand.NewPCG(uint64(r.cfg.Seed), 2))}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	werr := make(chan error, 1)
	go func() {
		for n := range txns {
			if err := w.Txn(wctx, n); err != nil {
				werr <- err
				return
			}
			if n%20 == 19 {
				time.Sleep(20 * time.Millisecond) // spread the writes over the kills
			}
		}
		werr <- nil
	}()
	count := func() uint64 { return topicMessages(ctx, r, stream) }
	share := uint64(txns * 3 / (kills + 1))
	for k := 1; k <= kills; k++ {
		before := count()
		if err := r.wait(ctx, fmt.Sprintf("the source sending before kill %d", k), func() bool {
			return count() > before+share/2 || p.exited()
		}); err != nil || p.exited() {
			return broken(expected, fmt.Errorf("before kill %d: %w; runtime log: %s", k, exitedOr(err), oneLine(p.tail(5))))
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		p.kill()
		if p, err = r.startRuntime(cfgPath, logPath); err != nil {
			return broken(expected, err)
		}
	}
	if err := <-werr; err != nil {
		return broken(expected, fmt.Errorf("writer: %w", err))
	}
	want := uint64(len(w.Want()))
	if err := r.wait(ctx, "every committed change in the topic", func() bool { return count() >= want || p.exited() }); err != nil || p.exited() {
		return broken(expected, fmt.Errorf("%w; runtime log: %s", exitedOr(err), oneLine(p.tail(5))))
	}
	_ = p.term(15 * time.Second)
	got, err := cdccheck.ReadTopic(ctx, r.admin, stream, "t", cdcPartitions)
	if err != nil {
		return broken(expected, err)
	}
	j := cdccheck.Judge(got, w.Want())
	observed := fmt.Sprintf("%d kills, %d transactions, %d changes committed; topic %d messages: lost %d, duplicated %d, out of order %d",
		kills, txns, len(w.Want()), len(got), j.Lost, j.Duplicated, j.Disorder)
	v := Fail
	if j.OK() && len(got) == len(w.Want()) {
		v = Pass
	} else {
		observed += "; first difference: " + j.First
	}
	return Result{Expected: expected, Observed: observed, Verdict: v, Lost: j.Lost, Duplicated: j.Duplicated, Kills: kills}
}

// exitedOr is err, or "the runtime exited" when a wait ended because the runtime did.
func exitedOr(err error) error {
	if err == nil {
		return errors.New("the runtime exited")
	}
	return err
}

func topicMessages(ctx context.Context, r *Runner, stream string) uint64 {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	td, err := r.admin.GetTopic(qctx, iggy.Name(stream), iggy.Name("t"))
	if err != nil {
		return 0
	}
	var n uint64
	for _, p := range td.Partitions {
		n += p.MessagesCount
	}
	return n
}
