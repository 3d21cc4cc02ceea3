package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

// syncBuffer is a log sink the runtime's goroutines may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRuntime runs one source connector file as `ferry run` would (built-ins, a state
// directory of its own) over kit's server, logging into the returned buffer.
func startRuntime(t *testing.T, kit *iggykit.Env, file string) (*connect.Runtime, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "src.toml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	logs := &syncBuffer{}
	rt := runkit.Start(t, connect.Options{Connectors: conns, Runtime: rc, Client: kit.Dial(), Builtins: connectors.Registry(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	return rt, logs
}

// topicRecords reads partition 0 of s/t: each message's table_name and data.
func topicRecords(t *testing.T, kit *iggykit.Env) []string {
	t.Helper()
	part := uint32(0)
	r, err := kit.Admin.PollMessages(kit.Ctx(), iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(5)},
		Stream: iggy.Name("s"), Topic: iggy.Name("t"), Partition: &part, Strategy: wire.PollOffset(0), Count: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	out := make([]string, 0, len(r.Messages))
	for _, m := range r.Messages {
		var rec struct {
			Table string          `json:"table_name"`
			Op    string          `json:"operation_type"`
			Data  json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.Payload, &rec); err != nil {
			t.Fatalf("offset %d: %v", m.Offset, err)
		}
		out = append(out, rec.Table+" "+rec.Op+" "+string(rec.Data))
	}
	return out
}

func execAll(t *testing.T, q ...string) {
	t.Helper()
	db, _ := pgtest.Connect(t)
	for _, s := range q {
		if _, err := db.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestCDCOversizedRowSkippedAlone: a row whose change is over Iggy's 64,000,000-byte
// message limit, committed just before a valid one, both waiting in the slot when the
// source starts (so one read may hold both): under on_failure = skip only the oversized
// change is skipped (messages=1, the line naming its table and commit LSN), the next
// transaction's change is in Iggy, and the source is running with no last error. Before,
// the client refused the send of the whole batch, which could hold both transactions
// ("skipped … messages=2"), and the retries left the status in error while the source
// went on delivering.
func TestCDCOversizedRowSkippedAlone(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("s", "t", 1)
	_, url := pgtest.Connect(t)
	slot, tbl := "s_cdc_oversized", "s_cdc_oversized_rows"
	cleanup := func() {
		db, _ := pgtest.Connect(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pgtest.DropSlot(ctx, db, slot); err != nil {
			t.Fatal(err)
		}
		_, _ = db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+slot+"_pub")
		_, _ = db.Exec(ctx, "DROP TABLE IF EXISTS "+tbl)
	}
	cleanup()
	execAll(t, "CREATE TABLE "+tbl+" (id int PRIMARY KEY, body text)",
		"CREATE PUBLICATION "+slot+"_pub FOR TABLE "+tbl,
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')",
		"INSERT INTO "+tbl+" VALUES (1, repeat('x', 64000000))", // its record is over the limit by its envelope
		"INSERT INTO "+tbl+" VALUES (2, 'small')")
	rt, logs := startRuntime(t, kit, fmt.Sprintf(`type = "source"
key = "cdc"
enabled = true
version = 0
name = "cdc"
path = "builtin:postgres"
on_failure = "skip"

[[streams]]
stream = "s"
topic = "t"
schema = "json"

[retry]
max_retries = 1
initial_backoff = "10ms"

[plugin_config]
connection_string = %q
mode = "cdc"
tables = [%q]
replication_slot = %q
`, url, tbl, slot))
	t.Cleanup(func() { runkit.Stop(t, rt); cleanup() })
	testkit.WaitFor(t, "both changes handled", func() bool {
		st, _ := rt.Connector(connect.KindSource, "cdc")
		return st.Stats.Committed >= 2
	})
	got := topicRecords(t, kit)
	if want := tbl + ` INSERT {"id":2,"body":"small"}`; len(got) != 1 || got[0] != want {
		t.Fatalf("topic holds %q; want exactly %q", got, want)
	}
	st, _ := rt.Connector(connect.KindSource, "cdc")
	if st.State != connect.StateRunning || st.LastError != nil || st.Stats.Skipped != 1 || st.Stats.Sent != 1 || st.Stats.FailedBatches != 0 {
		t.Fatalf("status %s, last error %+v, stats %+v; want running, none, 1 skipped, 1 sent, no failed batch", st.State, st.LastError, st.Stats)
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "skipped (on_failure = skip)") {
			line = l
		}
	}
	if !strings.Contains(line, "messages=1") || !strings.Contains(line, "stage=send") || !strings.Contains(line, "table public."+tbl+", commit LSN ") ||
		!strings.Contains(line, "over Iggy's limit of 64000000 bytes per message") {
		t.Fatalf("skip line %s want messages=1, stage=send, the table and commit LSN, the limit", line)
	}
}

// TestPollingTextTrackingColumn: a text tracking column whose values look like numbers
// ('0001') is compared as text: every row reaches Iggy in order, the processed marks land
// (the keys bound as text too), and the source is running. Before, the values were written
// into the query bare, and PostgreSQL refused `text > integer`: no message, the source in
// error, retrying forever.
func TestPollingTextTrackingColumn(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("s", "t", 1)
	db, url := pgtest.Connect(t)
	tbl := "s_poll_text_tracking"
	execAll(t, "DROP TABLE IF EXISTS "+tbl, "CREATE TABLE "+tbl+" (code text PRIMARY KEY, v int, done bool NOT NULL DEFAULT false)",
		"INSERT INTO "+tbl+" (code, v) VALUES ('0001', 1), ('0002', 2), ('0010', 10)")
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+tbl) })
	rt, _ := startRuntime(t, kit, fmt.Sprintf(`type = "source"
key = "poll"
enabled = true
version = 0
name = "poll"
path = "builtin:postgres"

[[streams]]
stream = "s"
topic = "t"
schema = "json"

[plugin_config]
connection_string = %q
mode = "polling"
tables = [%q]
tracking_column = "code"
primary_key_column = "code"
processed_column = "done"
initial_offset = "0000"
batch_size = 2
poll_interval = "20ms"
`, url, tbl))
	testkit.WaitFor(t, "3 rows sent and marked", func() bool {
		var n int
		_ = db.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl+" WHERE done").Scan(&n)
		st, _ := rt.Connector(connect.KindSource, "poll")
		return st.Stats.Committed == 3 && n == 3
	})
	got := topicRecords(t, kit)
	want := []string{
		tbl + ` SELECT {"code":"0001","v":1,"done":false}`,
		tbl + ` SELECT {"code":"0002","v":2,"done":false}`,
		tbl + ` SELECT {"code":"0010","v":10,"done":false}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("topic holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	st, _ := rt.Connector(connect.KindSource, "poll")
	if st.State != connect.StateRunning || st.LastError != nil {
		t.Fatalf("status %s, last error %+v; want running, none", st.State, st.LastError)
	}
}
