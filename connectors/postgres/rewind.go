package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ferryio/ferry/sdk"
)

// The offsets table is where an exactly_once sink resumes, so an operator's change of the
// sink's offsets (PUT /sinks/{key}/offsets on the stopped sink) is made in it: every row
// in one transaction, then the runtime stores the same offsets in Iggy.

var _ sdk.PositionRewinder = (*Sink)(nil)

// HeldPositions implements sdk.PositionReader: each partition with an offsets row resumes
// at its last_offset + 1. It only reads (no open group is committed, unlike Positions).
func (s *Sink) HeldPositions(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	if !s.cfg.ExactlyOnce {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT partition_id, last_offset FROM `+s.offsets+
		` WHERE connector = $1 AND stream = $2 AND topic = $3 AND partition_id = ANY($4) AND last_offset >= -1`,
		s.key, topic.Stream, topic.Topic, partitionIDs(parts))
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read %s: %w", s.cfg.OffsetsTable, err)
	}
	out := map[sdk.Partition]uint64{}
	var id int32
	var last int64
	_, err = pgx.ForEachRow(rows, []any{&id, &last}, func() error {
		out[sdk.Partition{StreamID: topic.StreamID, TopicID: topic.TopicID, PartitionID: uint32(id)}] = uint64(last + 1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read %s: %w", s.cfg.OffsetsTable, err)
	}
	return out, nil
}

// RewindPositions implements sdk.PositionRewinder: each partition's offsets row is set
// to the offset before its new position (created when missing), in one transaction.
// last_timestamp is cleared (the message there was not written by this sink, or not
// last), so the first poll is not checked against it; wrote_rows is kept. The rows of
// the target table stay: a replay writes them again (with write_mode upsert, over them).
func (s *Sink) RewindPositions(ctx context.Context, changes []sdk.PositionChange) error {
	if !s.cfg.ExactlyOnce {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, c := range changes {
			last := int64(c.Next) - 1
			if _, err := tx.Exec(ctx, `INSERT INTO `+s.offsets+` AS o (connector, stream, topic, partition_id, last_offset,
	target_database, target_schema, target_table, wrote_rows, last_timestamp)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false, NULL)
ON CONFLICT (connector, stream, topic, partition_id)
DO UPDATE SET last_offset = EXCLUDED.last_offset, last_timestamp = NULL, updated_at = now()`,
				s.key, c.Topic.Stream, c.Topic.Topic, int32(c.Partition.PartitionID), last,
				s.ref.database, s.ref.schema, s.ref.table); err != nil {
				return fmt.Errorf("%s/%s partition %d: %w", c.Topic.Stream, c.Topic.Topic, c.Partition.PartitionID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres sink: set %s: %w", s.cfg.OffsetsTable, err)
	}
	s.log.Info("postgres sink: offsets rows set by the operator; the rows already in the table stay",
		"table", s.ref.String(), "offsets_table", s.cfg.OffsetsTable, "partitions", len(changes))
	return nil
}
