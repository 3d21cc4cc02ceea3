// Package cdccheck judges a CDC source from the outside: a writer that commits random
// transactions to PostgreSQL and remembers each committed change, a reader of the Iggy
// topic the source fed, and the comparison of the two. The postgres-cdc conformance
// scenario and the end-to-end SIGKILL tests share it, so both judge by one rule.
package cdccheck

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// Writer commits transactions of 1–5 random changes to Tables (each `id int PRIMARY KEY,
// v int NOT NULL`), one at a time, and records each committed change in commit order as
// Identity names it: "table op id v" (v is unique per insert and update; an update that
// changes the key adds " old id"; a delete names the id it removed; a truncate its table).
// Log (`n int PRIMARY KEY`, outside the publication) gets a row in every transaction, so
// a commit whose answer was lost (PostgreSQL restarting) is known to have happened or not.
type Writer struct {
	DB     *pgxpool.Pool
	Tables []string
	Log    string
	Rand   *rand.Rand

	live   map[string][]int // ids present per table
	nextID int
	nextV  int
	want   []string
}

// Want is every change committed so far, in commit order.
func (w *Writer) Want() []string { return w.want }

type op struct {
	sql   string
	args  []any
	ident string
}

// Txn commits transaction n, retrying it until it is known to have committed.
func (w *Writer) Txn(ctx context.Context, n int) error {
	live := map[string][]int{}
	for k, v := range w.live {
		live[k] = slices.Clone(v)
	}
	nextID, nextV := w.nextID, w.nextV
	var ops []op
	for range 1 + w.Rand.IntN(5) {
		tbl := w.Tables[w.Rand.IntN(len(w.Tables))]
		ids := live[tbl]
		switch x := w.Rand.IntN(100); {
		case x < 1 && len(ids) > 0:
			ops = append(ops, op{"TRUNCATE " + tbl, nil, tbl + " TRUNCATE"})
			live[tbl] = nil
		case x < 55 || len(ids) == 0:
			nextID++
			nextV++
			ops = append(ops, op{"INSERT INTO " + tbl + " (id, v) VALUES ($1, $2)", []any{nextID, nextV}, fmt.Sprintf("%s INSERT %d %d", tbl, nextID, nextV)})
			live[tbl] = append(live[tbl], nextID)
		case x < 75:
			i := w.Rand.IntN(len(ids))
			nextV++
			ops = append(ops, op{"UPDATE " + tbl + " SET v = $2 WHERE id = $1", []any{ids[i], nextV}, fmt.Sprintf("%s UPDATE %d %d", tbl, ids[i], nextV)})
		case x < 85:
			i := w.Rand.IntN(len(ids))
			nextID++
			nextV++
			ops = append(ops, op{"UPDATE " + tbl + " SET id = $2, v = $3 WHERE id = $1", []any{ids[i], nextID, nextV},
				fmt.Sprintf("%s UPDATE %d %d old %d", tbl, nextID, nextV, ids[i])})
			live[tbl][i] = nextID
		default:
			i := w.Rand.IntN(len(ids))
			ops = append(ops, op{"DELETE FROM " + tbl + " WHERE id = $1", []any{ids[i]}, fmt.Sprintf("%s DELETE %d", tbl, ids[i])})
			live[tbl] = slices.Delete(live[tbl], i, i+1)
		}
	}
	if err := w.commit(ctx, n, ops); err != nil {
		return err
	}
	for _, o := range ops {
		w.want = append(w.want, o.ident)
	}
	w.live, w.nextID, w.nextV = live, nextID, nextV
	return nil
}

// commit runs ops and the log row of transaction n in one transaction, again after a
// failure unless the log row says the failed attempt committed.
func (w *Writer) commit(ctx context.Context, n int, ops []op) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, w.DB, func(tx pgx.Tx) error {
			for _, o := range ops {
				if _, err := tx.Exec(ctx, o.sql, o.args...); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+w.Log+" VALUES ($1)", n)
			return err
		})
		if err == nil {
			return nil
		}
		if attempt > 200 || ctx.Err() != nil {
			return fmt.Errorf("transaction %d: %w", n, err)
		}
		for range 100 {
			var done bool
			qerr := w.DB.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+w.Log+" WHERE n = $1)", n).Scan(&done)
			if qerr == nil && done {
				return nil
			}
			if qerr == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // PostgreSQL restarting
		}
	}
}

// Change is one message read back from the topic.
type Change struct {
	Partition uint32
	Offset    uint64
	LSN, Idx  uint64 // the pg_commit_lsn and pg_txn_index headers: the position in commit order
	Ident     string // Identity of the payload
}

// ReadTopic reads every message of partitions 0..partitions-1 of stream/topic from the
// start (as consumer 1, by offset, so no group state is touched). A message whose id is not
// the one its headers imply (commit LSN high, index low) is an error: ids are how Iggy's
// deduplication and a reader recognise a change.
func ReadTopic(ctx context.Context, c *iggy.Client, stream, topic string, partitions uint32) ([]Change, error) {
	var out []Change
	for p := range partitions {
		next := uint64(0)
		for {
			part := p
			res, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
				Stream: iggy.Name(stream), Topic: iggy.Name(topic), Partition: &part, Strategy: wire.PollOffset(next), Count: 1000})
			if err != nil {
				return nil, fmt.Errorf("read partition %d at offset %d: %w", p, next, err)
			}
			if len(res.Messages) == 0 {
				res.Release()
				break
			}
			for _, m := range res.Messages {
				ch, err := change(p, m)
				if err != nil {
					res.Release()
					return nil, fmt.Errorf("partition %d offset %d: %w", p, m.Offset, err)
				}
				out = append(out, ch)
				next = m.Offset + 1
			}
			res.Release()
		}
	}
	return out, nil
}

