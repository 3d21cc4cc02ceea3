package postgres

import (
	"cmp"
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
	cfg        Config
	key        string
	stop       bool // on_failure = stop: never commit past a rejected row
	committer  sdk.Committer
	log        *slog.Logger
	pool       *pgxpool.Pool
	cols       []string // target columns, in row order
	payloadCol int      // the payload's index in cols
	offsets    string   // quoted offsets table
	target     pgx.Identifier
	ref        tableRef // the target's full name, recorded in the offsets rows
	// Retry pacing for transient database errors (connection lost, server restarting).
	backoffInitial, backoffMax time.Duration
	// Group commit (flush_interval > 0): one open transaction per partition (group.go).
	flushEvery     time.Duration
	commitCaughtUp bool // commit_when_caught_up
	groups         groups
	// The target's column types for the binary COPY encoder (copybin.go), read once.
	oidsMu sync.Mutex
	oids   []uint32
	// written is the last offset this sink committed for each partition (exactly_once,
	// one transaction per batch), dropped on any failure: a batch that continues it is
	// written without locking first (write.go, writeAhead).
	written written
	ahead   atomic.Uint64 // batches writeAhead committed (tests read it)
	inOne   atomic.Uint64 // of them, those sent as one simple query (tests read it)
}

// New returns an unopened PostgreSQL sink.
func New() *Sink { return &Sink{backoffInitial: 50 * time.Millisecond, backoffMax: 2 * time.Second} }

var (
	_ sdk.Sink           = (*Sink)(nil)
	_ sdk.PositionKeeper = (*Sink)(nil)
)

// Open parses plugin_config, connects (retrying transient failures until ctx ends) and
// creates the offsets table and, with auto_create_table, the target table.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := parseConfig(env.Config)
	if err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	s.cfg, s.key, s.committer, s.log = cfg, env.Key, env.Committer, env.Logger
	s.stop = env.OnFailure == "" || env.OnFailure == "stop"
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryDelay != "" {
		d, _ := sdk.ParseDuration(cfg.RetryDelay) // checked by parseConfig
		s.backoffInitial = min(d, s.backoffMax)
	}
	pc, err := pgxpool.ParseConfig(cfg.ConnectionString)
	if err != nil {
		// pgx's parse errors redact the password; still, say no more than the field.
		return errors.New("postgres sink: plugin_config: connection_string: cannot be parsed (not logged)")
	}
	pc.MaxConns = int32(cfg.MaxConnections)
	if cfg.WarmBackends == nil || *cfg.WarmBackends {
		pc.AfterConnect = WarmBackend
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("postgres sink: pool: %w", err)
	}
	s.target = pgx.Identifier{cfg.TargetTable}
	s.offsets = pgx.Identifier{cfg.OffsetsTable}.Sanitize()
	s.cols = s.columns()
	s.flushEvery, _ = sdk.ParseDuration(cmp.Or(cfg.FlushInterval, "0s")) // checked by parseConfig
	s.commitCaughtUp = cfg.CommitWhenCaughtUp == nil || *cfg.CommitWhenCaughtUp
	s.groups.init()
	err = s.retryTransient(ctx, "prepare tables", func(ctx context.Context) error { return s.prepare(ctx) })
	if err != nil {
		s.pool.Close()
		return fmt.Errorf("postgres sink: %w", err)
	}
	s.log.Info("postgres sink open", "host", pc.ConnConfig.Host, "port", pc.ConnConfig.Port, "database", pc.ConnConfig.Database,
		"table", cfg.TargetTable, "write_mode", cfg.WriteMode, "exactly_once", *cfg.ExactlyOnce, "offsets_table", cfg.OffsetsTable)
	return nil
}

