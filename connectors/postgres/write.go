package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/sdk"
)

// writeTx's row results besides an index into msgs.
const (
	noRow     = -1 // the error is not about one row
	locateRow = -2 // COPY refused a row it does not name: retry with one INSERT per row
)

// writeTx runs one transaction: lock the partition's offsets row and read its last
// offset, write every row above it that is not refused, record the batch's last offset,
// commit. The row lock serialises two owners of one partition (a rebalance race): the
// second waits for the first's commit and then skips what it wrote. A batch costs three
// round trips instead of five (BEGIN with the lock and the offset's UPDATE with COMMIT,
// each pair pipelined, the COPY between them): on a loaded machine each round trip costs
// a scheduling delay on both sides. A batch that continues what this sink last committed
// for the partition first tries writeAhead, in one round trip; when that fails for any
// reason it is rolled back and written this way. A transaction an error (or a batch
// written before) leaves open is rolled back before its connection returns to the pool.
func (s *Sink) writeTx(ctx context.Context, topic sdk.TopicMetadata, part uint32, msgs []sdk.ConsumedMessage, rows [][]any, refused []int, insert bool) (int, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return noRow, err
	}
	defer release(ctx, pc)
	conn := pc.Conn()
	p := sdk.Partition{StreamID: topic.StreamID, TopicID: topic.TopicID, PartitionID: part}
	last, ts := int64(msgs[len(msgs)-1].Offset), stamp(msgs[len(msgs)-1].Timestamp)
	if next, ok := s.pos.Done(p); ok && s.cfg.ExactlyOnce && !insert && next == msgs[0].Offset {
		err := s.writeAhead(ctx, conn, topic, part, rows, unrefused(0, len(msgs), refused), int64(next)-1, last, ts)
		if err == nil {
			s.ahead.Add(1)
			return noRow, nil
		}
		if conn.PgConn().IsClosed() {
			return noRow, err // transient: retried whole
		}
		if conn.PgConn().TxStatus() != 'I' {
			if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
				return noRow, fmt.Errorf("rollback: %w", rerr)
			}
		}
		s.log.Debug("batch written again, after locking the offsets row", "partition", part, "first_offset", msgs[0].Offset, "error", err)
	}
	from := 0
	if s.cfg.ExactlyOnce {
		lastDB, err := s.beginLocked(ctx, conn, topic, part)
		if err != nil {
			return noRow, err
		}
		from = after(msgs, lastDB)
		if from == len(msgs) {
			return noRow, nil // written before (a redelivery): nothing to do
		}
	} else if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return noRow, fmt.Errorf("begin: %w", err)
	}
	idx := unrefused(from, len(msgs), refused)
	if bad, err := s.writeRows(ctx, conn, "", rows, idx, insert); err != nil {
		return bad, err
	}
	if err := s.recordAndCommit(ctx, conn, topic, part, last, ts, len(idx) > 0); err != nil {
		return noRow, err
	}
	return noRow, nil
}

// writeAhead writes the rows idx of a batch whose first offset follows prev, the last
// offset this sink committed for the partition, without locking the offsets row first:
// BEGIN, the COPY, advanceSQL (which fails unless the row still holds prev) and COMMIT
// go as one simple query, one round trip in all (the loop the benchmark calls the
// target's limit makes one too). When the statement cannot carry its arguments as
// literals, or the rows need pgx's encoding, BEGIN and the COPY go as one query and
// advanceSQL pipelined with COMMIT as the second. If another writer moved the row
// meanwhile (a rebalance race), or anything else fails, nothing is committed and the
// caller writes the batch again the locking way: exactly-once rests on the guarded
// UPDATE, the lock only spares work.
func (s *Sink) writeAhead(ctx context.Context, conn *pgx.Conn, topic sdk.TopicMetadata, part uint32, rows [][]any, idx []int, prev, last int64, ts *int64) error {
	wrote := len(idx) > 0
	if q, ok := s.advanceLiteralSQL(conn.PgConn(), topic, part, last, ts, wrote, prev); ok && wrote {
		sent, tag, err := s.copyOwnAround(ctx, conn, "BEGIN; ", "; "+q+"; COMMIT", rows, idx)
		if err != nil {
			if sent {
				s.forgetCopyTypes() // the table may have changed under the sink
			}
			return fmt.Errorf("copy into %s and advance %s: %w", s.cfg.TargetTable, s.cfg.OffsetsTable, err)
		}
		if sent {
			if err := commitOutcome(tag, nil); err != nil {
				return err
			}
			s.inOne.Add(1)
			return nil
		}
	}
	if _, err := s.writeRows(ctx, conn, "BEGIN; ", rows, idx, false); err != nil {
		return err
	}
	return commitWith(ctx, conn, "advance "+s.cfg.OffsetsTable, s.advanceSQL(),
		s.key, topic.Stream, topic.Topic, int32(part), last, wrote, prev, ts)
}

