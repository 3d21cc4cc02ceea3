package postgres_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

// TestProgramLimitRowThroughTheRuntime: 10 messages in Iggy, offset 4 a JSON array
// nested 100,000 deep, which jsonb refuses with SQLSTATE 54001; the runtime (embedded
// server, sink_controlled) runs the PostgreSQL sink. Under on_failure = skip the table
// holds the 9 others and the sink counts 1 skipped; under dead_letter the dead-letter
// topic holds offset 4 alone, with its payload, ferry-stage consume and the SQLSTATE. Both
// record offset 9 in the offsets table and store it in Iggy. Before, the whole batch went
// to on_failure: no row written, 10 skipped or dead-lettered. The stream's schema is raw:
// a json stream's decode refuses a document that deep itself (a poison message).
func TestProgramLimitRowThroughTheRuntime(t *testing.T) {
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	for _, onFailure := range []string{"skip", "dead_letter"} {
		t.Run(onFailure, func(t *testing.T) {
			db, url := pgtest.Connect(t)
			tbl := "t_runtime_54001_" + onFailure
			for _, q := range []string{"DROP TABLE IF EXISTS " + tbl, "DROP TABLE IF EXISTS " + tbl + "_offsets"} {
				if _, err := db.Exec(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+tbl+", "+tbl+"_offsets") })
			kit := iggykit.Start(t)
			kit.Topic("s", "t", 1)
			kit.Topic("dlq", "rejected", 1)
			payloads := make([]string, 10)
			for i := range payloads {
				payloads[i] = fmt.Sprintf(`{"n":%d}`, i)
			}
			payloads[4] = deep
			kit.Produce("s", "t", 0, payloads...)
			dl := ""
			if onFailure == "dead_letter" {
				dl = "\n[dead_letter]\nstream = \"dlq\"\ntopic = \"rejected\"\n"
			}
			rt := runkit.StartFiles(t, kit.Dial(), map[string]string{"pg.toml": fmt.Sprintf(`type = "sink"
key = "pg"
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
schema = "raw"
batch_length = 100
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
`, onFailure, dl, url, tbl, tbl+"_offsets")})
			testkit.WaitFor(t, "offset 9 stored", func() bool { o, ok := kit.Stored("iggy-connect-sink-pg", "s", "t", 0); return ok && o == 9 })
			var got string
			if err := db.QueryRow(context.Background(), "SELECT coalesce(string_agg(iggy_offset::text, ',' ORDER BY iggy_offset), '') FROM "+tbl+
				" WHERE (payload->>'n')::bigint = iggy_offset").Scan(&got); err != nil {
				t.Fatal(err)
			}
			var rows, last int64
			if err := db.QueryRow(context.Background(), "SELECT (SELECT count(*) FROM "+tbl+"), (SELECT last_offset FROM "+tbl+"_offsets)").Scan(&rows, &last); err != nil {
				t.Fatal(err)
			}
			if got != "0,1,2,3,5,6,7,8,9" || rows != 9 || last != 9 {
				t.Fatalf("table offsets %q (%d rows), offsets row %d; want 0..9 but 4 (9 rows), 9", got, rows, last)
			}
			st, _ := rt.Connector(connect.KindSink, "pg")
			wantSkipped, wantDead := uint64(1), uint64(0)
			if onFailure == "dead_letter" {
				wantSkipped, wantDead = 0, 1
			}
			if st.Stats.Skipped != wantSkipped || st.Stats.DeadLettered != wantDead {
				t.Fatalf("skipped %d, dead-lettered %d; want %d, %d", st.Stats.Skipped, st.Stats.DeadLettered, wantSkipped, wantDead)
			}
			part := uint32(0)
			r, err := kit.Admin.PollMessages(kit.Ctx(), iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(9)},
				Stream: iggy.Name("dlq"), Topic: iggy.Name("rejected"), Partition: &part, Strategy: wire.PollOffset(0), Count: 10})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if onFailure == "skip" {
				if len(r.Messages) != 0 {
					t.Fatalf("dead-letter topic holds %d messages under skip, want 0", len(r.Messages))
				}
				return
			}
			if len(r.Messages) != 1 {
				t.Fatalf("dead-letter topic holds %d messages, want 1", len(r.Messages))
			}
			m := r.Messages[0]
			kvs, err := m.Headers(nil)
			if err != nil {
				t.Fatal(err)
			}
			hs := map[string][]byte{}
			for _, kv := range kvs {
				hs[string(kv.Key.Raw)] = kv.Value.Raw
			}
			off := hs[connect.HeaderSourceOffset]
			if string(m.Payload) != deep || string(hs[connect.HeaderStage]) != "consume" || len(off) != 8 || binary.LittleEndian.Uint64(off) != 4 ||
				!strings.Contains(string(hs[connect.HeaderError]), "54001") {
				t.Fatalf("dead letter: %d payload bytes, stage %q, source offset %x, error %q; want the deep payload, consume, 4, SQLSTATE 54001",
					len(m.Payload), hs[connect.HeaderStage], off, hs[connect.HeaderError])
			}
		})
	}
}
