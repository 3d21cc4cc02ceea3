package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/sdk"
)

// Group commit (flush_interval > 0). Each partition has at most one open transaction,
// its group, on a pooled connection of its own: the first batch begins it and locks the
// partition's offsets row, each batch is written into it at once inside a savepoint (so a
// row the database refuses is found in the Consume that delivered it, and handed back as
// sdk.RejectedMessages as without groups), and it commits, with the offsets row, when it
// is flush_interval old, holds max_rows_per_transaction rows or maxGroupBatches batches,
// when a batch reaches the partition's end as its poll saw it (commit_when_caught_up:
// nothing more is waiting to join it), when the partition is assigned again, or at Close. Only then does the partition's last
// offset go to the Committer: what Iggy stores is always in the table.
//
// The group keeps a copy of its rows until it commits: a transaction lost under it (the
// connection drops, PostgreSQL restarts, the commit's outcome is unknown) is written again
// in a new one, which skips whatever the offsets row says is already there. A process
// killed mid-group loses only uncommitted work: its connection closes, PostgreSQL rolls
// the transaction back, and the next owner starts after the offsets row.

// maxGroupBatches bounds the savepoints of one transaction: PostgreSQL caches 64
// subtransaction ids per session, and past that every snapshot in the cluster slows down.
const maxGroupBatches = 48

// savepointFirst opens a group's first batch; savepointNext releases the previous batch's
// savepoint and opens the next in one round trip.
const (
	savepointFirst = "SAVEPOINT ferry_batch"
	savepointNext  = "RELEASE SAVEPOINT ferry_batch; SAVEPOINT ferry_batch"
	savepointUndo  = "ROLLBACK TO SAVEPOINT ferry_batch"
)

// groups is the sink's open groups, one per partition.
type groups struct {
	mu     sync.Mutex
	m      map[sdk.Partition]*group
	closed atomic.Bool
	timers sync.WaitGroup // flush timers armed and not stopped
	// bg is the context of the timers' commits: it ends when Close gives up.
	bg     context.Context
	cancel context.CancelFunc
}

func (gs *groups) init() {
	gs.m = map[sdk.Partition]*group{}
	gs.bg, gs.cancel = context.WithCancel(context.Background())
}

// get returns p's group, made when missing.
func (gs *groups) get(topic sdk.TopicMetadata, p sdk.Partition) *group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.m[p]
	if g == nil {
		g = &group{topic: topic, part: p, top: -1, given: -1}
		gs.m[p] = g
	}
	return g
}

func (gs *groups) lookup(p sdk.Partition) *group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.m[p]
}

func (gs *groups) all() []*group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	out := make([]*group, 0, len(gs.m))
	for _, g := range gs.m {
		out = append(out, g)
	}
	return out
}

// group is one partition's open transaction and what it holds. mu serialises Consume,
// the flush timer, Assigned and Close on it.
type group struct {
	mu    sync.Mutex
	topic sdk.TopicMetadata
	part  sdk.Partition
	conn  *pgxpool.Conn // inside the group's transaction; nil: no transaction open
	// lastDB is the partition's last offset in the table when the transaction began (-1: none).
	lastDB int64
	// top is the highest offset the table will hold once the transaction commits: rows at or below it
	// are not written again (a redelivery after the partition was assigned again).
	top int64
	// givenTS is the timestamp of the message at given.
	givenTS uint64
	// given is the highest offset Consume was given for this group (-1: none): what is
	// committed to Iggy after the transaction commits.
	given int64
	// msgs and rows are the group's messages above lastDB (their offsets) and row values
	// (payloads copied), refused the indices of those the database refused; pending says
	// they are in no open transaction (it was lost) and must be written again first.
	msgs    []sdk.ConsumedMessage
	rows    [][]any
	refused []int
	pending bool
	batches int
	sp      bool // a savepoint is open in tx
	timer   *time.Timer
	gen     uint64 // bumped at every commit: a timer armed for an older group does nothing
}