// columns lists the target's columns this configuration writes, in the official order.
func (s *Sink) columns() []string {
	cols := []string{"id"}
	if *s.cfg.IncludeMetadata {
		cols = append(cols, "iggy_offset", "iggy_timestamp", "iggy_stream", "iggy_topic", "iggy_partition_id")
	}
	if *s.cfg.IncludeChecksum {
		cols = append(cols, "iggy_checksum")
	}
	if *s.cfg.IncludeOriginTimestamp {
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
	if *s.cfg.ExactlyOnce {
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
	payload := map[string]string{FormatBytea: "bytea", FormatJSON: "jsonb", FormatText: "text"}[s.cfg.PayloadFormat]
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + s.target.Sanitize() + " (\n\tid numeric(39,0) PRIMARY KEY")
	if *s.cfg.IncludeMetadata {
		b.WriteString(",\n\tiggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text, iggy_topic text, iggy_partition_id integer")
	}
	if *s.cfg.IncludeChecksum {
		b.WriteString(",\n\tiggy_checksum bigint")
	}
	if *s.cfg.IncludeOriginTimestamp {
		b.WriteString(",\n\tiggy_origin_timestamp timestamptz")
	}
	b.WriteString(",\n\tpayload " + payload)
	for _, c := range s.cfg.Columns {
		b.WriteString(",\n\t" + pgx.Identifier{c.Name}.Sanitize() + " " + c.Type)
		if s.cfg.WriteMode == ModeUpsert && c.Name == s.cfg.UpsertKey {
			b.WriteString(" UNIQUE")
		}
	}
	b.WriteString(",\n\tcreated_at timestamptz DEFAULT now())")
	if _, err := s.pool.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("create table %s: %w", s.cfg.TargetTable, err)
	}
	return nil
}

// KeepsPositions implements sdk.PositionKeeper: with exactly_once every partition this
// sink has written resumes from the offsets table, not from Iggy's stored offset.
func (s *Sink) KeepsPositions() bool { return *s.cfg.ExactlyOnce }

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
// commits that group first, so it starts after it.
func (s *Sink) Positions(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
	if err := s.flushPartitions(ctx, parts); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if !*s.cfg.ExactlyOnce {
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
		s.written.drop(writtenKey{topic.Stream, topic.Topic, p.PartitionID})
	}
	if !*s.cfg.ExactlyOnce {
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
// partition's new last offset. Transient database errors are retried here with backoff
// until ctx ends (so a restart of PostgreSQL never reaches on_failure); a row the database
// refuses is handed back as sdk.RejectedMessages (or, under on_failure = stop, an error,
// with nothing of the batch committed). After the commit the offset goes to the Committer.
// With flush_interval the batch joins its partition's open transaction instead
// (group.go), and the offset goes to the Committer when that commits.
func (s *Sink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
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
			if s.stop {
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
	refused, rejErr, err := s.writeBatch(ctx, topic, meta.Partition.PartitionID, msgs, rows, refused, rejErr)
	if err != nil {
		return err
	}
	last := msgs[len(msgs)-1].Offset
	s.log.Log(ctx, s.batchLevel(), "batch written", "partition", meta.Partition.PartitionID, "first_offset", msgs[0].Offset,
		"last_offset", last, "rejected", len(refused))
	s.commit(meta.Partition, last)
	return rejected(msgs, refused, rejErr)
}

// writeBatch writes msgs but refused in one transaction (writeTx), retrying transient
// errors until ctx ends; rows the database refuses join refused (rejErr is the first
// refusal), or, under on_failure = stop, fail the batch with nothing of it written.
func (s *Sink) writeBatch(ctx context.Context, topic sdk.TopicMetadata, part uint32, msgs []sdk.ConsumedMessage, rows [][]any, refused []int, rejErr error) ([]int, error, error) {
	insert := s.cfg.WriteMode != ModeCopy
	for {
		bad := noRow
		err := s.retryTransient(ctx, "write batch", func(ctx context.Context) error {
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
		case s.stop:
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

// commit hands the partition's last written offset to the Committer (sink_controlled).
func (s *Sink) commit(p sdk.Partition, last uint64) {
	if s.committer == nil {
		return
	}
	if err := s.committer.Commit(p, last); err != nil && !errors.Is(err, sdk.ErrCommitStale) {
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
