package source

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/sdk"
)

// cdcFixture is a slot, a publication and tables unique to one test, dropped at its end.
type cdcFixture struct {
	t      testing.TB
	db     *pgxpool.Pool
	url    string
	slot   string
	tables []string
}

func newFixture(t testing.TB, ddl map[string]string) *cdcFixture {
	t.Helper()
	db, url := pgtest.Connect(t)
	f := &cdcFixture{t: t, db: db, url: url, slot: strings.ToLower("s_" + strings.ReplaceAll(t.Name(), "/", "_"))}
	f.cleanup()
	for name, cols := range ddl {
		tbl := f.slot + "_" + name
		f.exec("CREATE TABLE " + tbl + " (" + cols + ")")
		f.tables = append(f.tables, tbl)
	}
	t.Cleanup(f.cleanup)
	return f
}

func (f *cdcFixture) table(name string) string { return f.slot + "_" + name }

func (f *cdcFixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The slot may still be active for a moment after Close.
	if err := pgtest.DropSlot(ctx, f.db, f.slot); err != nil {
		f.t.Fatalf("%v", err)
	}
	_, _ = f.db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+f.slot+"_pub")
	rows, _ := f.db.Query(ctx, "SELECT tablename FROM pg_tables WHERE tablename LIKE $1", f.slot+"\\_%")
	var names []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	for _, n := range names {
		_, _ = f.db.Exec(ctx, "DROP TABLE IF EXISTS "+n)
	}
}