// keepPayloads copies the payload values of rows (which alias msgs' bytes, valid only
// during Consume) into one buffer the rows own.
func (s *Sink) keepPayloads(rows [][]any, msgs []sdk.ConsumedMessage) {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Payload)
	}
	buf := make([]byte, 0, n)
	for _, r := range rows {
		switch v := r[s.payloadCol].(type) {
		case *json.RawMessage:
			if *v != nil { // nil stays NULL
				buf = append(buf, *v...)
				*v = buf[len(buf)-len(*v) : len(buf) : len(buf)]
			}
		case *[]byte:
			if *v != nil {
				buf = append(buf, *v...)
				*v = buf[len(buf)-len(*v) : len(buf) : len(buf)]
			}
		}
	}
}

// consumeGrouped writes one batch into its partition's group (see the top of this file).
// refused are the rows already refused (column conversions), ascending.
func (s *Sink) consumeGrouped(ctx context.Context, topic sdk.TopicMetadata, p sdk.Partition, msgs []sdk.ConsumedMessage, rows [][]any, refused []int, rejErr error, caughtUp bool) error {
	g := s.groups.get(topic, p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending {
		if err := s.writeAgain(ctx, once, g); err != nil {
			return err
		}
	}
	if g.conn == nil {
		if err := s.begin(ctx, g); err != nil {
			return fmt.Errorf("postgres sink: partition %d: %w", p.PartitionID, err)
		}
	}
	last := int64(msgs[len(msgs)-1].Offset)
	from := after(msgs, g.top)
	idx := unrefused(from, len(msgs), refused)
	insert := s.cfg.WriteMode != modeCopy
	for {
		bad, err := s.writeSavepoint(ctx, g, rows, idx, insert)
		if err == nil {
			break
		}
		switch {
		case bad == locateRow: // COPY refused some row: find which, one INSERT each
			insert = true
			continue
		case bad >= 0 && !s.passRejected:
			return fmt.Errorf("postgres sink: partition %d offset %d rejected (nothing of the batch written): %w",
				p.PartitionID, msgs[bad].Offset, err)
		case bad >= 0:
			refused = append(refused, bad)
			slices.Sort(refused)
			idx = slices.DeleteFunc(idx, func(i int) bool { return i == bad })
			rejErr = cmp.Or(rejErr, err)
			s.log.Warn("row rejected by the database", "partition", p.PartitionID, "offset", msgs[bad].Offset, "error", err)
			continue
		}
		// The transaction is gone with what the group held: write that again in a new
		// one (committed at once), then this batch into a new group. This batch joins no
		// group until it is written, so a batch that fails for good goes to on_failure
		// without also reaching the table later.
		s.log.Warn("postgres transaction lost; writing the partition's open group again", "partition", p.PartitionID, "error", err)
		g.abort(ctx)
		g.pending = len(g.msgs) > 0
		if !transient(err) {
			return fmt.Errorf("postgres sink: partition %d: %w", p.PartitionID, err)
		}
		if err := s.writeAgain(ctx, once, g); err != nil {
			return err
		}
		if err := s.begin(ctx, g); err != nil {
			return fmt.Errorf("postgres sink: partition %d: %w", p.PartitionID, err)
		}
		from = after(msgs, g.top)
		idx = unrefused(from, len(msgs), refused)
	}
	before := g.mark()
	g.add(msgs[from:], rows[from:], refused, from, last, msgs[len(msgs)-1].Timestamp)
	g.batches++
	if len(g.msgs) >= s.cfg.MaxRowsPerTransaction || g.batches >= maxGroupBatches || caughtUp {
		if err := s.commitGroup(ctx, once, g); err != nil {
			if g.pending { // this batch fails: what is kept to write again is what came before it
				g.undo(before)
			}
			return err
		}
	} else {
		s.arm(g)
	}
	return rejected(msgs, refused, rejErr)
}

// add records a batch written into the group: msgs and rows from its index from on,
// refused its refused indices (of the whole batch), last its last offset.
func (g *group) add(msgs []sdk.ConsumedMessage, rows [][]any, refused []int, from int, last int64, lastTS uint64) {
	base := len(g.msgs)
	for _, i := range refused {
		if i >= from {
			g.refused = append(g.refused, base+i-from)
		}
	}
	for i := range msgs {
		g.msgs = append(g.msgs, sdk.ConsumedMessage{Offset: msgs[i].Offset, Timestamp: msgs[i].Timestamp})
	}
	g.rows = append(g.rows, rows...)
	g.top = max(g.top, last)
	if last >= g.given {
		g.given, g.givenTS = last, lastTS
	}
}

// groupMark is how much a group held before a batch joined it.
type groupMark struct {
	msgs, refused, batches int
	top, given             int64
	givenTS                uint64
}

func (g *group) mark() groupMark {
	return groupMark{msgs: len(g.msgs), refused: len(g.refused), batches: g.batches, top: g.top, given: g.given, givenTS: g.givenTS}
}

// undo takes the batches added since m out of the group again.
func (g *group) undo(m groupMark) {
	clear(g.msgs[m.msgs:])
	clear(g.rows[m.msgs:])
	g.msgs, g.rows, g.refused = g.msgs[:m.msgs], g.rows[:m.msgs], g.refused[:m.refused]
	g.batches, g.top, g.given, g.givenTS = m.batches, m.top, m.given, m.givenTS
}

// begin opens g's transaction on a connection of its own and locks the partition's
// offsets row until it commits (BEGIN and the lock in one round trip).
func (s *Sink) begin(ctx context.Context, g *group) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	lastDB := int64(-1)
	if s.cfg.ExactlyOnce {
		lastDB, err = s.beginLocked(ctx, conn.Conn(), g.topic, g.part.PartitionID)
	} else if _, err = conn.Exec(ctx, "BEGIN"); err != nil {
		err = fmt.Errorf("begin: %w", err)
	}
	if err != nil {
		release(ctx, conn)
		return err
	}
	g.conn, g.lastDB, g.top = conn, lastDB, max(g.top, lastDB)
	return nil
}

