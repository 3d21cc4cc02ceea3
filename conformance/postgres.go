package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgres-soak runs a PostgreSQL sink (Config.PostgresPlugin, default Ferry's
// builtin:postgres) into a table of its own while the runtime is SIGKILLed Config.Soak
// times, and judges from the table only: one row per produced (partition, offset). The
// suite creates the table in the official sink's layout without its primary key on id, so
// the table accepts a second row of a message: exactly once has to come from the sink.
//
// The kills cycle through three moments, two of them forced rather than hoped for:
//   - a random (seeded) moment while data flows;
//   - blocked write: the suite holds an EXCLUSIVE lock on the table until the sink's write
//     waits on it, kills then and ends the waiting sessions before it releases the lock
//     (else an autocommit INSERT of the dead process still lands): the write dies with the
//     process (under
//     after_polling the poll already stored the batch's offset, so a sink that trusts
//     Iggy's offset loses the batch);
//   - held store: the runtime's Iggy connections go through a storeGate, which holds its
//     next StoreConsumerOffset request; in the modes that store after delivery the batch is
//     in the table by then, so at the kill the table has rows the group's stored offset
//     does not cover (a sink that trusts Iggy's offset writes them again). Under
//     after_polling the poll stores, and this kill is a random one.

// pgKillKinds name the kill moments, in their cycle order.
var pgKillKinds = []string{"random", "blocked write", "held store"}

// pgTally is what the table says about delivery.
type pgTally struct {
	rows       int // rows read
	lost       int // produced, no row
	duplicated int // rows beyond the first of a (partition, offset)
	unknown    int // rows of a (partition, offset) never produced
	corrupt    int // rows whose JSON payload names another partition or offset
	covered    int // produced (partition, offset)s with a row
}

func (t pgTally) String() string {
	s := fmt.Sprintf("%d rows: lost %d, duplicated %d", t.rows, t.lost, t.duplicated)
	if t.unknown > 0 {
		s += fmt.Sprintf(", unknown offsets %d", t.unknown)
	}
	if t.corrupt > 0 {
		s += fmt.Sprintf(", payload not matching its offset %d", t.corrupt)
	}
	return s
}

// pgSoak is one postgres-soak run: the fixture, the database and the table.
type pgSoak struct {
	f             *fixture
	db            *pgxpool.Pool
	table, offsTb string
}

// tally reads the table. Each row's payload is the fixture's JSON {"p":…,"n":…}.
func (s *pgSoak) tally(ctx context.Context) (pgTally, error) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := s.db.Query(qctx, `SELECT iggy_partition_id, iggy_offset, payload->>'p', payload->>'n' FROM `+
		pgx.Identifier{s.table}.Sanitize())
	if err != nil {
		return pgTally{}, fmt.Errorf("read table %s: %w", s.table, err)
	}
	var t pgTally
	seen := map[pkey]int{}
	var part, off int64
	var pp, pn *string
	_, err = pgx.ForEachRow(rows, []any{&part, &off, &pp, &pn}, func() error {
		t.rows++
		k := pkey{uint32(part), uint64(off)}
		if _, ok := s.f.sent[k]; !ok || part < 0 || off < 0 {
			t.unknown++
			return nil
		}
		if pp == nil || pn == nil || *pp != strconv.FormatInt(part, 10) || *pn != strconv.FormatInt(off, 10) {
			t.corrupt++
		}
		seen[k]++
		return nil
	})
	if err != nil {
		return pgTally{}, fmt.Errorf("read table %s: %w", s.table, err)
	}
	for k := range s.f.sent {
		if n := seen[k]; n == 0 {
			t.lost++
		} else {
			t.covered++
			t.duplicated += n - 1
		}
	}
	return t, nil
}

