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

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// testDB connects to FERRY_POSTGRES_URL (pgtest.Connect, which holds off the e2e tests'
// restarts of the cluster).
func testDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return pgtest.Connect(t)
}

// fresh returns a table name unique to the test and drops it at the end.
func fresh(t *testing.T, db *pgxpool.Pool, name string) string {
	t.Helper()
	tbl := strings.ToLower(strings.NewReplacer("/", "_", " ", "_").Replace("t_" + t.Name() + "_" + name))
	exec(t, db, "DROP TABLE IF EXISTS "+tbl)
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+tbl) })
	return tbl
}

func exec(t *testing.T, db *pgxpool.Pool, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func count(t *testing.T, db *pgxpool.Pool, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

var topic = sdk.TopicMetadata{Stream: "s", Topic: "t", StreamID: 1, TopicID: 2}

func part(id uint32) sdk.Partition { return sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: id} }

func msgs(first, n uint64, payload func(o uint64) string) []sdk.ConsumedMessage {
	out := make([]sdk.ConsumedMessage, n)
	for i := range out {
		o := first + uint64(i)
		out[i] = sdk.ConsumedMessage{ID: sdk.MessageIDFromUint64(1000 + o), Offset: o, Checksum: ^uint64(0) - o,
			Timestamp: 1_700_000_000_000_000 + o, OriginTimestamp: 1_700_000_000_000_000, Payload: []byte(payload(o))}
	}
	return out
}

func jsonPayload(o uint64) string { return fmt.Sprintf(`{"n":%d,"user":{"name":"u%d"}}`, o, o%3) }

// testSink is a sink opened by open, with the Committer it was opened with (nil: not
// sink_controlled), which consume tells what it delivers, as the runtime does.
type testSink struct {
	*Sink
	c *sdktest.Committer
}

func open(t *testing.T, cfg, onFailure string, c *sdktest.Committer) *testSink {
	t.Helper()
	s := New()
	env := sdktest.SinkEnv(t, cfg, c)
	env.Key, env.OnFailure = "k-"+t.Name(), sdk.OnFailure(onFailure)
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close(context.Background())
		if c != nil {
			if bad := c.OutOfRange(); len(bad) > 0 {
				t.Errorf("the sink committed offsets it was never given: %v", bad)
			}
		}
	})
	return &testSink{s, c}
}

func consume(t *testing.T, s *testSink, p uint32, m []sdk.ConsumedMessage) error {
	t.Helper()
	for i := range m { // ids unique across partitions
		m[i].ID = sdk.MessageIDFromUint64(uint64(p)<<32 | (1000 + m[i].Offset))
	}
	// The poll saw more waiting than the batch holds, as under a backlog (a group stays
	// open; consumeAtEnd delivers a batch that reaches the partition's end).
	return s.deliver(p, m, m[len(m)-1].Offset+1000)
}

// consumeAtEnd is consume of a batch whose last message is the partition's last as the
// poll saw it.
func consumeAtEnd(t *testing.T, s *testSink, p uint32, m []sdk.ConsumedMessage) error {
	t.Helper()
	for i := range m {
		m[i].ID = sdk.MessageIDFromUint64(uint64(p)<<32 | (1000 + m[i].Offset))
	}
	return s.deliver(p, m, m[len(m)-1].Offset)
}

// deliver records m as delivered to the Committer, then consumes it.
func (s *testSink) deliver(p uint32, m []sdk.ConsumedMessage, current uint64) error {
	if s.c != nil {
		s.c.Deliver(part(p), m)
	}
	return s.Consume(context.Background(), topic, sdk.MessagesMetadata{Partition: part(p), CurrentOffset: current}, m)
}

// committed returns the last offset s committed for partition p (0 when none).
func (s *testSink) committed(p uint32) uint64 {
	off, _ := s.c.Committed(part(p))
	return off
}