func (f *cdcFixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Exec(context.Background(), q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

func (f *cdcFixture) config(extra string) []byte {
	tables, _ := json.Marshal(f.tables)
	return []byte(fmt.Sprintf(`{"connection_string": %q, "mode": "cdc", "tables": %s, "replication_slot": %q%s}`, f.url, tables, f.slot, extra))
}

func (f *cdcFixture) open(cfg []byte, state []byte) *Source {
	f.t.Helper()
	s := New()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Open(ctx, sdk.SourceEnv{Key: "pg", Config: cfg, State: state, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		f.t.Fatalf("open: %v", err)
	}
	f.t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// read reads and acknowledges batches until n messages came.
func read(t *testing.T, s *Source, n int) ([]sdk.ProducedMessage, []byte) {
	t.Helper()
	var out []sdk.ProducedMessage
	var state []byte
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(out) < n {
		b, ack, err := s.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, b.Messages...)
		if b.State != nil {
			state = b.State
		}
		if err := ack(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(out) != n {
		t.Fatalf("read %d messages, want %d", len(out), n)
	}
	return out, state
}

// payloads returns each message's payload with its timestamp checked and replaced by "T".
func payloads(t *testing.T, msgs []sdk.ProducedMessage) []string {
	t.Helper()
	out := make([]string, len(msgs))
	for i, m := range msgs {
		var r map[string]json.RawMessage
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			t.Fatalf("message %d: %v: %s", i, err, m.Payload)
		}
		var ts string
		_ = json.Unmarshal(r["timestamp"], &ts)
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Fatalf("message %d timestamp %q: %v", i, ts, err)
		}
		out[i] = strings.Replace(string(m.Payload), `"timestamp":"`+ts+`"`, `"timestamp":"T"`, 1)
	}
	return out
}

func TestCDCTypedValuesAndOperations(t *testing.T) {
	f := newFixture(t, map[string]string{
		"a": "id int PRIMARY KEY, n numeric, ts timestamptz, j jsonb, arr int[], tags text[], b bytea, flag bool, note text, big text",
		"f": "k text, v int",
	})
	a, full := f.table("a"), f.table("f")
	f.exec("ALTER TABLE " + full + " REPLICA IDENTITY FULL")
	f.exec("ALTER TABLE " + a + " ALTER COLUMN big SET STORAGE EXTERNAL")
	s := f.open(f.config(`, "capture_operations": ["INSERT", "UPDATE", "DELETE", "TRUNCATE"]`), nil)

	big := strings.Repeat("x", 10000) // stored out of line: an update that leaves it alone does not send it
	f.exec("INSERT INTO "+a+" VALUES (1, 12345678901234567890.123456789, '2024-01-15 10:30:00.5+02', '{\"k\": [1, 2]}', '{1,NULL,3}', '{\"a b\",c}', '\\x00ff10', true, NULL, $1)", big)
	f.exec("UPDATE " + a + " SET note = 'hi' WHERE id = 1")
	f.exec("UPDATE " + a + " SET id = 2 WHERE id = 1")
	f.exec("INSERT INTO " + full + " VALUES ('x', 1)")
	f.exec("UPDATE " + full + " SET v = 2")
	f.exec("DELETE FROM " + a + " WHERE id = 2")
	f.exec("DELETE FROM " + full)
	f.exec("TRUNCATE " + a)

	msgs, _ := read(t, s, 8)
	want := []string{
		`{"table_name":"` + a + `","operation_type":"INSERT","timestamp":"T","data":{"id":1,"n":12345678901234567890.123456789,"ts":"2024-01-15T08:30:00.5Z","j":{"k":[1,2]},"arr":[1,null,3],"tags":["a b","c"],"b":"AP8Q","flag":true,"note":null,"big":"` + big + `"},"old_data":null}`,
		`{"table_name":"` + a + `","operation_type":"UPDATE","timestamp":"T","data":{"id":1,"n":12345678901234567890.123456789,"ts":"2024-01-15T08:30:00.5Z","j":{"k":[1,2]},"arr":[1,null,3],"tags":["a b","c"],"b":"AP8Q","flag":true,"note":"hi"},"old_data":null,"unchanged_toast_columns":["big"]}`,
		`{"table_name":"` + a + `","operation_type":"UPDATE","timestamp":"T","data":{"id":2,"n":12345678901234567890.123456789,"ts":"2024-01-15T08:30:00.5Z","j":{"k":[1,2]},"arr":[1,null,3],"tags":["a b","c"],"b":"AP8Q","flag":true,"note":"hi"},"old_data":{"id":1},"unchanged_toast_columns":["big"]}`,
		`{"table_name":"` + full + `","operation_type":"INSERT","timestamp":"T","data":{"k":"x","v":1},"old_data":null}`,
		`{"table_name":"` + full + `","operation_type":"UPDATE","timestamp":"T","data":{"k":"x","v":2},"old_data":{"k":"x","v":1}}`,
		`{"table_name":"` + a + `","operation_type":"DELETE","timestamp":"T","data":{"id":2},"old_data":null}`,
		`{"table_name":"` + full + `","operation_type":"DELETE","timestamp":"T","data":{"k":"x","v":2},"old_data":null}`,
		`{"table_name":"` + a + `","operation_type":"TRUNCATE","timestamp":"T","data":{},"old_data":null}`,
	}
	got := payloads(t, msgs)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	// Each statement is its own transaction: index 0, growing commit LSNs, ids from them.
	var prev uint64
	for i, m := range msgs {
		p, ok := positionOf(m.Headers, f.slot)
		if !ok || p.Index != 0 || p.LSN <= prev || m.ID != p.id(f.slot) {
			t.Fatalf("message %d: position %v ok=%v (previous lsn %d), id %s", i, p, ok, prev, m.ID)
		}
		prev = p.LSN
	}
	// Partition keys: the table and the primary key; the key-changing update goes with
	// the new key, the delete with the old one.
	if k := string(msgs[0].PartitionKey); k != "public."+a+"\x001" {
		t.Errorf("insert key %q", k)
	}
	if k := string(msgs[5].PartitionKey); k != "public."+a+"\x002" {
		t.Errorf("delete key %q", k)
	}
}

// TestCDCTransactionPositions: the changes of one transaction share its commit LSN and are
// numbered from 0; a reopened source with the saved state resumes after the last
// acknowledged change, inside a transaction too.
func TestCDCTransactionPositions(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "id int PRIMARY KEY, v int"})
	a := f.table("a")
	cfg := f.config(`, "batch_size": 2`)
	s := f.open(cfg, nil)
	f.exec("INSERT INTO " + a + " SELECT g, g FROM generate_series(1, 5) g")
	f.exec("INSERT INTO " + a + " VALUES (6, 6)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first []sdk.ProducedMessage
	var state []byte
	for len(first) < 2 {
		b, ack, err := s.Read(ctx)
		if err != nil || len(b.Messages) > 2 {
			t.Fatalf("batch of %d messages (batch_size 2), %v", len(b.Messages), err)
		}
		_ = ack(ctx, nil)
		first = append(first, b.Messages...)
		if b.State != nil {
			state = b.State
		}
	}
	p0, _ := positionOf(first[0].Headers, f.slot)
	p1, _ := positionOf(first[1].Headers, f.slot)
	if p0.Index != 0 || p1.Index != 1 || p0.LSN != p1.LSN {
		t.Fatalf("positions %v %v", p0, p1)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantIDs := map[int]string{2: "3,4,5,6", 3: "4,5,6"}[len(first)]
	// Reopen with the state of the first batch: the rest of the transaction, then the next.
	s2 := f.open(cfg, state)
	msgs, _ := read(t, s2, strings.Count(wantIDs, ",")+1)
	var ids []string
	for _, m := range msgs {
		var r struct {
			Data struct{ ID int } `json:"data"`
		}
		_ = json.Unmarshal(m.Payload, &r)
		ids = append(ids, fmt.Sprint(r.Data.ID))
	}
	if got := strings.Join(ids, ","); got != wantIDs {
		t.Fatalf("after reopening: ids %s, want %s", got, wantIDs)
	}
}

// TestCDCConfirmedFlushAdvancesWhileIdle: with everything acknowledged, WAL written by
// tables the source does not capture is confirmed too, so the server can recycle it.
func TestCDCConfirmedFlushAdvancesWhileIdle(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "id int PRIMARY KEY", "other": "id int"})
	a, other := f.table("a"), f.table("other")
	f.tables = []string{a}
	s := f.open(f.config(`, "status_interval": "100ms"`), nil)
	f.exec("INSERT INTO " + a + " VALUES (1)")
	msgs, _ := read(t, s, 1)
	sent, _ := positionOf(msgs[0].Headers, f.slot)
	// As the runtime does, keep reading (the transaction's end may come in a later batch).
	rctx, stop := context.WithCancel(context.Background())
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		for {
			b, ack, err := s.Read(rctx)
			if err != nil {
				return
			}
			if len(b.Messages) > 0 {
				t.Errorf("read %d more messages; the other table is not captured", len(b.Messages))
			}
			_ = ack(rctx, nil)
		}
	}()
	defer func() { stop(); <-reading }()
	for i := range 3 {
		f.exec("INSERT INTO "+other+" VALUES ($1)", i)
	}
	var target string
	if err := f.db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatal(err)
	}
	// Nobody calls Read: the source is idle, and the slot must still move past target.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ok bool
		if err := f.db.QueryRow(context.Background(), "SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1",
			f.slot, target).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("confirmed_flush_lsn did not reach %s while idle", target)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's slot; no event to wait on
	}
	// The gauges: the last change Iggy holds, and a confirmed position at least target.
	want, err := pglogrepl.ParseLSN(target)
	if err != nil {
		t.Fatal(err)
	}
	g := map[string]uint64{}
	for _, x := range s.Gauges() {
		g[x.Name] = x.Value
	}
	if g["pg_last_sent_lsn"] != sent.LSN || g["pg_confirmed_flush_lsn"] < uint64(want) || len(g) != 3 {
		t.Fatalf("gauges %v; want pg_last_sent_lsn %d, pg_confirmed_flush_lsn ≥ %d", g, sent.LSN, want)
	}
}

