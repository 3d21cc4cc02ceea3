package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestWarmBackendsOnEveryConnection: with warm_backends (the default) every connection the
// pool opens has sent the warm-up statement, and nothing else, before the sink gets it;
// with warm_backends = false a new connection has sent nothing.
func TestWarmBackendsOnEveryConnection(t *testing.T) {
	db, url := testDB(t)
	for _, tc := range []struct {
		name, setting, want string
	}{
		{"default", "", warmSQL},
		{"true", `,"warm_backends":true`, warmSQL},
		{"false", `,"warm_backends":false`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := fresh(t, db, "rows")
			s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"max_connections":3%s}`,
				url, tbl, fresh(t, db, "offs"), tc.setting), "stop", sdktest.NewCommitter())
			// A pool of the sink's own configuration, its AfterConnect included, whose
			// connections are all new; it never pings. pgxpool pings a connection acquired
			// more than a second after it began to be made, a new one too, and under load
			// connecting took that long: its "-- ping" then replaced the statement read
			// below. The ping is pgxpool's, not the sink's.
			pc := s.pool.Config()
			pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
			pool, err := pgxpool.NewWithConfig(context.Background(), pc)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			var conns []*pgxpool.Conn
			for range 3 {
				c, err := pool.Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			for _, c := range conns {
				var last, state string
				if err := db.QueryRow(context.Background(), "SELECT query, state FROM pg_stat_activity WHERE pid = $1",
					int(c.Conn().PgConn().PID())).Scan(&last, &state); err != nil {
					t.Fatalf("backend %d: %v", c.Conn().PgConn().PID(), err)
				}
				if last != tc.want || state != "idle" {
					t.Errorf("backend %d: last statement %q (%s), want %q (idle)", c.Conn().PgConn().PID(), last, state, tc.want)
				}
				c.Release()
			}
		})
	}
}
