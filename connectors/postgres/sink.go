package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/sdk"
)

// Sink writes messages to a PostgreSQL table. Consume is safe for concurrent use (one
// caller per topic, as the runtime calls it); each call is one transaction.
type Sink struct {
	cfg          config
	key          string
	passRejected bool // on_failure allows committing past a rejected row (not stop)
	log          *slog.Logger
	pool         *pgxpool.Pool
	cols         []string // target columns, in row order
	payloadCol   int      // the payload's index in cols
	offsets      string   // quoted offsets table
	target       pgx.Identifier
	ref          tableRef // the target's full name, recorded in the offsets rows
	// retry retries transient database errors where no runtime retry is around the call
	// (Open, a flush timer's commit, Close); Consume steers them to the runtime instead
	// (steer).
	retry sdk.Retry
	// Group commit (flush_interval > 0): one open transaction per partition (group.go).
	flushEvery     time.Duration
	commitCaughtUp bool // commit_when_caught_up
	groups         groups
	// The target's column types for the binary COPY encoder (copybin.go), read once.
	oidsMu sync.Mutex
	oids   []uint32
	// pos keeps, per partition, the last offset this sink made durable (its transaction
	// committed) and commits it (sink_controlled). With exactly_once, a batch that
	// continues it is written without locking first (write.go, writeAhead).
	pos   *sdk.Positions
	ahead atomic.Uint64 // batches writeAhead committed (tests read it)
	inOne atomic.Uint64 // of them, those sent as one simple query (tests read it)
}

// New returns an unopened PostgreSQL sink.
func New() *Sink { return &Sink{} }

var (
	_ sdk.Sink           = (*Sink)(nil)
	_ sdk.PositionKeeper = (*Sink)(nil)
	_ sdk.RewindSeeker   = (*Sink)(nil)
	_ sdk.Reconnector    = (*Sink)(nil)
)

// maxBackoff caps the waits of Sink.retry.
const maxBackoff = 2 * time.Second

// Open parses plugin_config, connects (retrying transient failures until ctx ends) and
// creates the offsets table and, with auto_create_table, the target table.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("postgres sink: %w", err))
	}
	s.cfg, s.key, s.log = cfg, env.Key, env.Logger
	s.passRejected = env.OnFailure.MayPassRejected()
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.retry = sdk.Retry{Initial: min(cfg.RetryDelay, maxBackoff), Max: maxBackoff, Transient: transient, Log: s.log}
	s.pos = sdk.NewPositions(env, nil)
	pc, err := pgxpool.ParseConfig(cfg.ConnectionString.Reveal())
	if err != nil {
		// pgx's parse errors redact the password; still, say no more than the field.
		return sdk.Permanent(errors.New("postgres sink: plugin_config: connection_string: cannot be parsed (not logged)"))
	}
	pc.MaxConns = int32(cfg.MaxConnections)
	if cfg.WarmBackends {
		pc.AfterConnect = WarmBackend
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("postgres sink: pool: %w", err)
	}
	s.target = pgx.Identifier{cfg.TargetTable}
	s.offsets = pgx.Identifier{cfg.OffsetsTable}.Sanitize()
	s.cols = s.columns()
	s.flushEvery, s.commitCaughtUp = cfg.FlushInterval, cfg.CommitWhenCaughtUp
	s.groups.init()
	if err := s.retrying("prepare tables").Do(ctx, func(ctx context.Context, _ int) error { return s.prepare(ctx) }); err != nil {
		s.pool.Close()
		return fmt.Errorf("postgres sink: %w", err)
	}
	s.log.Info("postgres sink open", "host", pc.ConnConfig.Host, "port", pc.ConnConfig.Port, "database", pc.ConnConfig.Database,
		"table", cfg.TargetTable, "write_mode", cfg.WriteMode, "exactly_once", cfg.ExactlyOnce, "offsets_table", cfg.OffsetsTable)
	return nil
}

