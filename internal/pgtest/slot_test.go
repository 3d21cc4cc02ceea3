package pgtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDropSlot: DropSlot waits while a walsender holds the slot (a replication session
// streams from it), fails naming the slot when ctx ends first, and drops it once the
// session is gone; a slot that does not exist is no error.
func TestDropSlot(t *testing.T) {
	db, url := Connect(t)
	ctx := context.Background()
	const slot = "pgtest_drop_slot"
	if err := DropSlot(ctx, db, slot); err != nil {
		t.Fatalf("drop of a slot that does not exist: %v", err)
	}
	if _, err := db.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot) })
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = repl.Close(context.Background()) }()
	if err := pglogrepl.StartReplication(ctx, repl, slot, 0, pglogrepl.StartReplicationOptions{}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := DropSlot(short, db, slot); err == nil || !strings.Contains(err.Error(), "drop replication slot "+slot) || !strings.Contains(err.Error(), "active") {
		t.Fatalf("drop of a slot in use = %v; want it to wait, then fail naming the slot", err)
	}
	dropped := make(chan error, 1)
	go func() {
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		dropped <- DropSlot(wait, db, slot)
	}()
	_ = repl.Close(ctx) // the session ends; its walsender lets go of the slot
	if err := <-dropped; err != nil {
		t.Fatalf("drop after the session ended: %v", err)
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d slots named %s after the drop (%v)", n, slot, err)
	}
}
