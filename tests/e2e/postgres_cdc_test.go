package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/ferryio/ferry/internal/testkit"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
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
	ts, _ := json.Marshal(tables)
	return fmt.Sprintf(`type = "source"
key = "cdc"
enabled = true
version = 0
name = "pg cdc"
path = "builtin:postgres"
max_in_flight = 4

[[streams]]
stream = "s"
topic = "cdc"
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
`, url, ts, slot)
}

// cdcWriter commits transactions of 1–5 random changes to three tables, one at a time, and
// records each committed change's identity in commit order: "table op id v" (v is unique
// per insert and update; a delete names the id it removed; a truncate its table).
type cdcWriter struct {
	db     *pgxpool.Pool
	tables []string
	rng    *rand.Rand
	live   map[string][]int // ids present per table
	nextID int
	nextV  int
	want   []string
}

func (w *cdcWriter) txn(ctx context.Context, n int) error {
	type op struct {
		sql  string
		args []any
		id   []string
	}
	var ops []op
	live := map[string][]int{}
	for k, v := range w.live {
		live[k] = slices.Clone(v)
	}
	nextID, nextV := w.nextID, w.nextV
	for range 1 + w.rng.IntN(5) {
		tbl := w.tables[w.rng.IntN(len(w.tables))]
		ids := live[tbl]
		switch r := w.rng.IntN(100); {
		case r < 1 && len(ids) > 0: // truncate
			ops = append(ops, op{sql: "TRUNCATE " + tbl, id: []string{tbl + " TRUNCATE"}})
			live[tbl] = nil
		case r < 55 || len(ids) == 0: // insert
			nextID++
			nextV++
			ops = append(ops, op{sql: "INSERT INTO " + tbl + " (id, v) VALUES ($1, $2)", args: []any{nextID, nextV},
				id: []string{fmt.Sprintf("%s INSERT %d %d", tbl, nextID, nextV)}})
			live[tbl] = append(live[tbl], nextID)
		case r < 75: // update, key kept
			i := w.rng.IntN(len(ids))
			nextV++
			ops = append(ops, op{sql: "UPDATE " + tbl + " SET v = $2 WHERE id = $1", args: []any{ids[i], nextV},
				id: []string{fmt.Sprintf("%s UPDATE %d %d", tbl, ids[i], nextV)}})
		case r < 85: // update with a key change
			i := w.rng.IntN(len(ids))
			nextID++
			nextV++
			ops = append(ops, op{sql: "UPDATE " + tbl + " SET id = $2, v = $3 WHERE id = $1", args: []any{ids[i], nextID, nextV},
				id: []string{fmt.Sprintf("%s UPDATE %d %d old %d", tbl, nextID, nextV, ids[i])}})
			live[tbl][i] = nextID
		default: // delete
			i := w.rng.IntN(len(ids))
			ops = append(ops, op{sql: "DELETE FROM " + tbl + " WHERE id = $1", args: []any{ids[i]},
				id: []string{fmt.Sprintf("%s DELETE %d", tbl, ids[i])}})
			live[tbl] = slices.Delete(live[tbl], i, i+1)
		}
	}
	// A transaction is retried until it is known to have committed (a log row, not
	// captured, written in it says so), so PostgreSQL may restart under the writer.
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
			for _, o := range ops {
				if _, err := tx.Exec(ctx, o.sql, o.args...); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+w.tables[0]+"_log VALUES ($1)", n)
			return err
		})
		if err == nil {
			break
		}
		if attempt > 200 {
			return fmt.Errorf("transaction %d: %w", n, err)
		}
		var done bool
		for range 100 {
			if qerr := w.db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+w.tables[0]+"_log WHERE n = $1)", n).Scan(&done); qerr == nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // PostgreSQL restarting
		}
		if done {
			break
		}
	}
	for _, o := range ops {
		w.want = append(w.want, o.id...)
	}
	w.live, w.nextID, w.nextV = live, nextID, nextV
	return nil
}

// cdcMessage is one message read back from the topic.
type cdcMessage struct {
	partition uint32
	offset    uint64
	lsn, idx  uint64
	ident     string
}