// retrying is s.retry naming what it retries in its log lines.
func (s *Sink) retrying(what string) sdk.Retry {
	r := s.retry
	r.What = "postgres sink: " + what
	return r
}

// once calls an operation once: on Consume's path, where the runtime retries what fails
// (steered by steer).
var once = sdk.Retry{Attempts: 1}

// columns lists the target's columns this configuration writes, in the official order.
func (s *Sink) columns() []string {
	cols := []string{"id"}
	if s.cfg.IncludeMetadata {
		cols = append(cols, "iggy_offset", "iggy_timestamp", "iggy_stream", "iggy_topic", "iggy_partition_id")
	}
	if s.cfg.IncludeChecksum {
		cols = append(cols, "iggy_checksum")
	}
	if s.cfg.IncludeOriginTimestamp {
		cols = append(cols, "iggy_origin_timestamp")
	}
	cols = append(cols, "payload")
	s.payloadCol = len(cols) - 1
	for _, c := range s.cfg.Columns {
		cols = append(cols, c.Name)
	}
	return cols
}

func (s *Sink) prepare(ctx context.Context) (err error) {
	if s.cfg.ExactlyOnce {
		if err := s.ensureOffsetsTable(ctx); err != nil {
			return fmt.Errorf("create offsets table %s: %w", s.cfg.OffsetsTable, err)
		}
		// The target's rows are checked against the offsets after it is created.
		defer func() {
			if err == nil {
				err = s.checkOffsets(ctx)
			}
		}()
	}
	if !s.cfg.AutoCreateTable {
		return nil
	}
	if _, err := s.pool.Exec(ctx, s.createTableSQL()); err != nil {
		return fmt.Errorf("create table %s: %w", s.cfg.TargetTable, err)
	}
	return nil
}

// payloadType is the payload column's SQL type for payload_format.
func (s *Sink) payloadType() string {
	return map[payloadFormat]string{formatBytea: "bytea", formatJSON: "jsonb", formatText: "text"}[s.cfg.PayloadFormat]
}

// createTableSQL is auto_create_table's statement: the official layout, then columns.
func (s *Sink) createTableSQL() string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + s.target.Sanitize() + " (\n\tid numeric(39,0) PRIMARY KEY")
	if s.cfg.IncludeMetadata {
		b.WriteString(",\n\tiggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text, iggy_topic text, iggy_partition_id integer")
	}
	if s.cfg.IncludeChecksum {
		b.WriteString(",\n\tiggy_checksum bigint")
	}
	if s.cfg.IncludeOriginTimestamp {
		b.WriteString(",\n\tiggy_origin_timestamp timestamptz")
	}
	b.WriteString(",\n\tpayload " + s.payloadType())
	for _, c := range s.cfg.Columns {
		b.WriteString(",\n\t" + pgx.Identifier{c.Name}.Sanitize() + " " + c.Type)
		if s.cfg.WriteMode == modeUpsert && c.Name == s.cfg.UpsertKey {
			b.WriteString(" UNIQUE")
		}
	}
	b.WriteString(",\n\tcreated_at timestamptz DEFAULT now())")
	return b.String()
}

// KeepsPositions implements sdk.PositionKeeper: with exactly_once every partition this
// sink has written resumes from the offsets table, not from Iggy's stored offset.
func (s *Sink) KeepsPositions() bool { return s.cfg.ExactlyOnce }

// Assigned implements sdk.PartitionSeeker: Positions without the timestamps.
func (s *Sink) Assigned(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	pos, err := s.Positions(ctx, topic, parts)
	if pos == nil {
		return nil, err
	}
	out := make(map[sdk.Partition]uint64, len(pos))
	for p, v := range pos {
		out[p] = v.Next
	}
	return out, err
}

