package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The offsets table names the table each of its rows describes (target_database,
// target_schema, target_table): a row's last_offset says which messages are already in
// that table, and means nothing for another. wrote_rows says whether any row of the
// partition went into that table (false when every one was rejected, or after Open
// accepted the table as it is); NULL, for rows older than the column, means unknown. Tables created before these columns
// existed get them added, empty (a row that names no table yet); Open claims such rows
// for the sink's target once the target agrees with them.

// tableRef is a table's full name: database, schema and table.
type tableRef struct{ database, schema, table string }

func (r tableRef) String() string {
	return pgx.Identifier{r.database, r.schema, r.table}.Sanitize()
}

// offsetsColumnsAdded are the offsets table's columns added after its first version.
// last_timestamp is the Iggy timestamp (µs) of the message at last_offset, NULL when
// unknown (rows written before the column): the start position is checked against it, so
// that a partition purged while the sink was away is written again from offset 0.
var offsetsColumnsAdded = []string{"target_database", "target_schema", "target_table", "wrote_rows", "last_timestamp"}

// ensureOffsetsTable creates the offsets table, then adds the columns naming the target
// to a table an older Ferry created (its rows get empty names and read as before). The ALTER runs only when a column is missing: it
// takes an ACCESS EXCLUSIVE lock even when every column exists, so it would wait for every
// open transaction holding an offsets row (another instance's groups) and stall every
// writer queued behind it.
func (s *Sink) ensureOffsetsTable(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.offsets+` (
	connector text NOT NULL, stream text NOT NULL, topic text NOT NULL, partition_id integer NOT NULL,
	last_offset bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),
	target_database text NOT NULL DEFAULT '', target_schema text NOT NULL DEFAULT '', target_table text NOT NULL DEFAULT '',
	wrote_rows boolean, last_timestamp bigint,
	PRIMARY KEY (connector, stream, topic, partition_id))`); err != nil {
		return err
	}
	var have int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_attribute
	WHERE attrelid = to_regclass($1) AND attname = ANY($2) AND attnum > 0 AND NOT attisdropped`,
		s.offsets, offsetsColumnsAdded).Scan(&have); err != nil {
		return err
	}
	if have == len(offsetsColumnsAdded) {
		return nil
	}
	_, err := s.pool.Exec(ctx, `ALTER TABLE `+s.offsets+` ADD COLUMN IF NOT EXISTS target_database text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS target_schema text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS target_table text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS wrote_rows boolean,
	ADD COLUMN IF NOT EXISTS last_timestamp bigint`)
	return err
}

// resolveTarget returns the target's full name (its schema is the one the search path
// resolves it to, or the current schema when it does not exist) and whether it exists.
func (s *Sink) resolveTarget(ctx context.Context) (tableRef, bool, error) {
	var db string
	var schema, current *string
	err := s.pool.QueryRow(ctx, `SELECT current_database(),
	(SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)),
	current_schema()`, s.target.Sanitize()).Scan(&db, &schema, &current)
	if err != nil {
		return tableRef{}, false, fmt.Errorf("resolve table %s: %w", s.cfg.TargetTable, err)
	}
	ref := tableRef{database: db, table: s.cfg.TargetTable}
	switch {
	case schema != nil:
		ref.schema = *schema
	case current != nil:
		ref.schema = *current
	}
	return ref, schema != nil, nil
}

// offsetsRow is one row of the offsets table for this connector key.
type offsetsRow struct {
	stream, topic string
	partition     int32
	last          int64
	target        tableRef
	wroteRows     *bool
}

func (r offsetsRow) where() string {
	return fmt.Sprintf("%s/%s partition %d", r.stream, r.topic, r.partition)
}

// checkOffsets compares the connector key's offsets rows with the target table. A row
// naming another table, or offsets written into a table that now holds no rows
// (truncated, dropped or recreated), is a mismatch, handled by on_offsets_mismatch:
// error (Open fails, naming the tables and offsets), resume (the rows now describe the
// target as it is, their offsets kept), restart (those partitions start again at offset
// 0). Rows that name no table yet are claimed for the target.
func (s *Sink) checkOffsets(ctx context.Context) error {
	ref, exists, err := s.resolveTarget(ctx)
	if err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT stream, topic, partition_id, last_offset, target_database, target_schema, target_table, wrote_rows
FROM `+s.offsets+` WHERE connector = $1 ORDER BY stream, topic, partition_id`, s.key)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.cfg.OffsetsTable, err)
	}
	var all []offsetsRow
	var r offsetsRow
	_, err = pgx.ForEachRow(rows, []any{&r.stream, &r.topic, &r.partition, &r.last, &r.target.database, &r.target.schema, &r.target.table, &r.wroteRows}, func() error {
		all = append(all, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", s.cfg.OffsetsTable, err)
	}
	empty := !exists
	if exists && len(all) > 0 {
		var hasRows bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.target.Sanitize()+`)`).Scan(&hasRows); err != nil {
			return fmt.Errorf("read %s: %w", s.cfg.TargetTable, err)
		}
		empty = !hasRows
	}
	var bad []offsetsRow
	var why []string
	for _, r := range all {
		switch {
		case r.target.table != "" && r.target != ref:
			bad = append(bad, r)
			why = append(why, fmt.Sprintf("%s: offsets up to %d were written into %s", r.where(), r.last, r.target))
		case r.last >= 0 && empty && (r.wroteRows == nil || *r.wroteRows):
			bad = append(bad, r)
			why = append(why, fmt.Sprintf("%s: offsets up to %d were written into %s, which now holds no rows", r.where(), r.last, ref))
		}
	}
	if len(bad) > 0 {
		msg := fmt.Sprintf("%s (connector %q) does not match the target table %s: %s", s.cfg.OffsetsTable, s.key, ref, summarize(why))
		switch s.cfg.OnOffsetsMismatch {
		case mismatchResume, mismatchRestart:
			// resume keeps the offsets, restart starts again at 0 (-1 + 1); either way
			// the table as it is now holds none of these partitions' rows.
			set, what := "last_offset", "resuming after those offsets"
			if s.cfg.OnOffsetsMismatch == mismatchRestart {
				set, what = "-1, last_timestamp = NULL", "those partitions start again at offset 0"
			}
			s.log.Warn(fmt.Sprintf("%s; %s (on_offsets_mismatch = %s)", msg, what, s.cfg.OnOffsetsMismatch), "table", ref.String())
			for _, r := range bad {
				if _, err := s.pool.Exec(ctx, `UPDATE `+s.offsets+` SET last_offset = `+set+`, wrote_rows = false, updated_at = now()
WHERE connector = $1 AND stream = $2 AND topic = $3 AND partition_id = $4`, s.key, r.stream, r.topic, r.partition); err != nil {
					return fmt.Errorf("update %s: %w", s.cfg.OffsetsTable, err)
				}
			}
		default:
			return fmt.Errorf("%s; set plugin_config.%s = %q to write after those offsets anyway, or %q to write those partitions again from offset 0",
				msg, "on_offsets_mismatch", mismatchResume, mismatchRestart)
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.offsets+` SET target_database = $2, target_schema = $3, target_table = $4
WHERE connector = $1 AND (target_database, target_schema, target_table) IS DISTINCT FROM ($2, $3, $4)`,
		s.key, ref.database, ref.schema, ref.table); err != nil {
		return fmt.Errorf("update %s: %w", s.cfg.OffsetsTable, err)
	}
	s.ref = ref
	return nil
}

// summarize joins the first mismatches and counts the rest.
func summarize(why []string) string {
	const shown = 5
	if len(why) <= shown {
		return strings.Join(why, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(why[:shown], "; "), len(why)-shown)
}
