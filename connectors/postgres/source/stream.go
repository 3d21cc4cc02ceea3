package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/ferryio/ferry/sdk"
)

// item is one entry of the stream's queue: a change, or the end of a transaction.
type item struct {
	seq       uint64 // 1, 2, … in queue order
	change    *change
	commitEnd uint64 // set on a transaction's end: its end LSN
	commitLSN uint64
}

// stream owns the replication connection: one goroutine reads pgoutput, decodes, queues
// the changes for Read and reports to PostgreSQL how far Iggy holds them. It reconnects on
// its own after a lost connection, replaying from the slot's confirmed position and
// dropping what it already queued.
type stream struct {
	cfg  *config
	log  *slog.Logger
	dec  *decoder
	out  chan item
	skip func(*change) bool // changes Iggy already holds (read back at Open)

	// Written by Read's acks, read by the goroutine.
	acked    atomic.Uint64 // seq of the last item Iggy holds
	ackedEnd atomic.Uint64 // end LSN of the last transaction Iggy holds whole

	// The goroutine's own.
	conn       *pgconn.PgConn
	ins        insertParser
	seq        uint64
	high       position // the last change queued or skipped as already sent
	highCommit uint64   // the commit LSN of the last transaction end queued
	walEnd     uint64   // the server's sent position from its last keepalive
	flushed    uint64   // the last position reported

	// reported and serverEnd are read by Gauges.
	reported  atomic.Uint64
	serverEnd atomic.Uint64         // the server's WAL end, from its last message
	err       atomic.Pointer[error] // a failure that stops the source
	done      chan struct{}
}

// run is the goroutine. It ends when ctx ends or decoding fails for good.
func (s *stream) run(ctx context.Context) {
	defer close(s.done)
	defer func() {
		if s.conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.conn.Close(cctx)
			cancel()
		}
	}()
	// A lost connection is reconnected until the source stops: nothing is lost meanwhile,
	// PostgreSQL keeps the changes in the slot. A fatalError ends it (Permanent).
	r := sdk.Retry{Initial: s.cfg.RetryDelay, Max: maxBackoff, What: "postgres source: replication connection", Log: s.log,
		LogAttrs: []any{"slot", s.cfg.ReplicationSlot}}
	err := r.Do(ctx, func(ctx context.Context, _ int) error { return s.session(ctx) })
	var fatal *fatalError
	if ctx.Err() == nil && errors.As(err, &fatal) {
		s.err.Store(&fatal.err)
		s.log.Error("postgres source: change stream stopped", "error", fatal.err)
	}
}

// fatalError stops the stream: a change that cannot be decoded is never skipped.
type fatalError struct{ err error }

func (f *fatalError) Error() string { return f.err.Error() }

// Unwrap makes a fatalError permanent to sdk.Retry.
func (f *fatalError) Unwrap() []error { return []error{sdk.ErrPermanent, f.err} }

// session connects, starts replication from the slot's confirmed position and streams
// until an error.
func (s *stream) session(ctx context.Context) error {
	if s.conn != nil {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = s.conn.Close(cctx)
		cancel()
		s.conn = nil
	}
	conn, err := connectReplication(ctx, s.cfg.ConnectionString.Reveal())
	if err != nil {
		return err
	}
	s.conn = conn
	s.dec.reset()
	args := []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", escapeLiteral(s.cfg.Publication))}
	if err := pglogrepl.StartReplication(ctx, conn, s.cfg.ReplicationSlot, 0, pglogrepl.StartReplicationOptions{PluginArgs: args}); err != nil {
		err = fmt.Errorf("start replication on slot %s: %w", s.cfg.ReplicationSlot, err)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55000" {
			// The slot was invalidated (it fell behind max_slot_wal_keep_size) or is not
			// usable: changes are gone, which must stop the source, never be skipped.
			return &fatalError{fmt.Errorf("%w; the slot cannot be resumed: drop it and start again from a snapshot of the tables", err)}
		}
		return err
	}
	s.log.Info("postgres source: streaming changes", "slot", s.cfg.ReplicationSlot, "publication", s.cfg.Publication,
		"after", s.high.String())
	// Reads wait on the socket's deadline, not a context: a context per read costs a
	// goroutine handoff per message, which halves the rate. The stop sets a past deadline.
	stop := context.AfterFunc(ctx, func() { _ = conn.Conn().SetReadDeadline(time.Now()) })
	defer stop()
	next := time.Now().Add(s.cfg.StatusInterval)
	deadline := time.Time{}
	for {
		if time.Now().After(next) {
			// Idle, it asks for the server's sent position (a keepalive answers), which the
			// next report confirms: WAL of tables outside the publication is recycled too.
			if err := s.status(ctx, s.idle()); err != nil {
				return err
			}
			next = time.Now().Add(s.cfg.StatusInterval)
		}
		if !deadline.Equal(next) {
			if err := conn.Conn().SetReadDeadline(next); err != nil {
				return fmt.Errorf("receive: %w", err)
			}
			deadline = next
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg, err := conn.ReceiveMessage(context.Background())
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication: %s (SQLSTATE %s)", m.Message, m.Code)
		case *pgproto3.CopyData:
			if err := s.copyData(ctx, m.Data); err != nil {
				return err
			}
		}
	}
}

