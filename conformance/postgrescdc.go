package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// postgres-cdc runs the PostgreSQL CDC source (builtin:postgres as a source) on three
// tables of its own while a writer commits transactions of 1–5 changes and the runtime is
// SIGKILLed --soak times at seeded moments, then judges from the topic alone: read back in
// commit order (the pg_commit_lsn and pg_txn_index headers), it must hold exactly the
// changes the writer committed, each once, and each partition's positions must grow.

const cdcPartitions = 3

// cdcChange is one change read back from the topic.
type cdcChange struct {
	partition uint32
	lsn, idx  uint64
	ident     string
}

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
		for dctx.Err() == nil {
			if _, err := db.Exec(dctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", name); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // a killed runtime's walsender releasing the slot
		}
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
	ts, _ := json.Marshal(tables)
	conn := fmt.Sprintf(`type = "source"
key = "pgcdc"
enabled = true
version = 0
name = "conformance postgres cdc"
path = "builtin:postgres"

[[streams]]
stream = %q
topic = "t"
schema = "json"
batch_length = 1000

[plugin_config]
connection_string = %q
mode = "cdc"
tables = %s
replication_slot = %q
capture_operations = ["INSERT", "UPDATE", "DELETE", "TRUNCATE"]
batch_size = 500
status_interval = "200ms"
`, stream, r.cfg.Postgres, ts, name)
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
	rng := rand.New(rand.NewSource(r.cfg.Seed))
	w := &cdcWriter{db: db, tables: tables, log: logTable, rng: rand.New(rand.NewSource(r.cfg.Seed + 1)), live: map[string][]int{}}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	werr := make(chan error, 1)
	go func() {
		for n := range txns {
			if err := w.txn(wctx, n); err != nil {
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
		time.Sleep(time.Duration(rng.Intn(300)) * time.Millisecond)
		p.kill()
		if p, err = r.startRuntime(cfgPath, logPath); err != nil {
			return broken(expected, err)
		}
	}
	if err := <-werr; err != nil {
		return broken(expected, fmt.Errorf("writer: %w", err))
	}
	want := uint64(len(w.want))
	if err := r.wait(ctx, "every committed change in the topic", func() bool { return count() >= want || p.exited() }); err != nil || p.exited() {
		return broken(expected, fmt.Errorf("%w; runtime log: %s", exitedOr(err), oneLine(p.tail(5))))
	}
	_ = p.term(15 * time.Second)
	got, err := readCDCTopic(ctx, r, stream)
	if err != nil {
		return broken(expected, err)
	}
	lost, dup, disorder := judgeCDC(got, w.want)
	observed := fmt.Sprintf("%d kills, %d transactions, %d changes committed; topic %d messages: lost %d, duplicated %d, out of order %d",
		kills, txns, len(w.want), len(got), lost, dup, disorder)
	v := Fail
	if lost == 0 && dup == 0 && disorder == 0 && len(got) == len(w.want) {
		v = Pass
	}
	return Result{Expected: expected, Observed: observed, Verdict: v, Lost: lost, Duplicated: dup, Kills: kills}
}

// exitedOr is err, or "the runtime exited" when a wait ended because the runtime did.
func exitedOr(err error) error {
	if err == nil {
		return errors.New("the runtime exited")
	}
	return err
}

// judgeCDC compares the topic with the committed changes: lost and duplicated count
// identities; disorder counts partitions' position decreases and, when nothing was lost or
// duplicated, places where commit order differs from the writer's.
func judgeCDC(got []cdcChange, want []string) (lost, dup, disorder int) {
	last := map[uint32][2]uint64{}
	for _, m := range got {
		if l, ok := last[m.partition]; ok && (m.lsn < l[0] || (m.lsn == l[0] && m.idx <= l[1])) {
			disorder++
		}
		last[m.partition] = [2]uint64{m.lsn, m.idx}
	}
	// A truncate's identity repeats; everything else is unique.
	have := map[string]int{}
	for _, m := range got {
		have[m.ident]++
	}
	for _, id := range want {
		have[id]--
	}
	for _, n := range have {
		if n < 0 {
			lost -= n
		} else {
			dup += n
		}
	}
	if lost == 0 && dup == 0 {
		slices.SortFunc(got, func(a, b cdcChange) int {
			if a.lsn != b.lsn {
				return cmpUint(a.lsn, b.lsn)
			}
			return cmpUint(a.idx, b.idx)
		})
		for i := range got {
			if got[i].ident != want[i] {
				disorder++
			}
		}
	}
	return lost, dup, disorder
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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

// readCDCTopic reads every message of the topic back.
func readCDCTopic(ctx context.Context, r *Runner, stream string) ([]cdcChange, error) {
	var out []cdcChange
	for p := range uint32(cdcPartitions) {
		next := uint64(0)
		for {
			part := p
			res, err := r.admin.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
				Stream: iggy.Name(stream), Topic: iggy.Name("t"), Partition: &part, Strategy: wire.PollOffset(next), Count: 1000})
			if err != nil {
				return nil, fmt.Errorf("read the topic: %w", err)
			}
			if len(res.Messages) == 0 {
				res.Release()
				break
			}
			for _, m := range res.Messages {
				c := cdcChange{partition: p}
				kvs, err := m.Headers(nil)
				if err != nil {
					res.Release()
					return nil, fmt.Errorf("partition %d offset %d: headers: %w", p, m.Offset, err)
				}
				for _, kv := range kvs {
					switch string(kv.Key.Raw) {
					case "pg_commit_lsn":
						c.lsn = binary.LittleEndian.Uint64(kv.Value.Raw)
					case "pg_txn_index":
						c.idx = binary.LittleEndian.Uint64(kv.Value.Raw)
					}
				}
				if c.ident, err = cdcIdentity(m.Payload); err != nil {
					res.Release()
					return nil, fmt.Errorf("partition %d offset %d: %w", p, m.Offset, err)
				}
				out = append(out, c)
				next = m.Offset + 1
			}
			res.Release()
		}
	}
	return out, nil
}

// cdcIdentity renders a message as the writer names the change.
func cdcIdentity(payload []byte) (string, error) {
	var rec struct {
		Table string `json:"table_name"`
		Op    string `json:"operation_type"`
		Data  struct {
			ID *int `json:"id"`
			V  *int `json:"v"`
		} `json:"data"`
		Old *struct {
			ID int `json:"id"`
		} `json:"old_data"`
	}
	if err := json.Unmarshal(payload, &rec); err != nil {
		return "", fmt.Errorf("payload %q: %w", payload, err)
	}
	switch {
	case rec.Op == "TRUNCATE":
		return rec.Table + " TRUNCATE", nil
	case rec.Op == "DELETE" && rec.Data.ID != nil:
		return fmt.Sprintf("%s DELETE %d", rec.Table, *rec.Data.ID), nil
	case rec.Data.ID == nil || rec.Data.V == nil:
		return "", fmt.Errorf("payload %q: no data.id or data.v", payload)
	}
	s := fmt.Sprintf("%s %s %d %d", rec.Table, rec.Op, *rec.Data.ID, *rec.Data.V)
	if rec.Old != nil {
		s += fmt.Sprintf(" old %d", rec.Old.ID)
	}
	return s, nil
}

// cdcWriter commits transactions of 1–5 random changes to three tables and records each
// committed change in commit order, named as cdcIdentity names it.
type cdcWriter struct {
	db     *pgxpool.Pool
	tables []string
	log    string
	rng    *rand.Rand
	live   map[string][]int
	nextID int
	nextV  int
	want   []string
}

type cdcOp struct {
	sql   string
	args  []any
	ident string
}

func (w *cdcWriter) txn(ctx context.Context, n int) error {
	live := map[string][]int{}
	for k, v := range w.live {
		live[k] = slices.Clone(v)
	}
	nextID, nextV := w.nextID, w.nextV
	var ops []cdcOp
	for range 1 + w.rng.Intn(5) {
		tbl := w.tables[w.rng.Intn(len(w.tables))]
		ids := live[tbl]
		switch x := w.rng.Intn(100); {
		case x < 1 && len(ids) > 0:
			ops = append(ops, cdcOp{"TRUNCATE " + tbl, nil, tbl + " TRUNCATE"})
			live[tbl] = nil
		case x < 55 || len(ids) == 0:
			nextID++
			nextV++
			ops = append(ops, cdcOp{"INSERT INTO " + tbl + " (id, v) VALUES ($1, $2)", []any{nextID, nextV}, fmt.Sprintf("%s INSERT %d %d", tbl, nextID, nextV)})
			live[tbl] = append(live[tbl], nextID)
		case x < 75:
			i := w.rng.Intn(len(ids))
			nextV++
			ops = append(ops, cdcOp{"UPDATE " + tbl + " SET v = $2 WHERE id = $1", []any{ids[i], nextV}, fmt.Sprintf("%s UPDATE %d %d", tbl, ids[i], nextV)})
		case x < 85:
			i := w.rng.Intn(len(ids))
			nextID++
			nextV++
			ops = append(ops, cdcOp{"UPDATE " + tbl + " SET id = $2, v = $3 WHERE id = $1", []any{ids[i], nextID, nextV},
				fmt.Sprintf("%s UPDATE %d %d old %d", tbl, nextID, nextV, ids[i])})
			live[tbl][i] = nextID
		default:
			i := w.rng.Intn(len(ids))
			ops = append(ops, cdcOp{"DELETE FROM " + tbl + " WHERE id = $1", []any{ids[i]}, fmt.Sprintf("%s DELETE %d", tbl, ids[i])})
			live[tbl] = slices.Delete(live[tbl], i, i+1)
		}
	}
	// Retried until known committed: a log row (not captured) written in the transaction
	// says whether a commit whose answer was lost went through.
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
			for _, o := range ops {
				if _, err := tx.Exec(ctx, o.sql, o.args...); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+w.log+" VALUES ($1)", n)
			return err
		})
		if err == nil {
			break
		}
		if attempt > 200 || ctx.Err() != nil {
			return fmt.Errorf("transaction %d: %w", n, err)
		}
		var done bool
		if qerr := w.db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+w.log+" WHERE n = $1)", n).Scan(&done); qerr == nil && done {
			break
		}
		time.Sleep(100 * time.Millisecond) // the database recovering
	}
	for _, o := range ops {
		w.want = append(w.want, o.ident)
	}
	w.live, w.nextID, w.nextV = live, nextID, nextV
	return nil
}