// writeSavepoint writes the rows idx into g's transaction inside a savepoint: a row the
// database refuses undoes this batch only (its index, or locateRow, is returned).
func (s *Sink) writeSavepoint(ctx context.Context, g *group, rows [][]any, idx []int, insert bool) (int, error) {
	if len(idx) == 0 {
		return noRow, nil
	}
	sp := savepointFirst
	if g.sp {
		sp = savepointNext
	}
	// The savepoint travels in the COPY's query: a refused row means it was taken.
	bad, err := s.writeRows(ctx, g.conn.Conn(), sp+"; ", rows, idx, insert)
	if err == nil || bad != noRow {
		g.sp = true
	}
	if err != nil && bad != noRow {
		if _, uerr := g.conn.Exec(ctx, savepointUndo); uerr != nil {
			return noRow, fmt.Errorf("rollback to savepoint: %w", uerr)
		}
	}
	return bad, err
}

// commitGroup commits g (its offsets row set to the highest offset it covers), then hands
// that offset to the Committer and empties g. A lost or unknown commit is written again
// in a new transaction (writeAgain, retried by r).
func (s *Sink) commitGroup(ctx context.Context, r sdk.Retry, g *group) error {
	if g.pending {
		return s.writeAgain(ctx, r, g)
	}
	if g.conn == nil {
		return nil
	}
	wrote := len(g.msgs) > len(g.refused)
	ts := stamp(g.givenTS) // the row keeps its own when lastDB is above everything given
	if g.lastDB > g.given {
		ts = nil
	}
	if err := s.recordAndCommit(ctx, g.conn.Conn(), g.topic, g.part.PartitionID, max(g.lastDB, g.given), ts, wrote); err != nil {
		g.abort(ctx)
		g.pending = true
		if ctx.Err() != nil {
			return fmt.Errorf("postgres sink: partition %d: commit: %w", g.part.PartitionID, err)
		}
		s.log.Warn("postgres commit failed; writing the partition's group again", "partition", g.part.PartitionID, "error", err)
		return s.writeAgain(ctx, r, g)
	}
	g.conn.Release()
	g.conn, g.sp = nil, false
	s.committed(ctx, g)
	return nil
}

