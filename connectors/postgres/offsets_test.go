package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// openErr opens a sink with key "k-<test>" and returns Open's error (the sink is closed
// at the end either way).
func openErr(t *testing.T, cfg string) (*Sink, error) {
	t.Helper()
	s := New()
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, s.Open(context.Background(), sdk.SinkEnv{Key: "k-" + t.Name(), Config: []byte(cfg), OnFailure: "stop"})
}

// offsetRows lists the offsets rows of the test's key: "partition last db.schema.table
// wrote_rows".
func offsetRows(t *testing.T, db *pgxpool.Pool, off string) string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT partition_id, last_offset, target_database, target_schema, target_table,
	coalesce(wrote_rows::text, 'null') FROM `+off+
		` WHERE connector = $1 ORDER BY partition_id`, "k-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var p int32
	var last int64
	var d, s, tb, wrote string
	if _, err := pgx.ForEachRow(rows, []any{&p, &last, &d, &s, &tb, &wrote}, func() error {
		out = append(out, fmt.Sprintf("%d %d %s.%s.%s %s", p, last, d, s, tb, wrote))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "; ")
}

func assigned(t *testing.T, s *testSink) map[sdk.Partition]uint64 {
	t.Helper()
	got, err := s.Assigned(context.Background(), topic, []sdk.Partition{part(0), part(1)})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestOffsetsNameTheirTable is issue 22's silent skip: the same connector key pointed at
// a new target_table resumed at the old table's offsets and wrote nothing. Offsets rows
// now name their table; another table's rows, or an emptied table, fail Open with the
// tables and offsets named, unless on_offsets_mismatch says restart or resume.
func TestOffsetsNameTheirTable(t *testing.T) {
	db, url := testDB(t)
	a, b, off := fresh(t, db, "a"), fresh(t, db, "b"), fresh(t, db, "offs")
	var dbName string
	if err := db.QueryRow(context.Background(), "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	cfg := func(table, extra string) string {
		return fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json"%s}`, url, table, off, extra)
	}
	s := open(t, cfg(a, ""), "stop", nil)
	if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if err := consume(t, s, 1, msgs(0, 5, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	_ = s.Close(context.Background())
	want := fmt.Sprintf("0 9 %[1]s.public.%[2]s true; 1 4 %[1]s.public.%[2]s true", dbName, a)
	if got := offsetRows(t, db, off); got != want {
		t.Fatalf("offsets rows %q, want %q", got, want)
	}

	// The same key pointed at table b: refused at Open, naming both tables and the offsets.
	_, err := openErr(t, cfg(b, ""))
	wantErr := fmt.Sprintf(`postgres sink: %s (connector "k-%s") does not match the target table "%s"."public"."%s": `+
		`s/t partition 0: offsets up to 9 were written into "%[3]s"."public"."%[5]s"; s/t partition 1: offsets up to 4 were written into "%[3]s"."public"."%[5]s"; `+
		`set plugin_config.on_offsets_mismatch = "resume" to write after those offsets anyway, or "restart" to write those partitions again from offset 0`,
		off, t.Name(), dbName, b, a)
	if err == nil || err.Error() != wantErr {
		t.Fatalf("open on table b: %v\nwant %s", err, wantErr)
	}
	if got := offsetRows(t, db, off); got != want {
		t.Fatalf("a refused Open changed the offsets rows: %q", got)
	}

	// restart: both partitions start at 0 in table b, and the rows now name b.
	s = open(t, cfg(b, `,"on_offsets_mismatch":"restart"`), "stop", nil)
	if got := assigned(t, s); len(got) != 2 || got[part(0)] != 0 || got[part(1)] != 0 {
		t.Fatalf("Assigned after restart = %v, want both partitions at 0", got)
	}
	if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	_ = s.Close(context.Background())
	if n := count(t, db, "SELECT count(*) FROM "+b+" WHERE iggy_partition_id = 0 AND iggy_offset BETWEEN 0 AND 9"); n != 10 {
		t.Fatalf("table b holds %d rows of partition 0, want 10", n)
	}
	want = fmt.Sprintf("0 9 %[1]s.public.%[2]s true; 1 -1 %[1]s.public.%[2]s false", dbName, b)
	if got := offsetRows(t, db, off); got != want {
		t.Fatalf("offsets rows after restart %q, want %q", got, want)
	}

	// Table b emptied: the row of partition 0 says 9 was written there.
	exec(t, db, "TRUNCATE "+b)
	_, err = openErr(t, cfg(b, ""))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`: s/t partition 0: offsets up to 9 were written into "%s"."public"."%s", which now holds no rows; set plugin_config.on_offsets_mismatch`, dbName, b)) {
		t.Fatalf("open on the emptied table: %v", err)
	}
	// resume: it goes on after offset 9 (partition 1 was never written: from 0).
	s = open(t, cfg(b, `,"on_offsets_mismatch":"resume"`), "stop", nil)
	if got := assigned(t, s); len(got) != 2 || got[part(0)] != 10 || got[part(1)] != 0 {
		t.Fatalf("Assigned after resume = %v, want partition 0 at 10, 1 at 0", got)
	}
	_ = s.Close(context.Background())
	want = fmt.Sprintf("0 9 %[1]s.public.%[2]s false; 1 -1 %[1]s.public.%[2]s false", dbName, b)
	if got := offsetRows(t, db, off); got != want {
		t.Fatalf("offsets rows after resume %q, want %q", got, want)
	}
	// Resumed once, the table as it is is accepted: the next open passes.
	s = open(t, cfg(b, ""), "stop", nil)
	if got := assigned(t, s); len(got) != 2 || got[part(0)] != 10 || got[part(1)] != 0 {
		t.Fatalf("Assigned after reopening = %v, want partition 0 at 10, 1 at 0", got)
	}
}