// Positions implements sdk.RewindSeeker: each partition with a row in the offsets table
// starts at its last written offset + 1 (0 after on_offsets_mismatch = restart set it
// to -1), checked against the timestamp of the message written there (a row written
// before the offsets table had last_timestamp is not checked); the others at the group's
// offset in Iggy. A partition assigned again while its group (flush_interval) is open
// commits that group first, so it starts after it; what the sink knew of the partitions
// before is dropped (s.pos).
func (s *Sink) Positions(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
	if err := s.flushPartitions(ctx, parts); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if _, err := s.pos.Assigned(ctx, topic, parts); err != nil { // no load function: cannot fail
		return nil, err
	}
	if !s.cfg.ExactlyOnce {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT partition_id, last_offset, COALESCE(last_timestamp, 0) FROM `+s.offsets+
		` WHERE connector = $1 AND stream = $2 AND topic = $3 AND partition_id = ANY($4) AND last_offset >= -1`,
		s.key, topic.Stream, topic.Topic, partitionIDs(parts))
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read %s: %w", s.cfg.OffsetsTable, err)
	}
	out := map[sdk.Partition]sdk.Position{}
	var id int32
	var last, ts int64
	_, err = pgx.ForEachRow(rows, []any{&id, &last, &ts}, func() error {
		out[sdk.Partition{StreamID: topic.StreamID, TopicID: topic.TopicID, PartitionID: uint32(id)}] = sdk.Position{Next: uint64(last) + 1, Timestamp: uint64(ts)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read %s: %w", s.cfg.OffsetsTable, err)
	}
	return out, nil
}

// Rewound implements sdk.RewindSeeker: partitions that went back to offset 0 (purged)
// have their open groups committed (those rows are of messages that were delivered), then
// their offsets rows set to -1, so the new messages from offset 0 are written rather than
// skipped as written already. The rows of the purged messages stay in the table.
func (s *Sink) Rewound(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) error {
	if err := s.flushPartitions(ctx, parts); err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	for _, p := range parts {
		s.pos.Forget(p)
	}
	if !s.cfg.ExactlyOnce {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.offsets+` SET last_offset = -1, last_timestamp = NULL, updated_at = now()
WHERE connector = $1 AND stream = $2 AND topic = $3 AND partition_id = ANY($4)`,
		s.key, topic.Stream, topic.Topic, partitionIDs(parts)); err != nil {
		return fmt.Errorf("postgres sink: update %s: %w", s.cfg.OffsetsTable, err)
	}
	s.log.Warn("partitions went back to offset 0 (purged); their offsets rows start again, the rows of the purged messages stay in the table",
		"stream", topic.Stream, "topic", topic.Topic, "partitions", partitionIDs(parts), "table", s.ref.String())
	return nil
}

func partitionIDs(parts []sdk.Partition) []int32 {
	ids := make([]int32, len(parts))
	for i, p := range parts {
		ids[i] = int32(p.PartitionID)
	}
	return ids
}

// Consume writes one batch: one transaction holding the rows and, with exactly_once, the
// partition's new last offset. A transient database error is steered to the runtime,
// which retries the batch without counting it (steer), so a restart of PostgreSQL never
// reaches on_failure; a row the database refuses is handed back as
// sdk.RejectedMessages (or, under on_failure = stop, an error, with nothing of the batch
// committed). After the commit the offset goes to the Committer. With flush_interval the
// batch joins its partition's open transaction instead (group.go), and the offset goes
// to the Committer when that commits.
func (s *Sink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	return steer(s.consume(ctx, topic, meta, msgs))
}

func (s *Sink) consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	rows := make([][]any, len(msgs))
	width := len(s.cols) + 1
	backing := make([]any, len(msgs)*width) // one allocation for every row's interfaces,
	vals := make([]rowValues, len(msgs))    // and one for the values they point to
	nm := names(topic)
	for i := range msgs {
		rows[i] = s.appendRow(backing[i*width:i*width:(i+1)*width], &vals[i], nm, meta.Partition.PartitionID, &msgs[i])
	}
	if s.flushEvery > 0 {
		s.keepPayloads(rows, msgs) // the group outlives this call; msgs' bytes do not
	}
	var refused []int // indices into msgs, ascending
	for i := range rows {
		if err, ok := rows[i][len(rows[i])-1].(convError); ok {
			if !s.passRejected {
				return fmt.Errorf("postgres sink: partition %d offset %d rejected (nothing of the batch written): %w",
					meta.Partition.PartitionID, msgs[i].Offset, err)
			}
			refused = append(refused, i)
		}
	}
	var rejErr error
	if len(refused) > 0 {
		rejErr = rows[refused[0]][len(rows[refused[0]])-1].(convError)
	}
	if s.flushEvery > 0 {
		caughtUp := s.commitCaughtUp && meta.CurrentOffset <= msgs[len(msgs)-1].Offset
		return s.consumeGrouped(ctx, topic, meta.Partition, msgs, rows, refused, rejErr, caughtUp)
	}
	refused, rejErr, err := s.writeBatch(ctx, once, topic, meta.Partition.PartitionID, msgs, rows, refused, rejErr)
	if err != nil {
		return err
	}
	last := msgs[len(msgs)-1].Offset
	s.log.Log(ctx, s.batchLevel(), "batch written", "partition", meta.Partition.PartitionID, "first_offset", msgs[0].Offset,
		"last_offset", last, "rejected", len(refused))
	s.commit(meta.Partition, last)
	return rejected(msgs, refused, rejErr)
}

// writeBatch writes msgs but refused in one transaction (writeTx), retried by r; rows the
// database refuses join refused (rejErr is the first refusal), or, under on_failure =
// stop, fail the batch with nothing of it written.
func (s *Sink) writeBatch(ctx context.Context, r sdk.Retry, topic sdk.TopicMetadata, part uint32, msgs []sdk.ConsumedMessage, rows [][]any, refused []int, rejErr error) ([]int, error, error) {
	insert := s.cfg.WriteMode != modeCopy
	for {
		bad := noRow
		err := r.Do(ctx, func(ctx context.Context, _ int) error {
			var err error
			bad, err = s.writeTx(ctx, topic, part, msgs, rows, refused, insert)
			return err
		})
		if err == nil {
			return refused, rejErr, nil
		}
		switch {
		case bad == locateRow: // COPY refused some row: find which, one INSERT each
			insert = true
			continue
		case bad == noRow:
			return nil, nil, fmt.Errorf("postgres sink: %w", err)
		case !s.passRejected:
			return nil, nil, fmt.Errorf("postgres sink: partition %d offset %d rejected (nothing of the batch written): %w",
				part, msgs[bad].Offset, err)
		}
		refused = append(refused, bad)
		slices.Sort(refused)
		if rejErr == nil {
			rejErr = err
		}
		s.log.Warn("row rejected by the database", "partition", part, "offset", msgs[bad].Offset, "error", err)
	}
}

// batchLevel is the level of the "batch written" lines: info with verbose_logging.
func (s *Sink) batchLevel() slog.Level {
	if s.cfg.VerboseLogging {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// commit records the partition's last written offset as durable, which commits it
// (sink_controlled).
func (s *Sink) commit(p sdk.Partition, last uint64) {
	if err := s.pos.Durable(p, last); err != nil {
		// Written and recorded in the database: the next owner starts after it anyway.
		s.log.Debug("offset commit refused after the database commit", "partition", p.PartitionID, "offset", last, "error", err)
	}
}

// rejected is Consume's result for a batch written but for the messages refused.
func rejected(msgs []sdk.ConsumedMessage, refused []int, rejErr error) error {
	if len(refused) == 0 {
		return nil
	}
	offs := make([]uint64, len(refused))
	for i, idx := range refused {
		offs[i] = msgs[idx].Offset
	}
	return &sdk.RejectedMessages{Offsets: offs, Err: rejErr}
}

// Close commits every open group (flush_interval), bounded by ctx, then releases the
// pool. Without group commit every Consume committed its own transaction.
func (s *Sink) Close(ctx context.Context) error {
	err := s.closeGroups(ctx)
	if s.pool != nil {
		s.pool.Close()
	}
	return err
}