func (s *stream) copyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return &fatalError{fmt.Errorf("keepalive: %w", err)}
		}
		s.walEnd = max(s.walEnd, uint64(k.ServerWALEnd))
		s.noteServerEnd(uint64(k.ServerWALEnd))
		if k.ReplyRequested {
			return s.status(ctx, false)
		}
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return &fatalError{fmt.Errorf("xlog data: %w", err)}
		}
		s.noteServerEnd(uint64(x.ServerWALEnd))
		return s.logical(ctx, x.WALData)
	}
	return nil
}

// logical handles one pgoutput message.
func (s *stream) logical(ctx context.Context, data []byte) error {
	if relID, t, ok := s.ins.parse(data); ok {
		// Inserts, the bulk of most streams, skip the generic parser's allocations.
		c, err := s.dec.row(relID, opInsert, t, 0, nil)
		if err != nil {
			return &fatalError{err}
		}
		return s.queue(ctx, c)
	}
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return &fatalError{fmt.Errorf("pgoutput: %w", err)}
	}
	var changes []*change
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		s.dec.relation(m)
	case *pglogrepl.BeginMessage:
		s.dec.begin(m)
	case *pglogrepl.InsertMessage:
		c, err := s.dec.row(m.RelationID, opInsert, m.Tuple, 0, nil)
		if err != nil {
			return &fatalError{err}
		}
		changes = append(changes, c)
	case *pglogrepl.UpdateMessage:
		c, err := s.dec.row(m.RelationID, opUpdate, m.NewTuple, m.OldTupleType, m.OldTuple)
		if err != nil {
			return &fatalError{err}
		}
		changes = append(changes, c)
	case *pglogrepl.DeleteMessage:
		c, err := s.dec.row(m.RelationID, opDelete, nil, m.OldTupleType, m.OldTuple)
		if err != nil {
			return &fatalError{err}
		}
		changes = append(changes, c)
	case *pglogrepl.TruncateMessage:
		cs, err := s.dec.truncate(m)
		if err != nil {
			return &fatalError{err}
		}
		changes = cs
	case *pglogrepl.CommitMessage:
		s.dec.inTxn = false
		if uint64(m.CommitLSN) <= s.highCommit {
			return nil // queued before a reconnect
		}
		s.highCommit = uint64(m.CommitLSN)
		return s.push(ctx, item{commitEnd: uint64(m.TransactionEndLSN), commitLSN: uint64(m.CommitLSN)})
	}
	for _, c := range changes {
		if err := s.queue(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// queue pushes a decoded change unless it is not captured (nil), was queued before a
// reconnect, or Iggy already holds it.
func (s *stream) queue(ctx context.Context, c *change) error {
	if c == nil || !c.pos.after(s.high) {
		return nil
	}
	s.high = c.pos
	if s.skip != nil && s.skip(c) {
		return nil
	}
	return s.push(ctx, item{change: c})
}

// push queues it for Read. While the queue is full (Iggy is slow or down) it keeps
// reporting status, so PostgreSQL does not drop the connection as dead.
func (s *stream) push(ctx context.Context, it item) error {
	s.seq++
	it.seq = s.seq
	select {
	case s.out <- it:
		return nil
	default:
	}
	tick := time.NewTicker(s.cfg.StatusInterval)
	defer tick.Stop()
	for {
		select {
		case s.out <- it:
			return nil
		case <-tick.C:
			if err := s.status(ctx, false); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *stream) noteServerEnd(lsn uint64) {
	if lsn > s.serverEnd.Load() {
		s.serverEnd.Store(lsn)
	}
}

// idle reports whether Iggy holds everything queued and no transaction is open.
func (s *stream) idle() bool { return s.acked.Load() == s.seq && !s.dec.inTxn }

// confirmable is the position PostgreSQL may forget everything before: the end of the
// last transaction Iggy holds whole; when Iggy holds everything queued and no
// transaction is open, the server's sent position (it recycles WAL while idle).
func (s *stream) confirmable() uint64 {
	flush := s.ackedEnd.Load()
	if s.idle() {
		flush = max(flush, s.walEnd)
	}
	return flush
}

// status sends a standby status update with the confirmable position (never a position
// lower than one already reported).
func (s *stream) status(ctx context.Context, reply bool) error {
	flush := max(s.confirmable(), s.flushed)
	if flush == 0 {
		return nil
	}
	lsn := pglogrepl.LSN(flush)
	err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn, ReplyRequested: reply})
	if err != nil {
		return fmt.Errorf("standby status: %w", err)
	}
	s.flushed = flush
	s.reported.Store(flush)
	return nil
}
