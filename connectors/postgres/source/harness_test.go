package source

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestCDCExactlyOnceAtEveryCrash: the guarantee the CDC source states, exactly once into
// Iggy, judged by the kit's harness against a real PostgreSQL. 30 changes (20 inserts, 10
// updates, in 10 transactions) wait in a new slot; the source reads them, the harness
// appends each batch to the topic (the kit's Log, 3 partitions, partitioned by key),
// saves the state and acknowledges; run whole, then with a crash at each step followed by
// a new instance. The crash between the append and the ack is the one exactly once is
// about: the changes are in the topic but neither the state nor the slot moved, so the
// next instance reads them again from the slot and must skip them by reading the topic
// back. The topic must hold each change once, and each partition the changes in commit
// order. The origin is a live server: a crashed instance's replication session would
// hold the slot, which only the next instance's process could have, so Crash ends the
// session (crashSource) as the death of the process would.
func TestCDCExactlyOnceAtEveryCrash(t *testing.T) {
	f := newFixture(t, map[string]string{"h": "id int PRIMARY KEY, v int NOT NULL"})
	tbl := f.table("h")
	const txns = 10
	var want []string // operation id v, sorted
	for n := range txns {
		want = append(want, fmt.Sprintf("INSERT %d %d", 2*n+1, n), fmt.Sprintf("INSERT %d %d", 2*n+2, n))
		want = append(want, fmt.Sprintf("UPDATE %d %d", 2*n+1, 100+n))
	}
	sort.Strings(want)
	sdktest.SourceHarness{
		New:    func() sdk.Source { return New() },
		Config: f.config(`, "batch_size": 4, "status_interval": "20ms", "retry_delay": "10ms"`),
		Reset: func(ctx context.Context) error {
			if err := pgtest.DropSlot(ctx, f.db, f.slot); err != nil {
				return err
			}
			for _, q := range []string{"DROP PUBLICATION IF EXISTS " + f.slot + "_pub", "TRUNCATE " + tbl,
				"CREATE PUBLICATION " + f.slot + "_pub FOR TABLE " + tbl,
				"SELECT pg_create_logical_replication_slot('" + f.slot + "', 'pgoutput')"} {
				if _, err := f.db.Exec(ctx, q); err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
			}
			for n := range txns {
				err := pgx.BeginFunc(ctx, f.db, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, $3), ($2, $3)", 2*n+1, 2*n+2, n); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, "UPDATE "+tbl+" SET v = 100 + $2 WHERE id = $1", 2*n+1, n)
					return err
				})
				if err != nil {
					return err
				}
			}
			return nil
		},
		Done: func(log *sdktest.Log) bool {
			held, _ := changes(f.slot, log)
			return len(held) >= len(want)
		},
		Check: func(t *testing.T, log *sdktest.Log) { checkExactlyOnce(t, f.slot, log, want) },
		Crash: crashSource,
	}.CrashAtEveryStep(t)
}

// heldChange is a change as the topic holds it: its position and what it says.
type heldChange struct {
	pos       position
	partition uint32
	what      string // operation id v
}

// changes reads the topic's changes of slot, each position once (the first copy), and
// what is wrong with the messages that are none.
func changes(slot string, log *sdktest.Log) (map[position]heldChange, error) {
	out := map[position]heldChange{}
	for _, m := range log.All() {
		p, ok := positionOf(m.Message.Headers, slot)
		if !ok {
			return out, fmt.Errorf("partition %d offset %d: a message without the slot's position headers", m.Partition, m.Offset)
		}
		var r struct {
			Op   string              `json:"operation_type"`
			Data struct{ ID, V int } `json:"data"`
		}
		if err := json.Unmarshal(m.Message.Payload, &r); err != nil {
			return out, fmt.Errorf("partition %d offset %d: %w", m.Partition, m.Offset, err)
		}
		if _, dup := out[p]; !dup {
			out[p] = heldChange{pos: p, partition: m.Partition, what: fmt.Sprintf("%s %d %d", r.Op, r.Data.ID, r.Data.V)}
		}
	}
	return out, nil
}

// checkExactlyOnce requires the topic to hold exactly the changes want, each once, and
// each partition's in commit order.
func checkExactlyOnce(t *testing.T, slot string, log *sdktest.Log, want []string) {
	t.Helper()
	all := log.All()
	held, err := changes(slot, log)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range held {
		got = append(got, c.what)
	}
	sort.Strings(got)
	if len(all) != len(want) || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the topic holds %d messages, %d changes:\n%s\nwant each of %d once:\n%s", len(all), len(held),
			strings.Join(got, ","), len(want), strings.Join(want, ","))
	}
	for i := range 3 {
		var prev position
		for j, m := range log.Partition(i) {
			p, _ := positionOf(m.Message.Headers, slot)
			if j > 0 && !p.after(prev) {
				t.Fatalf("partition %d offset %d: change %s after %s", i, m.Offset, p, prev)
			}
			prev = p
		}
	}
}

// crashSource does to PostgreSQL what the death of the source's process would: its
// replication session and its control connection end, without a last standby status
// (the slot confirms only what acknowledgements confirmed before), so the server lets go
// of the slot for the next instance.
func crashSource(src sdk.Source) {
	s := src.(*Source)
	if s.stop != nil {
		s.stop()
		<-s.st.done
		s.stop = nil
	}
	if s.ctrl != nil {
		_ = s.ctrl.PgConn().Conn().Close()
		s.ctrl = nil
	}
}
