package source

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func pollIDs(t *testing.T, s *Source) ([]int, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, ack, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, m := range b.Messages {
		var r struct {
			Table string `json:"table_name"`
			Op    string `json:"operation_type"`
			Data  struct {
				ID int `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(m.Payload, &r); err != nil || r.Op != "SELECT" || r.Table == "" {
			t.Fatalf("payload %s: %v", m.Payload, err)
		}
		ids = append(ids, r.Data.ID)
	}
	return ids, func() {
		if err := ack(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPollingSendThenAcknowledge: rows are read in tracking order, batch by batch; the
// tracking value, the deletes and the marks advance only when the batch is acknowledged,
// so a batch Iggy never confirmed is read again (at least once, no gap).
func TestPollingSendThenAcknowledge(t *testing.T) {
	f := newFixture(t, map[string]string{"p": "id int PRIMARY KEY, v text, done bool NOT NULL DEFAULT false"})
	tbl := f.table("p")
	f.tables = []string{tbl}
	f.exec("INSERT INTO " + tbl + " (id, v) SELECT g, 'v' || g FROM generate_series(1, 5) g")
	cfg := f.config(`, "mode": "polling", "batch_size": 3, "poll_interval": "20ms", "processed_column": "done"`)
	cfg = []byte(strings.Replace(string(cfg), `"mode": "cdc", `, "", 1))
	s := f.open(cfg, nil)
	ids, ack := pollIDs(t, s)
	if fmtInts(ids) != "[1 2 3]" {
		t.Fatalf("first batch %v", ids)
	}
	var marked int
	_ = f.db.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl+" WHERE done").Scan(&marked)
	if marked != 0 {
		t.Fatalf("%d rows marked before the batch was acknowledged", marked)
	}
	ack()
	_ = f.db.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl+" WHERE done").Scan(&marked)
	if marked != 3 {
		t.Fatalf("%d rows marked after the acknowledgement, want 3", marked)
	}
	ids, _ = pollIDs(t, s) // 4, 5: not acknowledged
	if fmtInts(ids) != "[4 5]" {
		t.Fatalf("second batch %v", ids)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Reopened with the state of the first batch (the second was never confirmed): 4, 5 again.
	state, _ := json.Marshal(pollState{TrackingOffsets: map[string]string{tbl: "3"}})
	s2 := f.open(cfg, state)
	ids, ack = pollIDs(t, s2)
	if fmtInts(ids) != "[4 5]" {
		t.Fatalf("after reopening: %v", ids)
	}
	ack()
	f.exec("INSERT INTO " + tbl + " (id, v) VALUES (6, 'late')")
	ids, _ = pollIDs(t, s2)
	if fmtInts(ids) != "[6]" {
		t.Fatalf("after an insert: %v", ids)
	}
}

// TestPollingDeleteAfterReadAndPayloadColumn: delete_after_read deletes only what Iggy
// acknowledged; payload_column with payload_format text sends the column alone.
func TestPollingDeleteAfterReadAndPayloadColumn(t *testing.T) {
	f := newFixture(t, map[string]string{"q": "id int PRIMARY KEY, body text"})
	tbl := f.table("q")
	f.tables = []string{tbl}
	f.exec("INSERT INTO " + tbl + " VALUES (1, 'one'), (2, 'two')")
	cfg := strings.Replace(string(f.config(`, "delete_after_read": true, "payload_column": "body", "payload_format": "text", "poll_interval": "20ms"`)),
		`"mode": "cdc"`, `"mode": "polling"`, 1)
	s := f.open([]byte(cfg), nil)
	ctx := context.Background()
	b, ack, err := s.Read(ctx)
	if err != nil || len(b.Messages) != 2 || string(b.Messages[0].Payload) != "one" || string(b.Messages[1].Payload) != "two" || b.Schema != "raw" {
		t.Fatalf("batch %+v, %v", b, err)
	}
	var n int
	_ = f.db.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&n)
	if n != 2 {
		t.Fatalf("%d rows before the acknowledgement, want 2", n)
	}
	if err := ack(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = f.db.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&n)
	if n != 0 {
		t.Fatalf("%d rows after the acknowledgement, want 0", n)
	}
}

func fmtInts(v []int) string { return fmt.Sprint(v) }

// TestPollingResumeFinishesRowsACrashLeft: a crash after the state was saved but before
// the DELETE leaves rows at or below the saved tracking value; the first round after
// reopening sends them again (the allowed duplicate) and deletes them, so none stays.
func TestPollingResumeFinishesRowsACrashLeft(t *testing.T) {
	f := newFixture(t, map[string]string{"r": "id int PRIMARY KEY, v text"})
	tbl := f.table("r")
	f.tables = []string{tbl}
	f.exec("INSERT INTO " + tbl + " (id, v) SELECT g, 'v' || g FROM generate_series(1, 5) g")
	cfg := strings.Replace(string(f.config(`, "delete_after_read": true, "poll_interval": "20ms"`)), `"mode": "cdc"`, `"mode": "polling"`, 1)
	state, _ := json.Marshal(pollState{TrackingOffsets: map[string]string{tbl: "3"}})
	s := f.open([]byte(cfg), state)
	ids, ack := pollIDs(t, s)
	if fmtInts(ids) != "[1 2 3 4 5]" {
		t.Fatalf("first round after reopening: %v, want the 3 rows left behind and 4, 5", ids)
	}
	ack()
	var n int
	_ = f.db.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl).Scan(&n)
	if n != 0 {
		t.Fatalf("%d rows after the acknowledgement, want 0", n)
	}
	f.exec("INSERT INTO " + tbl + " (id, v) VALUES (6, 'late')")
	ids, _ = pollIDs(t, s)
	if fmtInts(ids) != "[6]" {
		t.Fatalf("after an insert: %v", ids)
	}
}