// readCDCTopic reads every message of stream s, topic cdc with Ferry's Go client.
func readCDCTopic(t *testing.T, c *iggy.Client) []cdcMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []cdcMessage
	for p := range uint32(cdcPartitions) {
		next := uint64(0)
		for {
			part := p
			r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(7)},
				Stream: iggy.Name("s"), Topic: iggy.Name("cdc"), Partition: &part, Strategy: wire.PollOffset(next), Count: 1000})
			if err != nil {
				t.Fatalf("poll partition %d at %d: %v", p, next, err)
			}
			if len(r.Messages) == 0 {
				r.Release()
				break
			}
			for _, m := range r.Messages {
				cm := cdcMessage{partition: p, offset: m.Offset}
				kvs, err := m.Headers(nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, kv := range kvs {
					switch string(kv.Key.Raw) {
					case "pg_commit_lsn":
						cm.lsn = binary.LittleEndian.Uint64(kv.Value.Raw)
					case "pg_txn_index":
						cm.idx = binary.LittleEndian.Uint64(kv.Value.Raw)
					}
				}
				cm.ident = cdcIdentity(t, m.Payload)
				if m.ID.Hi != cm.lsn || m.ID.Lo&(1<<40-1) != cm.idx {
					t.Fatalf("partition %d offset %d: id %x/%x, headers %d/%d", p, m.Offset, m.ID.Hi, m.ID.Lo, cm.lsn, cm.idx)
				}
				out = append(out, cm)
				next = m.Offset + 1
			}
			r.Release()
		}
	}
	return out
}

// cdcIdentity renders a message as the writer's identity of the change.
func cdcIdentity(t *testing.T, payload []byte) string {
	var r struct {
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
	if err := json.Unmarshal(payload, &r); err != nil {
		t.Fatalf("payload %s: %v", payload, err)
	}
	switch r.Op {
	case "TRUNCATE":
		return r.Table + " TRUNCATE"
	case "DELETE":
		return fmt.Sprintf("%s DELETE %d", r.Table, *r.Data.ID)
	}
	s := fmt.Sprintf("%s %s %d %d", r.Table, r.Op, *r.Data.ID, *r.Data.V)
	if r.Old != nil {
		s += fmt.Sprintf(" old %d", r.Old.ID)
	}
	return s
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
		for range 100 {
			if _, err := db.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // the killed walsender releasing the slot
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
	w := &cdcWriter{db: db, tables: tables, rng: rand.New(rand.NewPCG(seed, 3)), live: map[string][]int{}}
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		for n := range size.txns {
			if writeErr = w.txn(ctx, n); writeErr != nil {
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
	want := uint64(len(w.want))
	testkit.WaitFor(t, "every committed change in the topic", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return topicMessages(c, "cdc") >= want
	})

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

	got := readCDCTopic(t, c)
	// Per partition, positions strictly grow (one row's changes keep their order).
	last := map[uint32][2]uint64{}
	for _, m := range got {
		if l, ok := last[m.partition]; ok && (m.lsn < l[0] || (m.lsn == l[0] && m.idx <= l[1])) {
			t.Fatalf("partition %d offset %d: position %d#%d not after %d#%d", m.partition, m.offset, m.lsn, m.idx, l[0], l[1])
		}
		last[m.partition] = [2]uint64{m.lsn, m.idx}
	}
	// In commit order, the topic holds exactly the writer's changes.
	slices.SortFunc(got, func(a, b cdcMessage) int {
		if a.lsn != b.lsn {
			return cmpU(a.lsn, b.lsn)
		}
		return cmpU(a.idx, b.idx)
	})
	for i := range max(len(got), len(w.want)) {
		var g, e string
		if i < len(got) {
			g = got[i].ident
		}
		if i < len(w.want) {
			e = w.want[i]
		}
		if g != e {
			t.Fatalf("change %d of %d (topic has %d): topic %q, committed %q", i, len(w.want), len(got), g, e)
		}
	}
	skipped := 0
	for _, r := range append(runs, run) {
		skipped += strings.Count(r.out.String(), "Iggy holds changes past the saved state")
	}
	t.Logf("%d transactions, %d changes, %d kills, %d PostgreSQL restarts: %d messages, 0 lost, 0 duplicated; %d partitions read back past the saved state at open",
		size.txns, len(w.want), size.kills, len(size.restarts), len(got), skipped)
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