func TestExactlyOnceRedeliveryWritesOnce(t *testing.T) {
	for _, mode := range []writeMode{modeCopy, modeInsert} {
		t.Run(string(mode), func(t *testing.T) {
			db, url := testDB(t)
			tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
			c := sdktest.NewCommitter()
			s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json","write_mode":%q}`,
				url, tbl, off, mode), "stop", c)
			if got, err := s.Assigned(context.Background(), topic, []sdk.Partition{part(0), part(1)}); err != nil || len(got) != 0 {
				t.Fatalf("Assigned before any write = %v, %v; want empty", got, err)
			}
			for _, b := range [][2]uint64{{0, 50}, {50, 50}, {0, 100}, {80, 40}} { // the last two overlap what is written
				if err := consume(t, s, 0, msgs(b[0], b[1], jsonPayload)); err != nil {
					t.Fatal(err)
				}
			}
			if err := consume(t, s, 1, msgs(7, 3, jsonPayload)); err != nil {
				t.Fatal(err)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE iggy_partition_id = 0"); n != 120 {
				t.Fatalf("partition 0 rows = %d, want 120", n)
			}
			if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_partition_id = 0 AND iggy_offset BETWEEN 0 AND 119"); n != 120 {
				t.Fatalf("distinct offsets 0..119 = %d, want 120", n)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE payload->>'n' = iggy_offset::text AND id = iggy_partition_id * 4294967296 + 1000 + iggy_offset AND iggy_checksum = -1 - iggy_offset"); n != 123 {
				t.Fatalf("rows with payload, id and checksum as sent = %d, want 123", n)
			}
			got, err := s.Assigned(context.Background(), topic, []sdk.Partition{part(0), part(1), part(2)})
			if err != nil {
				t.Fatal(err)
			}
			want := map[sdk.Partition]uint64{part(0): 120, part(1): 10}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Assigned = %v, want %v", got, want)
			}
			if got := [2]uint64{s.committed(0), s.committed(1)}; got != [2]uint64{119, 9} {
				t.Fatalf("commits = %v, want p0 119, p1 9", got)
			}
		})
	}
}

func TestRejectedRowAloneUnderSkip(t *testing.T) {
	for _, mode := range []writeMode{modeCopy, modeInsert} {
		t.Run(string(mode), func(t *testing.T) {
			db, url := testDB(t)
			tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
			s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json","write_mode":%q}`,
				url, tbl, off, mode), "dead_letter", nil)
			bad := map[uint64]bool{3: true, 7: true}
			err := consume(t, s, 0, msgs(0, 10, func(o uint64) string {
				if bad[o] {
					return "not json"
				}
				return jsonPayload(o)
			}))
			var rej *sdk.RejectedMessages
			if !errors.As(err, &rej) || fmt.Sprint(rej.Offsets) != "[3 7]" || !strings.Contains(rej.Error(), "22P02") {
				t.Fatalf("Consume = %v; want RejectedMessages for offsets [3 7] with SQLSTATE 22P02", err)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE iggy_offset NOT IN (3, 7)"); n != 8 {
				t.Fatalf("rows = %d, want the 8 others", n)
			}
			if n := count(t, db, "SELECT last_offset FROM "+off); n != 9 {
				t.Fatalf("offsets table = %d, want 9", n)
			}
		})
	}
}