// writeAgain writes a group whose transaction was lost in one new transaction, retried by
// r (writeBatch skips what the table already holds). A row
// refused now, though its savepoint had taken it, cannot reach on_failure any more (its
// Consume returned): under on_failure = stop the group stays pending and the error
// stops the sink; otherwise it is left out and logged as an error.
func (s *Sink) writeAgain(ctx context.Context, r sdk.Retry, g *group) error {
	if len(g.msgs) > 0 {
		refused, _, err := s.writeBatch(ctx, r, g.topic, g.part.PartitionID, g.msgs, g.rows, g.refused, nil)
		if err != nil {
			return err
		}
		for _, i := range refused {
			if _, was := slices.BinarySearch(g.refused, i); !was {
				s.log.Error("row refused when its group was written again; left out, not handed to on_failure",
					"partition", g.part.PartitionID, "offset", g.msgs[i].Offset)
			}
		}
	}
	g.pending = false
	s.committed(ctx, g)
	return nil
}

// committed logs a committed group, commits its offset to Iggy and empties g.
func (s *Sink) committed(ctx context.Context, g *group) {
	if len(g.msgs) > 0 {
		s.log.Log(ctx, s.batchLevel(), "group written", "partition", g.part.PartitionID, "first_offset", g.msgs[0].Offset,
			"last_offset", g.given, "rows", len(g.msgs)-len(g.refused), "batches", g.batches)
	}
	if g.given >= 0 {
		s.commit(g.part, uint64(g.given))
	}
	g.msgs, g.rows, g.refused = nil, nil, nil
	g.batches, g.top, g.given = 0, -1, -1
	g.gen++
	if g.timer != nil && g.timer.Stop() {
		s.groups.timers.Done()
	}
	g.timer = nil
}

// abort rolls back and drops g's transaction (a no-op when none is open).
func (g *group) abort(ctx context.Context) {
	if g.conn == nil {
		return
	}
	release(ctx, g.conn)
	g.conn, g.sp = nil, false
}

// arm starts g's flush timer if it is not running: flush_interval after its first batch,
// the group commits on the timer's goroutine.
func (s *Sink) arm(g *group) {
	if g.timer != nil || s.groups.closed.Load() {
		return
	}
	gen := g.gen
	s.groups.timers.Add(1)
	g.timer = time.AfterFunc(s.flushEvery, func() {
		defer s.groups.timers.Done()
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.gen != gen || s.groups.closed.Load() {
			return
		}
		g.timer = nil
		if err := s.commitGroup(s.groups.bg, s.retrying("group commit"), g); err != nil {
			s.log.Error("group commit failed; retried at the partition's next batch, next flush or the stop",
				"partition", g.part.PartitionID, "error", err)
			s.arm(g)
		}
	})
}

// flushPartitions commits the open groups of parts (Assigned: a partition assigned again
// starts after what its group held).
func (s *Sink) flushPartitions(ctx context.Context, parts []sdk.Partition) error {
	if s.flushEvery <= 0 {
		return nil
	}
	for _, p := range parts {
		g := s.groups.lookup(p)
		if g == nil {
			continue
		}
		g.mu.Lock()
		err := s.commitGroup(ctx, s.retrying("group commit"), g)
		g.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// closeGroups commits every open group, all partitions at once, bounded by ctx; what
// cannot be committed is rolled back (it was never committed to Iggy: redelivered).
func (s *Sink) closeGroups(ctx context.Context) error {
	if s.groups.cancel == nil {
		return nil
	}
	s.groups.closed.Store(true)
	stop := context.AfterFunc(ctx, s.groups.cancel) // a timer's commit gives up with Close
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, 0)
	var emu sync.Mutex
	for _, g := range s.groups.all() {
		wg.Go(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if err := s.commitGroup(ctx, s.retrying("group commit"), g); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
			g.abort(ctx)
			if g.timer != nil && g.timer.Stop() {
				s.groups.timers.Done()
			}
			g.timer = nil
		})
	}
	wg.Wait()
	s.groups.cancel()
	s.groups.timers.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("postgres sink: close: %w", err)
	}
	return nil
}