// advanceSQL sets the partition's last written offset only if the row still holds the
// offset the writer started from, and fails otherwise (an error, not zero rows, so that
// the COMMIT after it is skipped); arguments: connector, stream, topic, partition, last
// offset, whether rows were written, the expected offset, the last message's timestamp
// (NULL: unknown).
func (s *Sink) advanceSQL() string {
	return s.advanceStatement("$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8::bigint")
}

// advanceLiteralSQL is advanceSQL with its arguments written into the statement as
// literals, for a simple query (which takes no parameters). It reports false when they
// cannot be written safely: a name holding a NUL byte, or a server whose string literals
// treat a backslash as an escape (standard_conforming_strings off).
func (s *Sink) advanceLiteralSQL(pc *pgconn.PgConn, topic sdk.TopicMetadata, part uint32, last int64, ts *int64, wrote bool, prev int64) (string, bool) {
	if pc.ParameterStatus("standard_conforming_strings") != "on" {
		return "", false
	}
	connector, ok1 := stringLiteral(s.key)
	stream, ok2 := stringLiteral(topic.Stream)
	name, ok3 := stringLiteral(topic.Topic)
	if !ok1 || !ok2 || !ok3 {
		return "", false
	}
	tsLit := "NULL::bigint"
	if ts != nil {
		tsLit = intLiteral(*ts)
	}
	return s.advanceStatement(connector, stream, name, intLiteral(int64(part)), intLiteral(last),
		strconv.FormatBool(wrote), intLiteral(prev), tsLit), true
}

// advanceStatement is advanceSQL with each argument given as an expression. The failing
// branch counts rows, so the planner cannot evaluate it ahead.
func (s *Sink) advanceStatement(connector, stream, topic, partition, last, wrote, expected, ts string) string {
	return `WITH moved AS (UPDATE ` + s.offsets + ` SET last_offset = ` + last + `, last_timestamp = ` + ts + `, updated_at = now(), wrote_rows = wrote_rows OR ` + wrote + `
	WHERE connector = ` + connector + ` AND stream = ` + stream + ` AND topic = ` + topic + ` AND partition_id = ` + partition + ` AND last_offset = ` + expected + ` RETURNING 1)
SELECT CASE WHEN count(*) = 1 THEN 1 ELSE ('ferry: the offsets row moved under this writer (' || count(*) || ' rows at the expected offset)')::int END FROM moved`
}