func TestRejectedRowUnderStopWritesNothing(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json"}`,
		url, tbl, off), "stop", nil)
	err := consume(t, s, 0, msgs(0, 10, func(o uint64) string {
		if o == 4 {
			return "{"
		}
		return jsonPayload(o)
	}))
	var rej *sdk.RejectedMessages
	if err == nil || errors.As(err, &rej) || !strings.Contains(err.Error(), "offset 4 rejected") {
		t.Fatalf("Consume = %v; want a plain error naming offset 4", err)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 0 {
		t.Fatalf("rows = %d, want 0", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+off+" WHERE last_offset >= 0"); n != 0 {
		t.Fatalf("offsets rows = %d, want none", n)
	}
}

func TestUpsertByPayloadKeyIsIdempotent(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	// exactly_once off: the dedupe by offsets is not what makes it idempotent.
	s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json",
		"write_mode":"upsert","upsert_key":"user_name","exactly_once":false,"batch_size":7,
		"columns":[{"name":"user_name","type":"text","path":"user.name"},{"name":"n","type":"bigint","path":"n"}]}`,
		url, tbl, off), "stop", nil)
	for range 2 {
		for _, first := range []uint64{0, 30} {
			if err := consume(t, s, 0, msgs(first, 30, jsonPayload)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows, err := db.Query(context.Background(), "SELECT user_name, n FROM "+tbl+" ORDER BY user_name")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var u string
		var n int64
		err := r.Scan(&u, &n)
		return fmt.Sprintf("%s=%d", u, n), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[u0=57 u1=58 u2=59]" { // one row per key, the last value of each
		t.Fatalf("rows = %v", got)
	}
}

func TestContinuesOfficialLayout(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	// The official sink's table, as it creates it, with a row it wrote.
	exec(t, db, `CREATE TABLE `+tbl+` (id numeric(39,0) PRIMARY KEY, iggy_offset bigint, iggy_timestamp timestamptz,
		iggy_stream text, iggy_topic text, iggy_partition_id integer, iggy_checksum bigint, iggy_origin_timestamp timestamptz,
		payload bytea, created_at timestamptz DEFAULT now())`)
	exec(t, db, `INSERT INTO `+tbl+` (id, iggy_offset, iggy_stream, iggy_topic, iggy_partition_id, payload) VALUES (1, 0, 's', 't', 0, 'old')`)
	s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q}`, url, tbl, off), "stop", nil)
	if err := consume(t, s, 0, msgs(1, 5, func(o uint64) string { return fmt.Sprint("m", o) })); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE created_at IS NOT NULL AND iggy_stream = 's'"); n != 6 {
		t.Fatalf("rows = %d, want 6", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE payload = convert_to('m' || iggy_offset, 'UTF8')"); n != 5 {
		t.Fatalf("bytea payloads as sent = %d, want 5", n)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for cfg, want := range map[string]string{
		`{}`: "plugin_config.connection_string: required field is missing",
		`{"connection_string":"x","payload_format":"xml"}`:                                      "payload_format",
		`{"connection_string":"x","write_mode":"merge"}`:                                        "write_mode",
		`{"connection_string":"x","target_table":"` + strings.Repeat("t", 64) + `"}`:            "target_table",
		`{"connection_string":"x","offsets_table":"a\u0000b"}`:                                  "offsets_table",
		`{"connection_string":"x","columns":[{"name":"a.b","path":"a"}]}`:                       "columns[0]",
		`{"connection_string":"x","columns":[{"name":"a"}]}`:                                    "plugin_config.columns[0].path: required field is missing",
		`{"connection_string":"x","write_mode":"upsert","upsert_key":"zz"}`:                     "upsert_key",
		`{"connection_string":"x","batch_size":-1}`:                                             "batch_size",
		`{"connection_string":"x","unknown":1}`:                                                 "unknown",
		`{"connection_string":""}`:                                                              "plugin_config.connection_string: must not be empty",
		`{"connection_string":"x","retry_delay":"0s"}`:                                          "plugin_config.retry_delay: 0s is below the minimum 1ns",
		`{"connection_string":"x","max_connections":-1}`:                                        "plugin_config.max_connections: -1 is below the minimum 0",
		`{"connection_string":"x","on_offsets_mismatch":"ignore"}`:                              `plugin_config.on_offsets_mismatch: unknown value "ignore" (want error, resume or restart)`,
		`{"connection_string":"x","columns":[{"name":"a","path":"a"},{"name":"a","path":"b"}]}`: `plugin_config.columns[1].name: "a" appears twice`,
		`{"connection_string":"x","columns":[{"name":"a","path":"a","type":"int; drop"}]}`:      `plugin_config.columns[0].type: "int; drop": want an SQL type name`,
	} {
		if _, err := Config.Parse([]byte(cfg)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", cfg, err, want)
		}
	}
	err := New().Open(context.Background(), sdk.SinkEnv{Config: []byte(`{"connection_string":"postgres://u:s3cret@[::1"}`)})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open with a bad connection string = %v; want an error without the password", err)
	}
}

