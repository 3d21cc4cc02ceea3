package postgres

import (
	"context"
	"fmt"

	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestSinkExactlyOnceAtEveryCrash: the guarantee the sink states, exactly once, judged
// by the kit's harness against a real PostgreSQL: open, every partition assigned (the
// seek from the offsets table), batches of three partitions, the runtime storing what
// the sink committed (sink_controlled), a rebalance that takes partition 0 away and gives
// it back, close; run whole, then with a crash at each of those steps followed by a new
// instance. The table, read back, must hold every message once with its payload. The
// target table has no key on id, so a message written twice shows as twice, not as a
// refused row. Per batch (one transaction each) and with group commit (transactions open
// across batches and steps, committed at the rebalance and at Close; a crash kills their
// sessions, as a process death does, and PostgreSQL rolls them back).
func TestSinkExactlyOnceAtEveryCrash(t *testing.T) {
	db, url := testDB(t)
	for _, tc := range []struct{ name, cfg string }{
		{"per_batch", ``},
		{"group", `,"flush_interval":"1h","commit_when_caught_up":false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
			sdktest.SinkHarness{
				New:            func() sdk.Sink { return New() },
				Config:         fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q%s}`, url, tbl, off, tc.cfg),
				SinkControlled: true,
				Guarantee:      sdktest.ExactlyOnce,
				Reset: func(ctx context.Context) error {
					_, err := db.Exec(ctx, "DROP TABLE IF EXISTS "+tbl+", "+off+"; CREATE TABLE "+tbl+` (id numeric(39,0), iggy_offset bigint,
	iggy_timestamp timestamptz, iggy_stream text, iggy_topic text, iggy_partition_id integer, iggy_checksum bigint,
	iggy_origin_timestamp timestamptz, payload bytea, created_at timestamptz DEFAULT now())`)
					return err
				},
				Read: func(ctx context.Context) ([]sdktest.Record, error) {
					rows, err := db.Query(ctx, "SELECT iggy_partition_id, iggy_offset, payload FROM "+tbl)
					if err != nil {
						return nil, err
					}
					return pgx.CollectRows(rows, func(r pgx.CollectableRow) (sdktest.Record, error) {
						var rec sdktest.Record
						var p int32
						var o int64
						err := r.Scan(&p, &o, &rec.Payload)
						rec.Partition, rec.Offset = uint32(p), uint64(o)
						return rec, err
					})
				},
				Crash: crashSink,
			}.CrashAtEveryStep(t)
		})
	}
}

// crashSink does to PostgreSQL what the death of the sink's process would: its groups'
// flush timers never commit, and the connections of its open transactions close under
// them (the server rolls them back and releases their offsets rows). Nothing is
// committed or rolled back politely.
func crashSink(sk sdk.Sink) {
	s := sk.(*Sink)
	s.groups.closed.Store(true) // a timer that fires now does nothing
	for _, g := range s.groups.all() {
		g.mu.Lock()
		if g.conn != nil {
			_ = g.conn.Conn().PgConn().Conn().Close()
		}
		g.mu.Unlock()
	}
}