func change(p uint32, m wire.Message) (Change, error) {
	c := Change{Partition: p, Offset: m.Offset}
	kvs, err := m.Headers(nil)
	if err != nil {
		return c, fmt.Errorf("headers: %w", err)
	}
	for _, kv := range kvs {
		switch string(kv.Key.Raw) {
		case "pg_commit_lsn":
			c.LSN = binary.LittleEndian.Uint64(kv.Value.Raw)
		case "pg_txn_index":
			c.Idx = binary.LittleEndian.Uint64(kv.Value.Raw)
		}
	}
	if m.ID.Hi != c.LSN || m.ID.Lo&(1<<40-1) != c.Idx {
		return c, fmt.Errorf("id %x/%x does not match the headers' position %d#%d", m.ID.Hi, m.ID.Lo, c.LSN, c.Idx)
	}
	c.Ident, err = Identity(m.Payload)
	return c, err
}

// Identity renders a message's payload as Writer names the change.
func Identity(payload []byte) (string, error) {
	var rec struct {
		Table string `json:"table_name"`
		Op    string `json:"operation_type"`
		Data  struct {
			ID *int `json:"id"`
			V  *int `json:"v"`
		} `json:"data"`
		Old *struct {
			ID int `json:"id"`
		} `json:"old_data"`
	}
	if err := json.Unmarshal(payload, &rec); err != nil {
		return "", fmt.Errorf("payload %q: %w", payload, err)
	}
	switch {
	case rec.Op == "TRUNCATE":
		return rec.Table + " TRUNCATE", nil
	case rec.Op == "DELETE" && rec.Data.ID != nil:
		return fmt.Sprintf("%s DELETE %d", rec.Table, *rec.Data.ID), nil
	case rec.Data.ID == nil || rec.Data.V == nil:
		return "", fmt.Errorf("payload %q: no data.id or data.v", payload)
	}
	s := fmt.Sprintf("%s %s %d %d", rec.Table, rec.Op, *rec.Data.ID, *rec.Data.V)
	if rec.Old != nil {
		s += fmt.Sprintf(" old %d", rec.Old.ID)
	}
	return s, nil
}

// Verdict compares a topic with what the writer committed.
type Verdict struct {
	Lost, Duplicated int
	// Disorder counts each partition's position decreases and, when nothing was lost or
	// duplicated, the places where the topic in commit order differs from the writer's.
	Disorder int
	First    string // the first difference, "" when there is none
}

// OK is true when the topic holds exactly the committed changes, once each, in order.
func (v Verdict) OK() bool { return v.Lost == 0 && v.Duplicated == 0 && v.Disorder == 0 }

// Judge compares got (sorted in place into commit order) with want, the writer's changes.
func Judge(got []Change, want []string) Verdict {
	var v Verdict
	last := map[uint32]Change{}
	for _, m := range got {
		if l, ok := last[m.Partition]; ok && (m.LSN < l.LSN || (m.LSN == l.LSN && m.Idx <= l.Idx)) {
			v.Disorder++
			if v.First == "" {
				v.First = fmt.Sprintf("partition %d offset %d: position %d#%d not after %d#%d", m.Partition, m.Offset, m.LSN, m.Idx, l.LSN, l.Idx)
			}
		}
		last[m.Partition] = m
	}
	// A truncate's identity may repeat; every other identity is unique.
	have := map[string]int{}
	for _, m := range got {
		have[m.Ident]++
	}
	for _, id := range want {
		have[id]--
	}
	for _, n := range have {
		if n < 0 {
			v.Lost -= n
		} else {
			v.Duplicated += n
		}
	}
	slices.SortStableFunc(got, func(a, b Change) int {
		if a.LSN != b.LSN {
			return cmpUint(a.LSN, b.LSN)
		}
		return cmpUint(a.Idx, b.Idx)
	})
	for i := range max(len(got), len(want)) {
		var g, e string
		if i < len(got) {
			g = got[i].Ident
		}
		if i < len(want) {
			e = want[i]
		}
		if g == e {
			continue
		}
		if v.First == "" {
			v.First = fmt.Sprintf("change %d of %d (the topic has %d): topic %q, committed %q", i, len(want), len(got), g, e)
		}
		if v.Lost == 0 && v.Duplicated == 0 {
			v.Disorder++
		}
	}
	return v
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Source is the CDC source under judgement: builtin:postgres in cdc mode, feeding Stream/Topic
// from Tables of the database at URL through Slot, every operation the Writer makes captured.
type Source struct {
	Key, Name     string
	Stream, Topic string
	URL, Slot     string
	Tables        []string
	Top           string // extra top-level lines of the connector file (e.g. max_in_flight)
}

// File is the source's connector file.
func (s Source) File() string {
	ts, _ := json.Marshal(s.Tables)
	return fmt.Sprintf(`type = "source"
key = %q
enabled = true
version = 0
name = %q
path = "builtin:postgres"
%s
[[streams]]
stream = %q
topic = %q
schema = "json"
batch_length = 1000

[plugin_config]
connection_string = %q
mode = "cdc"
tables = %s
replication_slot = %q
capture_operations = ["INSERT", "UPDATE", "DELETE", "TRUNCATE"]
batch_size = 500
status_interval = "200ms"
`, s.Key, s.Name, s.Top, s.Stream, s.Topic, s.URL, ts, s.Slot)
}