// TestOfficialConfigAccepted: a plugin_config written for the official sink, every key of
// it, is accepted as is, with the official defaults.
func TestOfficialConfigAccepted(t *testing.T) {
	c, err := Config.Parse([]byte(`{"connection_string":"postgres://u@h/db","target_table":"events","batch_size":0,
		"max_connections":4,"auto_create_table":true,"include_metadata":true,"include_checksum":false,
		"include_origin_timestamp":true,"payload_format":"jsonb","verbose_logging":true,"max_retries":3,"retry_delay":"1s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.BatchSize != 1 || c.MaxConnections != 4 || c.PayloadFormat != formatJSON || c.IncludeChecksum || !c.ExactlyOnce || c.RetryDelay != time.Second ||
		c.WriteMode != modeCopy || c.OffsetsTable != "ferry_offsets" {
		t.Fatalf("config %+v", c)
	}
	d, err := Config.Parse([]byte(`{"connection_string":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.TargetTable != "iggy_messages" || d.BatchSize != 100 || d.MaxConnections != 10 || d.AutoCreateTable ||
		!d.IncludeMetadata || !d.IncludeChecksum || !d.IncludeOriginTimestamp || d.PayloadFormat != formatBytea ||
		d.RetryDelay != 50*time.Millisecond || !d.ExactlyOnce || d.OffsetsTable != "ferry_offsets" || d.OnOffsetsMismatch != mismatchError ||
		d.WriteMode != modeCopy || d.UpsertKey != "id" || d.FlushInterval != 0 || d.MaxRowsPerTransaction != 10000 ||
		!d.CommitWhenCaughtUp || d.CopyFormat != copyBinary || !d.WarmBackends {
		t.Fatalf("defaults %+v", d)
	}
}

// TestOwnersSerialisedByTheOffsetsRow: the rebalance race. The old owner's transaction
// (here the test's own, holding the partition's offsets row) is still open when the new
// owner consumes 0..99 from a stale start: the new owner waits on the row lock, and once
// the old owner commits rows 10..59 with last_offset 59 it writes only 60..99.
func TestOwnersSerialisedByTheOffsetsRow(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	cfg := fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,
		"include_checksum":false,"include_origin_timestamp":false}`, url, tbl, off)
	newOwner := open(t, cfg, "stop", nil)
	if err := consume(t, newOwner, 0, msgs(0, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Rollback(ctx) }()
	if _, err := old.Exec(ctx, "SELECT last_offset FROM "+off+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- newOwner.Consume(ctx, topic, sdk.MessagesMetadata{Partition: part(0)}, func() []sdk.ConsumedMessage {
			m := msgs(0, 100, jsonPayload)
			for i := range m {
				m[i].ID = sdk.MessageIDFromUint64(1000 + m[i].Offset)
			}
			return m
		}())
	}()
	testkit.WaitFor(t, "the new owner to wait on the offsets row", func() bool {
		return count(t, db, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO %"+off+"%'") == 1
	})
	for o := 10; o < 60; o++ {
		if _, err := old.Exec(ctx, "INSERT INTO "+tbl+" (id, iggy_offset, iggy_stream, iggy_topic, iggy_partition_id, payload) VALUES ($1, $2, 's', 't', 0, 'old')",
			1000+o, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Exec(ctx, "UPDATE "+off+" SET last_offset = 59"); err != nil {
		t.Fatal(err)
	}
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_offset BETWEEN 0 AND 99"); n != 100 {
		t.Fatalf("distinct offsets = %d, want 100", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE payload = 'old'"); n != 50 {
		t.Fatalf("rows of the old owner = %d, want 50 (10..59)", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 100 {
		t.Fatalf("rows = %d, want 100", n)
	}
}

// TestTableNameQuotedWhole: as the official sink, target_table "ferry.dotted" is one table
// named ferry.dotted (not table dotted of schema ferry), created and written.
func TestTableNameQuotedWhole(t *testing.T) {
	db, url := testDB(t)
	off := fresh(t, db, "offs")
	exec(t, db, `DROP TABLE IF EXISTS "ferry.dotted"`)
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), `DROP TABLE IF EXISTS "ferry.dotted"`) })
	s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":"ferry.dotted","offsets_table":%q,"auto_create_table":true}`, url, off), "stop", nil)
	if err := consume(t, s, 0, msgs(0, 3, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM "ferry.dotted"`); n != 3 {
		t.Fatalf("rows = %d, want 3", n)
	}
}

// TestFailedOffsetRecordRollsBack: the offsets UPDATE and COMMIT go in one pipelined round
// trip, one transaction per batch or per group (group commit, the batch reaching the
// partition's end commits the group). When the UPDATE fails (a trigger raises) or the
// COMMIT does (a deferred constraint trigger raises at commit), Consume returns the
// database's error, no row of the batch is in the table, nothing is committed to the
// runtime, every connection goes back to the pool outside any transaction, and the same
// batch written again once the trigger is gone lands whole, once.
func TestFailedOffsetRecordRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name, when string
		group      bool
	}{
		{"update", "update", false}, {"commit", "commit", false}, {"group_update", "update", true}, {"group_commit", "commit", true},
	} {
		when := tc.when
		t.Run(tc.name, func(t *testing.T) {
			db, url := testDB(t)
			tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
			c := sdktest.NewCommitter()
			cfg := fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true}`, url, tbl, off)
			if tc.group {
				cfg = groupCfg(url, tbl, off, "1h", 10000)
			}
			s := open(t, cfg, "stop", c)
			consume := consumeAtEnd // a group commits at once
			if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
				t.Fatal(err)
			}
			fn := off + "_refuse"
			exec(t, db, "CREATE FUNCTION "+fn+"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'offsets refused at %', TG_WHEN; END $$")
			t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP FUNCTION IF EXISTS "+fn+" CASCADE") })
			if when == "update" {
				exec(t, db, "CREATE TRIGGER refuse BEFORE UPDATE OF wrote_rows ON "+off+" FOR EACH ROW EXECUTE FUNCTION "+fn+"()")
			} else {
				exec(t, db, "CREATE CONSTRAINT TRIGGER refuse AFTER UPDATE OF wrote_rows ON "+off+" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "+fn+"()")
			}
			err := consume(t, s, 0, msgs(10, 20, jsonPayload))
			want := map[string]string{"update": "offsets refused at BEFORE", "commit": "offsets refused at AFTER"}[when]
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Consume = %v, want the trigger's error %q", err, want)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 10 {
				t.Fatalf("rows = %d after the failed batch, want the first batch's 10", n)
			}
			if last, _ := c.Committed(part(0)); last != 9 {
				t.Fatalf("last commit %d, want 9 (the failed batch never committed)", last)
			}
			for _, pc := range s.pool.AcquireAllIdle(context.Background()) {
				st := pc.Conn().PgConn().TxStatus()
				pc.Release()
				if st != 'I' {
					t.Fatalf("a pooled connection is in transaction state %q, want idle", st)
				}
			}
			if n := count(t, db, "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND query LIKE '%"+off+"%'"); n != 0 {
				t.Fatalf("%d sessions left idle in a transaction on %s", n, off)
			}
			exec(t, db, "DROP TRIGGER refuse ON "+off)
			if err := consume(t, s, 0, msgs(10, 20, jsonPayload)); err != nil {
				t.Fatal(err)
			}
			if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_offset BETWEEN 0 AND 29"); n != 30 {
				t.Fatalf("distinct offsets 0..29 = %d, want 30", n)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 30 {
				t.Fatalf("rows = %d, want 30", n)
			}
			if n := count(t, db, "SELECT last_offset FROM "+off); n != 29 {
				t.Fatalf("offsets row at %d, want 29", n)
			}
			if last, _ := c.Committed(part(0)); last != 29 {
				t.Fatalf("last commit %d, want 29", last)
			}
		})
	}
}

