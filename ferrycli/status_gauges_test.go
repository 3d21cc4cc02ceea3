package ferrycli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
)

// statusGauges is the gauges section of ferry status for connector "KIND KEY".
func statusGauges(t *testing.T, cfg, who string) map[string]uint64 {
	t.Helper()
	out, err := runControl(t, cfg, "status")
	if err != nil {
		t.Fatalf("ferry status: %v\n%s", err, out)
	}
	_, section, ok := strings.Cut(out, "\n"+who+": gauges\n")
	if !ok {
		return nil
	}
	g := map[string]uint64{}
	for l := range strings.Lines(section) {
		f := strings.Fields(l)
		if len(f) != 2 {
			break
		}
		if f[0] == "NAME" {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("gauge line %q: %v\n%s", l, err, out)
		}
		g[f[0]] = v
	}
	return g
}

// TestStatusCDCGaugesAfterRestart: ferry status prints the CDC source's gauges (slot lag,
// last sent and confirmed LSNs), and right after a restart of the source, with no change
// since, pg_last_sent_lsn is what it was before (the last change Iggy holds), not 0, and
// the lag and confirmed position are the slot's. Before, ferry status printed no gauges
// and a restarted source reported 0 until its next acknowledged change.
func TestStatusCDCGaugesAfterRestart(t *testing.T) {
	db, url := pgtest.Connect(t)
	ctx := context.Background()
	name := fmt.Sprintf("gauges_%d", time.Now().UnixNano()%1_000_000)
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pgtest.DropSlot(context.Background(), db, name)
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+name)
		_, _ = db.Exec(context.Background(), "DROP PUBLICATION IF EXISTS "+name)
	})
	src := fmt.Sprintf("type = \"source\"\nkey = \"cdc\"\nenabled = true\nversion = 0\nname = \"cdc\"\npath = \"builtin:postgres\"\n\n"+
		"[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"json\"\n\n[plugin_config]\nconnection_string = %q\nmode = \"cdc\"\ntables = [%q]\n"+
		"replication_slot = %q\npublication = %q\nstatus_interval = \"100ms\"\n", url, name, name, name)
	cfg, _, _, _ := startRunWith(t, map[string]string{"cdc.toml": src}, nil, func(logs string) bool {
		return strings.Contains(logs, "sink running") && strings.Contains(logs, "postgres source: streaming changes")
	})
	// A new slot, nothing sent yet: the last sent position is the slot's (all before it is
	// sent, as far as the source can know).
	var first map[string]uint64
	testkit.WaitFor(t, "the source's gauges in ferry status", func() bool {
		first = statusGauges(t, cfg, "source cdc")
		return len(first) == 3
	})
	if first["pg_last_sent_lsn"] == 0 || first["pg_last_sent_lsn"] > first["pg_confirmed_flush_lsn"] {
		t.Fatalf("gauges of the new slot %v: want pg_last_sent_lsn the slot's position (non-zero, not past the confirmed one)", first)
	}
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" VALUES (1), (2), (3)"); err != nil { // one transaction: one commit LSN
		t.Fatal(err)
	}
	var before map[string]uint64
	testkit.WaitFor(t, "pg_last_sent_lsn of the insert in ferry status", func() bool {
		before = statusGauges(t, cfg, "source cdc")
		return before["pg_last_sent_lsn"] > first["pg_last_sent_lsn"]
	})
	if len(before) != 3 {
		t.Fatalf("gauges %v; want pg_slot_lag_bytes, pg_last_sent_lsn, pg_confirmed_flush_lsn", before)
	}

	if out, err := runControl(t, cfg, "restart", "cdc"); err != nil {
		t.Fatal(out, err)
	}
	slot := func() (confirmed, end uint64) {
		var c, e pglogrepl.LSN
		if err := db.QueryRow(ctx, "SELECT confirmed_flush_lsn, pg_current_wal_lsn() FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&c, &e); err != nil {
			t.Fatal(err)
		}
		return uint64(c), uint64(e)
	}
	confirmedBefore, _ := slot()
	var after map[string]uint64
	testkit.WaitFor(t, "the restarted source's gauges", func() bool {
		after = statusGauges(t, cfg, "source cdc")
		return len(after) == 3
	})
	confirmedAfter, endAfter := slot()
	if after["pg_last_sent_lsn"] != before["pg_last_sent_lsn"] {
		t.Fatalf("pg_last_sent_lsn after the restart %d, before %d (gauges %v)", after["pg_last_sent_lsn"], before["pg_last_sent_lsn"], after)
	}
	c := after["pg_confirmed_flush_lsn"]
	if c < confirmedBefore || c > confirmedAfter {
		t.Fatalf("pg_confirmed_flush_lsn %d; the slot's was %d, then %d", c, confirmedBefore, confirmedAfter)
	}
	if end := c + after["pg_slot_lag_bytes"]; end < c || end > endAfter || end == 0 {
		t.Fatalf("pg_slot_lag_bytes %d: the server's end it counts from, %d, is not up to the WAL's %d", after["pg_slot_lag_bytes"], end, endAfter)
	}
}