// TestCDCSetupErrors: a slot of another plugin is refused with the SQL that fixes it.
func TestCDCSetupErrors(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "id int PRIMARY KEY"})
	f.exec("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", f.slot)
	s := New()
	err := s.Open(context.Background(), sdk.SourceEnv{Key: "pg", Config: f.config(""), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), `plugin "test_decoding"`) || !strings.Contains(err.Error(), "pg_drop_replication_slot") {
		t.Fatalf("open with a test_decoding slot: %v", err)
	}
}

// TestCDCPreflight: the checks of `ferry check --connect`, each problem with its fix: a
// table with REPLICA IDENTITY NOTHING, one with no primary key, a missing table, a slot of
// another plugin, and a role without the REPLICATION right.
func TestCDCPreflight(t *testing.T) {
	f := newFixture(t, map[string]string{"ok": "id int PRIMARY KEY", "nothing": "id int PRIMARY KEY", "nokey": "v int"})
	f.exec("ALTER TABLE " + f.table("nothing") + " REPLICA IDENTITY NOTHING")
	f.tables = []string{f.table("ok"), f.table("nothing"), f.table("nokey"), f.table("missing")}
	f.exec("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", f.slot)
	ctx := context.Background()
	errs := New().Preflight(ctx, f.config(""))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	q := func(name string) string { return `"public"."` + f.table(name) + `"` }
	want := []string{
		"table " + q("nothing") + " has REPLICA IDENTITY NOTHING: its updates and deletes cannot be captured; fix: ALTER TABLE " + q("nothing") + " REPLICA IDENTITY DEFAULT; (with a primary key) or REPLICA IDENTITY FULL;",
		"table " + q("nokey") + " has no primary key: with REPLICA IDENTITY DEFAULT its updates and deletes fail; fix: ALTER TABLE " + q("nokey") + " ADD PRIMARY KEY (…); or ALTER TABLE " + q("nokey") + " REPLICA IDENTITY FULL;",
		"tables: table public." + f.table("missing") + " does not exist; fix: create it, or remove it from plugin_config.tables",
		`replication_slot: slot ` + f.slot + ` exists with plugin "test_decoding"; this source reads pgoutput; fix: SELECT pg_drop_replication_slot('` + f.slot + `'); or set replication_slot to another name`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("preflight:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	role := f.slot + "_role"
	f.exec("DROP ROLE IF EXISTS " + role)
	f.exec("CREATE ROLE " + role + " LOGIN")
	t.Cleanup(func() { _, _ = f.db.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	cfg, err := pgxpoolConfigURL(f.url, role)
	if err != nil {
		t.Fatal(err)
	}
	f.tables = []string{f.table("ok")}
	f.url = cfg
	// The fixture's cleanup drops f.slot: give it back the slot this test created.
	defer func(slot string) { f.slot = slot }(f.slot)
	f.slot += "_other"
	errs = New().Preflight(ctx, f.config(""))
	if len(errs) != 1 || errs[0].Error() != "role "+role+" has no REPLICATION right; fix: ALTER ROLE \""+role+"\" WITH REPLICATION;" {
		t.Fatalf("preflight as a role without REPLICATION: %v", errs)
	}
}

// pgxpoolConfigURL returns url with its user replaced.
func pgxpoolConfigURL(url, user string) (string, error) {
	at := strings.Index(url, "@")
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 {
		return "", fmt.Errorf("connection URL without user@: %q", url)
	}
	return url[:scheme+3] + user + url[at:], nil
}