// TestWriteAheadGuardedByTheOffsetsRow: a batch that continues what the sink last
// committed for its partition is written without locking first (writeAhead), guarded by
// an UPDATE that only succeeds while the offsets row holds that offset. Here another
// writer moves the row from 9 to 59 between two batches (with rows of its own for
// 10..59, ids the sink never uses, so no key conflict hides the guard): the sink's
// optimistic transaction is rolled back and the batch written again after the lock,
// skipping 10..59. Then, with nobody in the way, the next batch goes ahead.
func TestWriteAheadGuardedByTheOffsetsRow(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	c := sdktest.NewCommitter()
	s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true}`, url, tbl, off), "stop", c)
	if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if n := s.ahead.Load(); n != 0 {
		t.Fatalf("%d batches went ahead before anything was committed", n)
	}
	for o := 10; o < 60; o++ {
		exec(t, db, "INSERT INTO "+tbl+" (id, iggy_offset, iggy_stream, iggy_topic, iggy_partition_id, payload) VALUES ($1, $2, 's', 't', 0, '\"other\"')", 900000+o, o)
	}
	exec(t, db, "UPDATE "+off+" SET last_offset = 59")
	if err := consume(t, s, 0, msgs(10, 90, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if n := s.ahead.Load(); n != 0 {
		t.Fatalf("the guarded batch committed ahead (%d) although the row had moved", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE iggy_offset BETWEEN 10 AND 59 AND payload <> '\"other\"'"); n != 0 {
		t.Fatalf("%d of the sink's rows in 10..59, which the other writer covered", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 100 {
		t.Fatalf("rows = %d, want 100 (10 + 50 of the other writer + 40)", n)
	}
	if err := consume(t, s, 0, msgs(100, 50, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if n := s.ahead.Load(); n != 1 {
		t.Fatalf("batches written ahead = %d, want 1 (the one after the locked write)", n)
	}
	if n := s.inOne.Load(); n != 1 {
		t.Fatalf("batches written ahead in one query = %d, want 1", n)
	}
	if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_offset BETWEEN 0 AND 149"); n != 150 {
		t.Fatalf("distinct offsets 0..149 = %d, want 150", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 150 {
		t.Fatalf("rows = %d, want 150", n)
	}
	if n := count(t, db, "SELECT last_offset FROM "+off); n != 149 {
		t.Fatalf("offsets row = %d, want 149", n)
	}
	if last, _ := c.Committed(part(0)); last != 149 {
		t.Fatalf("last commit %d, want 149", last)
	}
}

// TestWriteAheadRejectedRow: a row the database refuses in a batch that would go ahead
// (the partition's second) is found as in any other batch: the optimistic COPY fails,
// is rolled back, and the locking path names the row; the others are written once.
func TestWriteAheadRejectedRow(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json"}`,
		url, tbl, off), "dead_letter", nil)
	if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	err := consume(t, s, 0, msgs(10, 10, func(o uint64) string {
		if o == 13 {
			return "not json"
		}
		return jsonPayload(o)
	}))
	var rej *sdk.RejectedMessages
	if !errors.As(err, &rej) || fmt.Sprint(rej.Offsets) != "[13]" || !strings.Contains(rej.Error(), "22P02") {
		t.Fatalf("Consume = %v; want RejectedMessages for offset 13 with SQLSTATE 22P02", err)
	}
	if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_offset <> 13"); n != 19 {
		t.Fatalf("distinct offsets = %d, want the 19 others", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 19 {
		t.Fatalf("rows = %d, want 19", n)
	}
	if n := count(t, db, "SELECT last_offset FROM "+off); n != 19 {
		t.Fatalf("offsets table = %d, want 19", n)
	}
	if err := consume(t, s, 0, msgs(20, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if n := s.ahead.Load(); n != 1 {
		t.Fatalf("batches written ahead = %d, want 1 (the third)", n)
	}
}

// TestWriteAheadMeetsANewOwner: an owner going ahead (no lock until its guarded UPDATE)
// and a new owner that locked the offsets row first and writes the same message ids
// wait on each other: the new owner on the ahead owner's uncommitted ids, the ahead
// owner on the locked row. PostgreSQL breaks the deadlock by failing the side whose
// deadlock_timeout ends first. Either way each offset is written once, by one of them:
//   - new_owner_fails (its deadlock_timeout 100 ms): it rolls back; the ahead owner
//     commits its batch; the new owner, writing again, finds the row at 19;
//   - ahead_owner_fails (the new owner waits 5 s, the sink 1 s): the sink's transaction
//     fails, is rolled back and written the locking way, which waits for the new owner's
//     commit and then skips what it wrote.
func TestWriteAheadMeetsANewOwner(t *testing.T) {
	for _, aheadFails := range []bool{false, true} {
		name := map[bool]string{false: "new_owner_fails", true: "ahead_owner_fails"}[aheadFails]
		t.Run(name, func(t *testing.T) {
			db, url := testDB(t)
			tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
			c := sdktest.NewCommitter()
			s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true}`, url, tbl, off), "stop", c)
			if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			owner, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = owner.Rollback(ctx) }()
			timeout := "100ms"
			if aheadFails {
				timeout = "5s"
			}
			if _, err := owner.Exec(ctx, "SET LOCAL deadlock_timeout = '"+timeout+"'"); err != nil {
				t.Fatal(err)
			}
			if _, err := owner.Exec(ctx, "SELECT last_offset FROM "+off+" FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- consume(t, s, 0, msgs(10, 10, jsonPayload)) }()
			testkit.WaitFor(t, "the sink's guarded UPDATE waits on the locked row", func() bool {
				return count(t, db, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%WITH moved AS (UPDATE %"+off+"%'") == 1
			})
			write := func(tx pgx.Tx) error {
				for o := 10; o < 20; o++ {
					if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" (id, iggy_offset, iggy_stream, iggy_topic, iggy_partition_id, payload) VALUES ($1, $2, 's', 't', 0, '\"owner\"')",
						1000+o, o); err != nil {
						return err
					}
				}
				_, err := tx.Exec(ctx, "UPDATE "+off+" SET last_offset = 19")
				return err
			}
			err = write(owner)
			if aheadFails {
				if err != nil {
					t.Fatalf("the new owner's write: %v (the sink should have given way)", err)
				}
				if err := owner.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), "40P01") {
					t.Fatalf("the new owner's write = %v, want the deadlock (40P01)", err)
				}
				_ = owner.Rollback(ctx)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !aheadFails { // the new owner writes again: the row says 19, nothing to write
				if n := count(t, db, "SELECT last_offset FROM "+off); n != 19 {
					t.Fatalf("offsets row = %d after the sink's batch, want 19", n)
				}
			}
			wantPayload := map[bool]string{false: "sink", true: "owner"}[aheadFails]
			if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE iggy_offset BETWEEN 10 AND 19 AND (payload = '\"owner\"') = $1", wantPayload == "owner"); n != 10 {
				t.Fatalf("%d rows of 10..19 written by the %s, want all 10", n, wantPayload)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 20 {
				t.Fatalf("rows = %d, want 20", n)
			}
			if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl); n != 20 {
				t.Fatalf("distinct offsets = %d, want 20", n)
			}
			if n := count(t, db, "SELECT last_offset FROM "+off); n != 19 {
				t.Fatalf("offsets row = %d, want 19", n)
			}
			if last, _ := c.Committed(part(0)); last != 19 {
				t.Fatalf("last commit %d, want 19", last)
			}
		})
	}
}
