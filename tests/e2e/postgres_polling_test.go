package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
)

const (
	pollRows  = 3000
	pollKills = 4
	pollBatch = 100
)

// pollSource is the connector file of the polling source under test.
func pollSource(url, table string, deleteAfterRead bool) string {
	return fmt.Sprintf(`type = "source"
key = "poll"
enabled = true
version = 0
name = "pg polling"
path = "builtin:postgres"

[[streams]]
stream = "s"
topic = "rows"
schema = "json"
batch_length = 1000

[plugin_config]
connection_string = %q
mode = "polling"
tables = [%q]
tracking_column = "id"
batch_size = %d
poll_interval = "20ms"
delete_after_read = %t
`, url, table, pollBatch, deleteAfterRead)
}

// readPolledIDs returns the data.id of every message of s/rows, partition 0, in offset order.
func readPolledIDs(t *testing.T, c *iggy.Client, table string) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []int
	part := uint32(0)
	next := uint64(0)
	for {
		r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(7)},
			Stream: iggy.Name("s"), Topic: iggy.Name("rows"), Partition: &part, Strategy: wire.PollOffset(next), Count: 1000})
		if err != nil {
			t.Fatalf("poll at %d: %v", next, err)
		}
		if len(r.Messages) == 0 {
			r.Release()
			return ids
		}
		for _, m := range r.Messages {
			var rec struct {
				Table string `json:"table_name"`
				Op    string `json:"operation_type"`
				Data  struct {
					ID int `json:"id"`
					V  int `json:"v"`
				} `json:"data"`
			}
			if err := json.Unmarshal(m.Payload, &rec); err != nil {
				t.Fatalf("offset %d: payload %s: %v", m.Offset, m.Payload, err)
			}
			if rec.Table != table || rec.Op != "SELECT" || rec.Data.V != rec.Data.ID*7 {
				t.Fatalf("offset %d: unexpected record %s", m.Offset, m.Payload)
			}
			ids = append(ids, rec.Data.ID)
			next = m.Offset + 1
		}
		r.Release()
	}
}

// pollingAtLeastOnce runs the polling source in ferry processes SIGKILLed pollKills times at
// seeded moments while a writer commits pollRows rows (ids 1..pollRows, one per
// transaction, so ids commit in order), then checks the at-least-once contract:
//   - every row is in the topic, and the first occurrences come in id order with no gap;
//   - a row appears twice only when a kill fell between Iggy acknowledging its batch and
//     the saved state (or, with delete_after_read, the DELETE) catching up: one batch is in
//     flight at a time, so each kill adds at most batch_size duplicates;
//   - with delete_after_read the table ends empty.
func pollingAtLeastOnce(t *testing.T, deleteAfterRead bool) {
	db, url := pgDB(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	table := fmt.Sprintf("e2e_poll_%d", seed%1_000_000)
	ctx := context.Background()
	if _, err := db.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, v int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(ctx, "DROP TABLE IF EXISTS "+table) })
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctxT, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.CreateStream(ctxT, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctxT, iggy.Name("s"), "rows", 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	conns := filepath.Join(dir, "pg")
	writeFile(t, filepath.Join(conns, "poll.toml"), pollSource(url, table, deleteAfterRead))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
	run := startFerry(t, "run 0", dir, nil, args...)

	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		for id := 1; id <= pollRows; id++ {
			if _, writeErr = db.Exec(ctx, "INSERT INTO "+table+" VALUES ($1, $2)", id, id*7); writeErr != nil {
				return
			}
			if id%20 == 0 {
				time.Sleep(5 * time.Millisecond) // spread the writes over the kills
			}
		}
	})
	share := uint64(pollRows / (pollKills + 1))
	for i := 1; i <= pollKills; i++ {
		before := topicMessages(c, "rows")
		testkit.WaitFor(t, fmt.Sprintf("run %d sending", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return topicMessages(c, "rows") > before+share/2
		})
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // the seeded kill moment
		run.kill()
		t.Logf("kill %d: %d messages in the topic", i, topicMessages(c, "rows"))
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	// The count alone is no signal (duplicates reach it early): wait for the last row.
	testkit.WaitFor(t, "the last row in the topic", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return topicMessages(c, "rows") >= pollRows && slices.Contains(readPolledIDs(t, c, table), pollRows)
	})
	if deleteAfterRead {
		testkit.WaitFor(t, "the table emptied", func() bool {
			return pgCount(db, "SELECT count(*) FROM "+table) == 0
		})
	}
	run.stop(15 * time.Second)
	if !deleteAfterRead {
		if n := pgCount(db, "SELECT count(*) FROM "+table); n != pollRows {
			t.Fatalf("table holds %d rows, want %d (nothing deleted)", n, pollRows)
		}
	}

	ids := readPolledIDs(t, c, table)
	seen := make(map[int]int, pollRows)
	top := 0
	for i, id := range ids {
		seen[id]++
		if id > top {
			if id != top+1 {
				t.Fatalf("message %d: row %d after row %d: rows %d..%d skipped", i, id, top, top+1, id-1)
			}
			top = id
		}
	}
	if top != pollRows || len(seen) != pollRows {
		t.Fatalf("topic holds %d distinct rows up to %d, want 1..%d", len(seen), top, pollRows)
	}
	dups := len(ids) - pollRows
	if dups > pollKills*pollBatch {
		t.Fatalf("%d duplicates, more than %d kills × batch_size %d", dups, pollKills, pollBatch)
	}
	for id, n := range seen {
		if n > pollKills+1 {
			t.Fatalf("row %d appears %d times, more than once per kill plus one", id, n)
		}
	}
	t.Logf("%d rows, %d kills, delete_after_read=%t: %d messages, 0 lost, %d duplicates (bound %d)",
		pollRows, pollKills, deleteAfterRead, len(ids), dups, pollKills*pollBatch)
}

func TestPostgresPollingAtLeastOnceUnderSIGKILL(t *testing.T) {
	pollingAtLeastOnce(t, false)
}

func TestPostgresPollingDeleteAfterReadUnderSIGKILL(t *testing.T) {
	pollingAtLeastOnce(t, true)
}
