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
			// Every connection the pool opens from here on is new.
			s.pool.Reset()
			var conns []*pgxpool.Conn
			for range 3 {
				c, err := s.pool.Acquire(context.Background())
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