// maxWritten returns the highest offset in the table per partition (-1 = none).
func (s *pgSoak) maxWritten(ctx context.Context) (map[uint32]int64, error) {
	out := map[uint32]int64{}
	for p := uint32(0); p < s.f.partitions; p++ {
		out[p] = -1
	}
	rows, err := s.db.Query(ctx, `SELECT iggy_partition_id, max(iggy_offset) FROM `+pgx.Identifier{s.table}.Sanitize()+` GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("read table %s: %w", s.table, err)
	}
	var p int32
	var m int64
	_, err = pgx.ForEachRow(rows, []any{&p, &m}, func() error { out[uint32(p)] = m; return nil })
	return out, err
}

// lockWaiters counts the sessions waiting for a lock on the table.
func (s *pgSoak) lockWaiters(ctx context.Context) int {
	var n int
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE c.relname = $1 AND NOT l.granted`, s.table).Scan(&n)
	if err != nil {
		return 0
	}
	return n
}

// terminateWaiters ends the sessions waiting for a lock on the table and waits until none
// is left.
func (s *pgSoak) terminateWaiters(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE c.relname = $1 AND NOT l.granted`, s.table)
	if err != nil {
		return fmt.Errorf("end the dead runtime's sessions waiting on %s: %w", s.table, err)
	}
	return s.f.wait(ctx, "the dead runtime's sessions to end", func() bool { return s.lockWaiters(ctx) == 0 })
}

// pgTableLayout is the official PostgreSQL sink's table (what its auto_create_table makes,
// every include_* on, payload_format json) without the primary key on id: the table must
// not refuse a second row of a message, so exactly once has to come from the sink.
const pgTableLayout = `(id numeric(39,0), iggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text,
	iggy_topic text, iggy_partition_id integer, iggy_checksum bigint, iggy_origin_timestamp timestamptz,
	payload jsonb, created_at timestamptz DEFAULT now())`

// started waits until the first instance wrote a row of the messages produced so far; a
// runtime that exits first (it refused the config or the plugin) is reported by the
// caller as "not supported".
func (s *pgSoak) started(ctx context.Context, p *proc) error {
	err := s.f.wait(ctx, "the PostgreSQL sink's first row", func() bool {
		if p.exited() {
			return true
		}
		t, err := s.tally(ctx)
		return err == nil && t.rows > 0
	})
	if err == nil && p.exited() {
		err = fmt.Errorf("before the PostgreSQL sink wrote a row: %w", exitError(p))
	}
	if err != nil {
		return fmt.Errorf("%w; runtime log: %s", err, oneLine(p.tail(5)))
	}
	return nil
}

// newTableName returns a table name no other run uses.
func newTableName() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "ferry_conformance_" + hex.EncodeToString(b), nil
}

func runPostgresSoak(ctx context.Context, r *Runner, mode string) Result {
	kills := r.cfg.Soak
	expected := fmt.Sprintf("%d SIGKILLs: lost 0, duplicated 0 (exactly-once into PostgreSQL)", kills)
	if r.cfg.Postgres == "" {
		return unsupported(expected, errors.New("no PostgreSQL database given (--postgres URL)"))
	}
	db, err := pgxpool.New(ctx, r.cfg.Postgres)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = db.Ping(pctx)
		cancel()
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		return broken(expected, fmt.Errorf("PostgreSQL (--postgres): %w", err))
	}
	defer db.Close()
	table, err := newTableName()
	if err != nil {
		return broken(expected, err)
	}
	s := &pgSoak{db: db, table: table, offsTb: table + "_offsets"}
	r.log.Info("postgres-soak table", "mode", mode, "table", table, "kept", r.cfg.Keep)
	defer func() {
		if r.cfg.Keep {
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.Exec(dctx, "DROP TABLE IF EXISTS "+pgx.Identifier{s.table}.Sanitize()+", "+pgx.Identifier{s.offsTb}.Sanitize())
	}()
	plugin := r.cfg.PostgresPlugin
	if plugin == "" {
		plugin = "builtin:postgres"
	}
	if _, err := db.Exec(ctx, "CREATE TABLE "+pgx.Identifier{table}.Sanitize()+" "+pgTableLayout); err != nil {
		return broken(expected, fmt.Errorf("create table %s: %w", table, err))
	}
	// The official sink's keys, then Ferry's own: exactly_once is its default, written so
	// that a test can turn it off.
	pc := map[string]string{
		"connection_string": strconv.Quote(r.cfg.Postgres),
		"target_table":      strconv.Quote(table),
		"auto_create_table": "false",
		"payload_format":    `"json"`,
		"exactly_once":      "true",
		"offsets_table":     strconv.Quote(s.offsTb),
	}
	f, gate, p, err := r.soakStart(ctx, "postgres-soak", mode, connector{batch: 20, schema: "json", maxRetries: -1, plugin: plugin, pluginConfig: pc},
		func(f *fixture) { s.f = f })
	if err != nil {
		return broken(expected, err)
	}
	defer gate.close()
	defer func() { p.kill() }()
	rng := mrand.New(mrand.NewSource(r.cfg.Seed))
	fail := func(err error) Result { return broken(expected, err) }
	if err := s.started(ctx, p); err != nil {
		return unsupported(expected, err)
	}
	counts := map[string]int{}
	ahead := 0   // held-store kills with rows in the table past the group's stored offset
	behind := 0  // blocked-write kills with the group's stored offset past the rows
	noStore := 0 // held-store kills that saw no store within heldStoreWait (killed anyway)
	for k := 0; k < kills; k++ {
		if err := soakStream(ctx, f, rng); err != nil {
			return fail(err)
		}
		kind := pgKillKinds[k%len(pgKillKinds)]
		if kind == "held store" && !atLeastOnce(mode) {
			kind = "random"
		}
		switch kind {
		case "held store":
			seen, past, err := killAtHeldStore(ctx, s.f, s, p, gate)
			if err != nil {
				return fail(fmt.Errorf("kill %d: %w", k+1, err))
			}
			if !seen {
				kind, noStore = "random", noStore+1
			} else if past {
				ahead++
			}
		case "blocked write":
			past, err := s.killAtBlockedWrite(ctx, p)
			if err != nil {
				return fail(fmt.Errorf("kill %d: %w", k+1, err))
			}
			if past {
				behind++
			}
		default:
			p.kill()
		}
		counts[kind]++
		if p, err = startInstance(f); err != nil {
			return fail(fmt.Errorf("restart after kill %d: %w", k+1, err))
		}
	}
	how := fmt.Sprintf("%d at held offset stores (%d with rows past the stored offset), %d at blocked writes (%d with the stored offset past the rows), %d at random moments",
		counts["held store"], ahead, counts["blocked write"], behind, counts["random"])
	return soakFinish(ctx, expected, f, s, p, kills, noStore, how)
}

// heldStoreWait bounds the wait for the runtime's next offset store at a held-store kill
// (a safety net: Ferry stores within milliseconds of a written batch). A runtime that
// stores no offset of its own in that time is killed there anyway, as at a random moment.
const heldStoreWait = 10 * time.Second

// soakTarget is where a soak scenario's sink writes (postgres-soak's table, s3-soak's
// bucket), read back to judge.
type soakTarget interface {
	tally(ctx context.Context) (pgTally, error)
	// maxWritten is the highest offset written per partition (-1 = none).
	maxWritten(ctx context.Context) (map[uint32]int64, error)
}

// killAtHeldStore arms the gate, produces a batch and SIGKILLs the runtime once the gate
// holds its offset store: seen reports that it did, past that the target then had messages
// the group's stored offset did not cover.
func killAtHeldStore(ctx context.Context, f *fixture, s soakTarget, p *proc, gate *storeGate) (seen, past bool, err error) {
	held := gate.arm()
	defer gate.drop()
	if err := f.produce(ctx, 20, nil); err != nil {
		return false, false, err
	}
	timer := time.NewTimer(heldStoreWait)
	defer timer.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for !seen {
		select {
		case <-held:
			seen = true
		case <-timer.C:
			p.kill()
			return false, false, nil
		case <-poll.C:
			if p.exited() {
				return false, false, fmt.Errorf("%w; log: %s", exitError(p), oneLine(p.tail(5)))
			}
		case <-ctx.Done():
			return false, false, ctx.Err()
		}
	}
	stored, err1 := f.stored(ctx)
	written, err2 := s.maxWritten(ctx)
	p.kill()
	if err := errors.Join(err1, err2); err != nil {
		return true, false, err
	}
	for q := uint32(0); q < f.partitions; q++ {
		past = past || written[q] > stored[q]
	}
	return true, past, nil
}

// killAtBlockedWrite locks the table, produces a batch and SIGKILLs the runtime once its
// write waits on the lock, then releases the lock. past reports that the group's stored
// offset was then past the rows in the table (under after_polling the poll stores).
func (s *pgSoak) killAtBlockedWrite(ctx context.Context, p *proc) (past bool, err error) {
	f := s.f
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("lock table %s: %w", s.table, err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }() // after the kill
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{s.table}.Sanitize()+" IN EXCLUSIVE MODE"); err != nil {
		return false, fmt.Errorf("lock table %s: %w", s.table, err)
	}
	if err := f.produce(ctx, 20, nil); err != nil {
		return false, err
	}
	err = f.wait(ctx, "the sink's write to wait on the table lock", func() bool { return p.exited() || s.lockWaiters(ctx) > 0 })
	if err == nil && p.exited() {
		err = fmt.Errorf("%w; log: %s", exitError(p), oneLine(p.tail(5)))
	}
	if err != nil {
		p.kill()
		return false, err
	}
	stored, err1 := f.stored(ctx)
	written, err2 := s.maxWritten(ctx)
	p.kill()
	if err := errors.Join(err1, err2); err != nil {
		return false, err
	}
	// A statement the dead runtime left waiting on the lock would still run once the lock
	// is released (PostgreSQL notices the closed socket only after it; an autocommit INSERT
	// then lands): end those sessions first, as a crash of the runtime's machine would.
	if err := s.terminateWaiters(ctx); err != nil {
		return false, err
	}
	for q := uint32(0); q < f.partitions; q++ {
		past = past || stored[q] > written[q]
	}
	return past, nil
}

// exitError says how a runtime that should still run ended.
func exitError(p *proc) error {
	if p.err != nil {
		return fmt.Errorf("runtime exited: %w", p.err)
	}
	return errors.New("runtime exited with status 0")
}

// waitWritten waits until every produced message is in the target: Iggy's stored offset is
// only a hint for an exactly-once sink (it may lag the target, and under after_polling it
// runs ahead of it), so the target says when the run is done. A runtime that lost messages
// never gets there: once the group's stored offsets are at the end and the target did not
// change for quietPeriod, the run is over too and the tally shows the loss.
func waitWritten(ctx context.Context, f *fixture, s soakTarget, p *proc) error {
	total := len(f.sent)
	rows, since := -1, time.Now()
	var last pgTally
	err := f.wait(ctx, "every produced message written", func() bool {
		if p.exited() {
			return true
		}
		t, err := s.tally(ctx)
		if err != nil {
			return false
		}
		last = t
		if t.covered == total {
			return true
		}
		if t.rows != rows {
			rows, since = t.rows, time.Now()
			return false
		}
		if time.Since(since) < quietPeriod {
			return false
		}
		st, err := f.stored(ctx)
		if err != nil {
			return false
		}
		for q := uint32(0); q < f.partitions; q++ {
			if st[q] != int64(f.next[q])-1 {
				return false
			}
		}
		return true
	})
	if err == nil && p.exited() {
		err = fmt.Errorf("%w; log: %s", exitError(p), oneLine(p.tail(5)))
	}
	if err != nil {
		return fmt.Errorf("%w (%d of %d messages written)", err, last.covered, total)
	}
	return nil
}
