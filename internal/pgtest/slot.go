package pgtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs a statement: a *pgxpool.Pool, a *pgx.Conn.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// slotPoll is how often DropSlot tries again while the slot is held.
const slotPoll = 50 * time.Millisecond

// DropSlot drops the replication slot named slot, waiting while a walsender still holds
// it: the one of a source just closed, or of a process just killed, lets go of it a
// moment after its connection ended, and PostgreSQL gives no signal to wait on, so the
// drop is tried again every 50 ms. A slot that does not exist is no error. It returns the
// last failure when ctx ends first (a slot still in use, a server that does not answer).
func DropSlot(ctx context.Context, db Execer, slot string) error {
	t := time.NewTicker(slotPoll)
	defer t.Stop()
	var last error // the last failure not caused by ctx's end
	for {
		_, err := db.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop replication slot %s: %w (%w)", slot, last, ctx.Err())
		case <-t.C:
		}
	}
}
