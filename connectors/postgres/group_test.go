package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// groupCfg is the plugin_config of a group-commit sink into tbl/off.
func groupCfg(url, tbl, off, flush string, maxRows int) string {
	return fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json",
		"flush_interval":%q,"max_rows_per_transaction":%d}`, url, tbl, off, flush, maxRows)
}

// withAppName returns the connection URL u with application_name set to name.
func withAppName(t *testing.T, u, name string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("FERRY_POSTGRES_URL: %v", err)
	}
	q := parsed.Query()
	q.Set("application_name", name)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// waitUntil polls cond every 10 ms until it holds or 20 s pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGroupSpansBatchesUntilMaxRows: with max_rows_per_transaction 250, the first two
// batches of 100 stay in one open transaction (nothing visible, nothing committed to
// Iggy), the third commits all 300 with offsets row 299; Close commits the rest.
func TestGroupSpansBatchesUntilMaxRows(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	c := sdktest.NewCommitter()
	s := open(t, groupCfg(url, tbl, off, "1h", 250), "stop", c)
	for i, first := range []uint64{0, 100} {
		if err := consume(t, s, 0, msgs(first, 100, jsonPayload)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 0 {
			t.Fatalf("after batch %d: %d rows visible, want 0 (the group is open)", i, n)
		}
		if _, ok := c.Committed(part(0)); ok {
			t.Fatalf("after batch %d: committed to Iggy before the transaction committed", i)
		}
	}
	if err := consume(t, s, 0, msgs(200, 100, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE payload->>'n' = iggy_offset::text"); n != 300 {
		t.Fatalf("rows after the third batch = %d, want 300", n)
	}
	if n := count(t, db, "SELECT last_offset FROM "+off); n != 299 {
		t.Fatalf("offsets row = %d, want 299", n)
	}
	if off, _ := c.Committed(part(0)); off != 299 {
		t.Fatalf("commit = %d, want 299", off)
	}
	if err := consume(t, s, 0, msgs(300, 50, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 350 {
		t.Fatalf("rows after Close = %d, want 350", n)
	}
	if n := count(t, db, "SELECT last_offset FROM "+off); n != 349 {
		t.Fatalf("offsets row after Close = %d, want 349", n)
	}
	if off, _ := c.Committed(part(0)); off != 349 {
		t.Fatalf("commit after Close = %d, want 349", off)
	}
}

// TestGroupCommitsAtFlushInterval: one batch, no more: the timer commits it.
func TestGroupCommitsAtFlushInterval(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	c := sdktest.NewCommitter()
	s := open(t, groupCfg(url, tbl, off, "50ms", 10000), "stop", c)
	for p := range uint32(3) {
		if err := consume(t, s, p, msgs(0, 100, jsonPayload)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the three groups committed by their timers", func() bool {
		for p := range uint32(3) {
			if off, ok := c.Committed(part(p)); !ok || off != 99 {
				return false
			}
		}
		return true
	})
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 300 {
		t.Fatalf("rows = %d, want 300", n)
	}
	if n := count(t, db, "SELECT sum(last_offset) FROM "+off); n != 3*99 {
		t.Fatalf("offsets rows sum = %d, want 297", n)
	}
}

// TestGroupRejectedRowInItsOwnBatch: a row the database refuses is found in the Consume
// that delivered it (its savepoint), never later: under dead_letter it alone comes back
// as RejectedMessages and the group goes on; under stop that Consume fails, the group
// keeps the batch before it, and Close commits only that.
func TestGroupRejectedRowInItsOwnBatch(t *testing.T) {
	bad := func(o uint64) string {
		if o == 13 {
			return "not json"
		}
		return jsonPayload(o)
	}
	t.Run("dead_letter", func(t *testing.T) {
		db, url := testDB(t)
		tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
		c := sdktest.NewCommitter()
		s := open(t, groupCfg(url, tbl, off, "1h", 10000), "dead_letter", c)
		if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
			t.Fatal(err)
		}
		err := consume(t, s, 0, msgs(10, 10, bad))
		var rej *sdk.RejectedMessages
		if !errors.As(err, &rej) || fmt.Sprint(rej.Offsets) != "[13]" || !strings.Contains(rej.Error(), "22P02") {
			t.Fatalf("Consume = %v; want RejectedMessages [13] with SQLSTATE 22P02", err)
		}
		if err := consume(t, s, 0, msgs(20, 10, jsonPayload)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_offset <> 13"); n != 29 {
			t.Fatalf("rows = %d, want the 29 others", n)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 29 {
			t.Fatalf("rows = %d, want 29", n)
		}
		if n := count(t, db, "SELECT last_offset FROM "+off); n != 29 {
			t.Fatalf("offsets row = %d, want 29", n)
		}
		if off, _ := c.Committed(part(0)); off != 29 {
			t.Fatalf("commit = %d, want 29", off)
		}
	})
	t.Run("stop", func(t *testing.T) {
		db, url := testDB(t)
		tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
		c := sdktest.NewCommitter()
		s := open(t, groupCfg(url, tbl, off, "1h", 10000), "stop", c)
		if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
			t.Fatal(err)
		}
		err := consume(t, s, 0, msgs(10, 10, bad))
		var rej *sdk.RejectedMessages
		if err == nil || errors.As(err, &rej) || !strings.Contains(err.Error(), "offset 13 rejected") {
			t.Fatalf("Consume = %v; want an error naming offset 13", err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE iggy_offset < 10"); n != 10 {
			t.Fatalf("rows of the first batch = %d, want 10", n)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 10 {
			t.Fatalf("rows = %d, want 10 (nothing of the refused batch)", n)
		}
		if n := count(t, db, "SELECT last_offset FROM "+off); n != 9 {
			t.Fatalf("offsets row = %d, want 9", n)
		}
		if off, _ := c.Committed(part(0)); off != 9 {
			t.Fatalf("commit = %d, want 9", off)
		}
	})
}

// TestGroupAssignedAgainCommitsFirst: a partition assigned again while its group is open
// commits the group before its start is read, so it starts after it; a redelivery that
// overlaps an open group writes only what is new.
func TestGroupAssignedAgainCommitsFirst(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	s := open(t, groupCfg(url, tbl, off, "1h", 10000), "stop", sdktest.NewCommitter())
	if err := consume(t, s, 0, msgs(0, 100, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if err := consume(t, s, 0, msgs(50, 100, jsonPayload)); err != nil { // 50..99 again
		t.Fatal(err)
	}
	got, err := s.Assigned(context.Background(), topic, []sdk.Partition{part(0)})
	if err != nil {
		t.Fatal(err)
	}
	if got[part(0)] != 150 {
		t.Fatalf("Assigned = %v, want partition 0 at 150", got)
	}
	if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl); n != 150 {
		t.Fatalf("distinct offsets = %d, want 150", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 150 {
		t.Fatalf("rows = %d, want 150", n)
	}
}

// TestGroupTransactionLost: the group's backend is terminated while it holds two batches;
// the next batch finds the transaction gone, writes those two again in a new one
// (committed at once) and opens a new group with itself: every row once, the offsets row
// and the commit at the last offset after Close.
func TestGroupTransactionLost(t *testing.T) {
	db, url := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	c := sdktest.NewCommitter()
	// The packages' tests share one database: the sink's connections carry a name of
	// their own, so the backend terminated is the group's and no other test's.
	app := "ferry_group_lost_" + strconv.Itoa(os.Getpid())
	s := open(t, groupCfg(withAppName(t, url, app), tbl, off, "1h", 10000), "stop", c)
	for _, first := range []uint64{0, 100} {
		if err := consume(t, s, 0, msgs(first, 100, jsonPayload)); err != nil {
			t.Fatal(err)
		}
	}
	var pid int32
	if err := db.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
WHERE application_name = $1 AND state = 'idle in transaction' AND backend_xid IS NOT NULL`, app).Scan(&pid); err != nil {
		t.Fatalf("the group's open transaction: %v", err)
	}
	// The timeout makes the call wait until the backend has exited.
	var gone bool
	if err := db.QueryRow(context.Background(), "SELECT pg_terminate_backend($1, 20000)", pid).Scan(&gone); err != nil || !gone {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v; want true", pid, gone, err)
	}
	if err := consume(t, s, 0, msgs(200, 100, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(part(0)); off != 199 {
		t.Fatalf("commit = %d, want 199 (the lost group written again at once)", off)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 200 {
		t.Fatalf("rows before Close = %d, want 200 (the third batch in an open group)", n)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(part(0)); off != 299 {
		t.Fatalf("commit after Close = %d, want 299", off)
	}
	if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE payload->>'n' = iggy_offset::text"); n != 300 {
		t.Fatalf("distinct rows = %d, want 300", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 300 {
		t.Fatalf("rows = %d, want 300", n)
	}
	if n := count(t, db, "SELECT last_offset FROM "+off); n != 299 {
		t.Fatalf("offsets row = %d, want 299", n)
	}
}

func TestGroupConfig(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`{"connection_string":"x","flush_interval":"soon"}`, `flush_interval`},
		{`{"connection_string":"x","flush_interval":"1s","max_rows_per_transaction":-1}`, `plugin_config.max_rows_per_transaction: -1 is below the minimum 0`},
	} {
		if _, err := Config.Parse([]byte(tc.cfg)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Config.Parse(%s) = %v; want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	c, err := Config.Parse([]byte(`{"connection_string":"x","flush_interval":"250ms"}`))
	if err != nil || c.FlushInterval != 250*time.Millisecond || c.MaxRowsPerTransaction != defaultMaxRowsPerTransaction {
		t.Fatalf("parseConfig = %+v, %v; want flush_interval 250ms, max_rows_per_transaction %d", c, err, defaultMaxRowsPerTransaction)
	}
}

// TestGroupCommitsWhenCaughtUp: a batch that reaches the partition's end as its poll saw it
// commits the open group at once (the timer is an hour away); a batch with more waiting
// does not; with commit_when_caught_up = false the group waits for its age or size.
func TestGroupCommitsWhenCaughtUp(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		db, url := testDB(t)
		tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
		c := sdktest.NewCommitter()
		s := open(t, groupCfg(url, tbl, off, "1h", 10000), "stop", c)
		if err := consume(t, s, 0, msgs(0, 100, jsonPayload)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 0 {
			t.Fatalf("%d rows visible with more waiting, want 0 (the group is open)", n)
		}
		if _, ok := c.Committed(part(0)); ok {
			t.Fatal("committed to Iggy with the group open")
		}
		if err := consumeAtEnd(t, s, 0, msgs(100, 50, jsonPayload)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 150 {
			t.Fatalf("rows after the batch that reached the end = %d, want 150", n)
		}
		if n := count(t, db, "SELECT last_offset FROM "+off); n != 149 {
			t.Fatalf("offsets row = %d, want 149", n)
		}
		if o, _ := c.Committed(part(0)); o != 149 {
			t.Fatalf("commit = %d, want 149", o)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("off", func(t *testing.T) {
		db, url := testDB(t)
		tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
		c := sdktest.NewCommitter()
		cfg := strings.TrimSuffix(groupCfg(url, tbl, off, "1h", 10000), "}") + `,"commit_when_caught_up":false}`
		s := open(t, cfg, "stop", c)
		if err := consumeAtEnd(t, s, 0, msgs(0, 100, jsonPayload)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 0 {
			t.Fatalf("%d rows visible, want 0 (commit_when_caught_up = false)", n)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 100 {
			t.Fatalf("rows after Close = %d, want 100", n)
		}
		if o, _ := c.Committed(part(0)); o != 99 {
			t.Fatalf("commit after Close = %d, want 99", o)
		}
	})
}