// stringLiteral quotes v as an SQL string literal for a server with
// standard_conforming_strings on, where only the quote itself needs escaping (doubled);
// false when v holds a NUL byte, which no text value can hold and which would end the
// query's string in the protocol.
func stringLiteral(v string) (string, bool) {
	if strings.IndexByte(v, 0) >= 0 {
		return "", false
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'", true
}

// intLiteral writes n in parentheses, so that a minus sign can never meet an operator
// or a comment's dashes before it.
func intLiteral(n int64) string { return "(" + strconv.FormatInt(n, 10) + ")" }

// release returns a connection to the pool, rolling back a transaction still open on it
// (the pool would close a connection left inside one).
func release(ctx context.Context, pc *pgxpool.Conn) {
	if pc.Conn().PgConn().TxStatus() != 'I' {
		_, _ = pc.Conn().Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	pc.Release()
}

// lockSQL locks the partition's offsets row (creating it, last offset -1, when missing)
// and returns its last offset; arguments: connector, stream, topic, partition, target
// database, schema, table.
func (s *Sink) lockSQL() string {
	return `INSERT INTO ` + s.offsets + ` AS o (connector, stream, topic, partition_id, last_offset,
	target_database, target_schema, target_table, wrote_rows)
VALUES ($1, $2, $3, $4, -1, $5, $6, $7, false)
ON CONFLICT (connector, stream, topic, partition_id) DO UPDATE SET last_offset = o.last_offset
RETURNING last_offset`
}

// recordSQL sets the partition's last written offset and its message's timestamp (a
// NULL timestamp keeps the row's when the offset does not move: a group of messages all
// written before); arguments: connector, stream, topic, partition, last offset, whether
// rows were written, the timestamp.
func (s *Sink) recordSQL() string {
	return `UPDATE ` + s.offsets + ` SET last_offset = $5, updated_at = now(), wrote_rows = wrote_rows OR $6,
	last_timestamp = CASE WHEN last_offset = $5 THEN COALESCE($7::bigint, last_timestamp) ELSE $7::bigint END
WHERE connector = $1 AND stream = $2 AND topic = $3 AND partition_id = $4`
}

// stamp is a message timestamp as the offsets table holds it (nil: unknown).
func stamp(ts uint64) *int64 {
	if ts == 0 {
		return nil
	}
	v := int64(ts)
	return &v
}

// beginLocked opens a transaction on conn and locks the partition's offsets row in the
// same round trip (BEGIN and lockSQL pipelined), returning its last offset.
func (s *Sink) beginLocked(ctx context.Context, conn *pgx.Conn, topic sdk.TopicMetadata, part uint32) (int64, error) {
	var lastDB int64
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.lockSQL(), s.key, topic.Stream, topic.Topic, int32(part), s.ref.database, s.ref.schema, s.ref.table).
		QueryRow(func(r pgx.Row) error { return r.Scan(&lastDB) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("begin and lock %s: %w", s.cfg.OffsetsTable, err)
	}
	return lastDB, nil
}

// recordAndCommit records the partition's last written offset (exactly_once) and commits
// the transaction conn is in, in one round trip (the UPDATE and COMMIT pipelined: if the
// UPDATE fails the server skips the COMMIT, and the transaction is left to roll back).
func (s *Sink) recordAndCommit(ctx context.Context, conn *pgx.Conn, topic sdk.TopicMetadata, part uint32, last int64, ts *int64, wrote bool) error {
	if s.cfg.ExactlyOnce {
		return commitWith(ctx, conn, "update "+s.cfg.OffsetsTable, s.recordSQL(),
			s.key, topic.Stream, topic.Topic, int32(part), last, wrote, ts)
	}
	return commitOutcome(conn.Exec(ctx, "COMMIT"))
}

// commitWith runs sql (args) and COMMIT pipelined, in one round trip: after an error the
// server skips the rest of the pipeline, so the COMMIT runs only if sql succeeded (what
// names sql in that error).
func commitWith(ctx context.Context, conn *pgx.Conn, what, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return fmt.Errorf("%s: %w", what, err)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return commitOutcome(tag, err)
}

// commitOutcome is the error of a COMMIT that answered tag, err: a transaction that had
// failed answers ROLLBACK, without an error.
func commitOutcome(tag pgconn.CommandTag, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("commit: %w", err)
	case tag.String() != "COMMIT":
		return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// after returns the index of the first message above offset last.
func after(msgs []sdk.ConsumedMessage, last int64) int {
	i := 0
	for i < len(msgs) && int64(msgs[i].Offset) <= last {
		i++
	}
	return i
}

// unrefused lists the indices from..to-1 that are not in refused (ascending).
func unrefused(from, to int, refused []int) []int {
	idx := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		if _, found := slices.BinarySearch(refused, i); !found {
			idx = append(idx, i)
		}
	}
	return idx
}

// writeRows writes the rows idx in tx: COPY, or INSERT statements when insert (or in
// the insert and upsert modes). before (empty, or statements ending in "; ") runs first:
// in the COPY's own simple query when the sink encodes the rows itself (no round trip of
// its own), else on its own. A row the database refuses gives its index (INSERT) or
// locateRow (COPY does not say which); a refused row means before ran.
func (s *Sink) writeRows(ctx context.Context, conn *pgx.Conn, before string, rows [][]any, idx []int, insert bool) (int, error) {
	sent := false
	var err error
	if len(idx) > 0 && !insert {
		sent, _, err = s.copyOwnAround(ctx, conn, before, "", rows, idx)
	}
	if !sent && err == nil && before != "" {
		if _, err := conn.Exec(ctx, before); err != nil {
			return noRow, err
		}
	}
	switch {
	case len(idx) == 0 || sent:
	case insert:
		return s.insertRows(ctx, conn, rows, idx)
	case err == nil:
		_, err = conn.CopyFrom(ctx, s.target, s.cols, pgx.CopyFromSlice(len(idx), func(i int) ([]any, error) {
			r := rows[idx[i]]
			return pgxValues(r[:len(r)-1]), nil
		}))
	}
	if err != nil {
		s.forgetCopyTypes() // the table may have changed under the sink
		if rowError(err) {
			return locateRow, err
		}
		return noRow, fmt.Errorf("copy into %s: %w", s.cfg.TargetTable, err)
	}
	return noRow, nil
}

// insertRows sends the rows idx as INSERT statements (upsert: ON CONFLICT … DO UPDATE),
// batch_size per pipelined round trip; on a row error it returns that row's index.
func (s *Sink) insertRows(ctx context.Context, conn *pgx.Conn, rows [][]any, idx []int) (int, error) {
	q := s.insertSQL()
	for start := 0; start < len(idx); start += s.cfg.BatchSize {
		chunk := idx[start:min(start+s.cfg.BatchSize, len(idx))]
		b := &pgx.Batch{}
		for _, i := range chunk {
			r := rows[i]
			b.Queue(q, pgxValues(r[:len(r)-1])...)
		}
		br := conn.SendBatch(ctx, b)
		for _, i := range chunk {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				if rowError(err) {
					return i, err
				}
				return noRow, fmt.Errorf("insert into %s: %w", s.cfg.TargetTable, err)
			}
		}
		if err := br.Close(); err != nil {
			return noRow, fmt.Errorf("insert into %s: %w", s.cfg.TargetTable, err)
		}
	}
	return noRow, nil
}

func (s *Sink) insertSQL() string {
	quoted := make([]string, len(s.cols))
	params := make([]string, len(s.cols))
	for i, c := range s.cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	q := "INSERT INTO " + s.target.Sanitize() + " (" + strings.Join(quoted, ", ") + ") VALUES (" + strings.Join(params, ", ") + ")"
	if s.cfg.WriteMode == modeUpsert {
		var set []string
		for i, c := range s.cols {
			if c != s.cfg.UpsertKey {
				set = append(set, quoted[i]+" = EXCLUDED."+quoted[i])
			}
		}
		q += " ON CONFLICT (" + pgx.Identifier{s.cfg.UpsertKey}.Sanitize() + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	return q
}

// rowError reports whether err is the database refusing a row's data: SQLSTATE class 22
// (data exception), 23 (integrity constraint violation) or 54 (program limit exceeded: a
// jsonb value nested past max_stack_depth, 54001; an index row or a value past a size
// limit, 54000). Class 54 follows from the row's values as the other two do; its codes
// that would follow from the statement alone (too many columns or arguments) cannot come
// from the sink's fixed INSERT and COPY, and if one did, each row would be refused alone,
// which loses nothing a failed batch would keep.
func rowError(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code[:min(2, len(pe.Code))] {
	case "22", "23", "54":
		return true
	}
	return false
}

// transient reports whether err is worth retrying as is: the connection failed or the
// server is starting, stopping or short of resources, or a serialization failure.
func transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "40", "53", "57", "58":
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed") ||
		strings.Contains(err.Error(), "conn busy")
}

// steer makes a transient database error one the runtime retries without counting it
// toward max_retries: a lost connection asks for a reconnect (sdk.ErrNotConnected,
// answered by Reconnect), anything else transient (a serialization failure, a server
// short of resources) for a wait (sdk.BackOff with the runtime's backoff). Other errors
// are returned as they are.
func steer(err error) error {
	switch {
	case err == nil || !transient(err):
		return err
	case connectionLost(err):
		return fmt.Errorf("%w: %w", sdk.ErrNotConnected, err)
	}
	return sdk.BackOff(0, err)
}

// connectionLost reports whether err is the connection failing, no new one to be had, or
// the server going away (SQLSTATE class 08, or 57P01–57P03: shut down, crashed, not
// accepting connections yet).
func connectionLost(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce):
		return true
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return true // not the server's answer: the connection failed
}

// Reconnect implements sdk.Reconnector: the runtime calls it, with its backoff, after
// Consume lost its connection, until PostgreSQL answers again. The pool replaces broken
// connections itself; this waits for a working one.
func (s *Sink) Reconnect(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	return nil
}