// TestOffsetsOfRejectedRowsOnly: a partition whose every row so far was rejected has
// offsets and an empty table, and that is no mismatch: the sink opens again.
func TestOffsetsOfRejectedRowsOnly(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	cfg := fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json"}`, url, tbl, off)
	s := &testSink{Sink: New()}
	if err := s.Open(context.Background(), sdk.SinkEnv{Key: "k-" + t.Name(), Config: []byte(cfg), OnFailure: "skip"}); err != nil {
		t.Fatal(err)
	}
	var rej *sdk.RejectedMessages
	if err := consume(t, s, 0, msgs(0, 3, func(uint64) string { return "not json" })); !errors.As(err, &rej) || len(rej.Offsets) != 3 {
		t.Fatalf("Consume = %v; want all 3 rejected", err)
	}
	_ = s.Close(context.Background())
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 0 {
		t.Fatalf("table holds %d rows, want 0", n)
	}
	s = open(t, cfg, "skip", nil)
	if got := assigned(t, s); len(got) != 1 || got[part(0)] != 3 {
		t.Fatalf("Assigned = %v, want partition 0 at 3", got)
	}
}

// TestOffsetsTableMigrated: an offsets table of the layout before its rows named their
// table gets the columns added in place; its rows keep their offsets and are claimed
// for the target when the target holds rows, and refused when it holds none.
func TestOffsetsTableMigrated(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	exec(t, db, `CREATE TABLE `+off+` (connector text NOT NULL, stream text NOT NULL, topic text NOT NULL, partition_id integer NOT NULL,
	last_offset bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (connector, stream, topic, partition_id))`)
	exec(t, db, `INSERT INTO `+off+` (connector, stream, topic, partition_id, last_offset) VALUES ($1, 's', 't', 0, 41)`, "k-"+t.Name())
	cfg := fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json"}`, url, tbl, off)
	if _, err := openErr(t, cfg); err == nil || !strings.Contains(err.Error(), "s/t partition 0: offsets up to 41 were written into") ||
		!strings.Contains(err.Error(), tbl+`", which now holds no rows`) {
		t.Fatalf("open with a legacy row and an empty table: %v", err)
	}
	if got := offsetRows(t, db, off); got != "0 41 .. null" {
		t.Fatalf("legacy row after the refused open %q, want it unclaimed", got)
	}
	exec(t, db, `INSERT INTO `+tbl+` (id, payload) VALUES (1, '{}')`)
	s := open(t, cfg, "stop", nil)
	if got := assigned(t, s); len(got) != 1 || got[part(0)] != 42 {
		t.Fatalf("Assigned = %v, want partition 0 at 42", got)
	}
	var dbName string
	if err := db.QueryRow(context.Background(), "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	if got, want := offsetRows(t, db, off), fmt.Sprintf("0 41 %s.public.%s null", dbName, tbl); got != want {
		t.Fatalf("offsets rows %q, want %q", got, want)
	}
}

// TestOpenBesideAnOpenTransaction: a sink opens while another instance's transaction holds
// an offsets row (a group in progress): open takes no lock that waits for it (an ALTER of
// the offsets table would, and would stall every writer queued behind it).
func TestOpenBesideAnOpenTransaction(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	cfg := fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json"}`, url, tbl, off)
	first := open(t, cfg, "stop", sdktest.NewCommitter())
	if err := consume(t, first, 0, msgs(0, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT * FROM "+off+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" (id, payload) VALUES (99999, '{}')"); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		s := New()
		err := s.Open(ctx, sdk.SinkEnv{Key: "k-" + t.Name(), Config: []byte(cfg), OnFailure: "stop", Committer: sdktest.NewCommitter()})
		if err == nil {
			err = s.Close(ctx)
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("open: %v", err)
		}
	case <-time.After(testkit.Patience):
		t.Fatalf("open still waiting after %v for a transaction holding an offsets row", testkit.Patience)
	}
}
