package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ferryio/ferry/sdk"
)

// poller is polling mode: each table is read past its tracking column's last value, as
// upstream does, but the last values advance, and rows are deleted or marked processed,
// only after Iggy acknowledged the batch: at least once, never a gap.
type poller struct {
	cfg     *config
	conn    *pgx.Conn
	types   *pgtype.Map
	offsets map[string]string // table -> the last tracking value Iggy holds
	first   bool              // the first Read does not wait
	// resume: rows are deleted or marked after the state is saved, so a crash between the
	// two leaves finished-but-present rows at or below the saved offset. The first round
	// after a restart reads them again (a duplicate, allowed by at least once) instead of
	// leaving them in the table forever.
	resume bool
}

// pollState is the saved state of polling mode.
type pollState struct {
	TrackingOffsets map[string]string `json:"tracking_offsets"`
}

func newPoller(cfg *config, conn *pgx.Conn, state []byte) (*poller, error) {
	p := &poller{cfg: cfg, conn: conn, types: pgtype.NewMap(), offsets: map[string]string{}, first: true}
	if len(state) > 0 {
		var st pollState
		if err := json.Unmarshal(state, &st); err != nil {
			return nil, fmt.Errorf("saved state %q: %w", state, err)
		}
		maps.Copy(p.offsets, st.TrackingOffsets)
		p.resume = (cfg.DeleteAfterRead || cfg.ProcessedColumn != "") && cfg.CustomQuery == ""
	}
	return p, nil
}

// query returns the SQL that reads table past offset, and its arguments: upstream's query
// with the last tracking value as its one parameter, or custom_query with $table,
// $offset, $limit, $now and $now_unix replaced (no arguments).
//
// The tracking value is the column's own text output, sent as a parameter of no declared
// type: PostgreSQL gives it the column's type (as it would a quoted literal), so a text
// column holding '0001' is compared as text and an integer column as an integer. Writing
// the value into the query bare when it looks like a number, as upstream does, compares a
// text column with an integer, which PostgreSQL refuses.
func (p *poller) query(table string) (string, [][]byte) {
	offset, ok := p.offsets[table]
	if p.resume {
		ok = false
	}
	if !ok {
		offset = p.cfg.InitialOffset
		ok = offset != ""
	}
	if p.cfg.CustomQuery != "" {
		now := time.Now().UTC()
		return strings.NewReplacer("$table", table, "$offset", offset, "$limit", strconv.Itoa(p.cfg.BatchSize),
			"$now_unix", strconv.FormatInt(now.Unix(), 10), "$now", now.Format(time.RFC3339)).Replace(p.cfg.CustomQuery), nil
	}
	schema, name := tableRef(table)
	track := pgx.Identifier{p.cfg.TrackingColumn}.Sanitize()
	var where []string
	var args [][]byte
	if ok {
		where = append(where, track+" > $1")
		args = append(args, []byte(offset))
	}
	if p.cfg.ProcessedColumn != "" {
		where = append(where, pgx.Identifier{p.cfg.ProcessedColumn}.Sanitize()+" = FALSE")
	}
	q := "SELECT * FROM " + pgx.Identifier{schema, name}.Sanitize()
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY " + track + " ASC LIMIT " + strconv.Itoa(p.cfg.BatchSize), args
}

// read polls every table once, waiting poll_interval between rounds that found nothing.
func (p *poller) read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	for {
		if !p.first {
			select {
			case <-ctx.Done():
				return sdk.SourceBatch{}, nil, ctx.Err()
			case <-time.After(p.cfg.PollInterval):
			}
		}
		p.first = false
		batch, ack, err := p.round(ctx)
		if err != nil || len(batch.Messages) > 0 {
			return batch, ack, err
		}
		p.resume = false // nothing was left unfinished
	}
}

func (p *poller) round(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	batch := sdk.SourceBatch{Schema: sdk.SchemaJSON}
	if p.cfg.PayloadColumn != "" && p.cfg.PayloadFormat != "json_direct" && p.cfg.PayloadFormat != "jsonb" && p.cfg.PayloadFormat != "jsonb_direct" {
		batch.Schema = sdk.SchemaRaw
	}
	next := maps.Clone(p.offsets)
	done := map[string][]string{} // table -> primary keys read
	for _, table := range p.cfg.Tables {
		q, args := p.query(table)
		// nil OIDs: each parameter's type is the one PostgreSQL infers (see query).
		res := p.conn.PgConn().ExecParams(ctx, q, args, nil, nil, nil).Read()
		if res.Err != nil {
			return sdk.SourceBatch{}, nil, fmt.Errorf("poll %s: %w", table, res.Err)
		}
		for _, row := range res.Rows {
			m, keys, err := p.message(table, res.FieldDescriptions, row)
			if err != nil {
				return sdk.SourceBatch{}, nil, sdk.Permanent(fmt.Errorf("poll %s: %w", table, err))
			}
			batch.Messages = append(batch.Messages, m)
			if keys.hasTrack {
				next[table] = keys.track
			}
			if keys.hasPK {
				done[table] = append(done[table], keys.pk)
			}
		}
	}
	batch.State, _ = json.Marshal(pollState{TrackingOffsets: next})
	ack := func(ctx context.Context, err error) error {
		if err != nil {
			return nil //nolint:nilerr // not delivered: the same rows are read again
		}
		p.offsets = next
		p.resume = false
		return p.finish(ctx, done)
	}
	return batch, ack, nil
}

// finish deletes or marks the rows Iggy now holds (delete_after_read, processed_column).
func (p *poller) finish(ctx context.Context, done map[string][]string) error {
	if !p.cfg.DeleteAfterRead && p.cfg.ProcessedColumn == "" {
		return nil
	}
	pkCol := p.cfg.PrimaryKeyColumn
	if pkCol == "" {
		pkCol = p.cfg.TrackingColumn
	}
	var errs []error
	for table, pks := range done {
		schema, name := tableRef(table)
		// The keys go as one array parameter of no declared type, which PostgreSQL makes
		// an array of the key column's type (as query's tracking value).
		where := " WHERE " + pgx.Identifier{pkCol}.Sanitize() + " = ANY($1)"
		q := "DELETE FROM " + pgx.Identifier{schema, name}.Sanitize() + where
		if !p.cfg.DeleteAfterRead {
			q = "UPDATE " + pgx.Identifier{schema, name}.Sanitize() + " SET " + pgx.Identifier{p.cfg.ProcessedColumn}.Sanitize() + " = TRUE" + where
		}
		res := p.conn.PgConn().ExecParams(ctx, q, [][]byte{arrayLiteral(pks)}, nil, nil, nil).Read()
		if res.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", table, res.Err))
		}
	}
	return errors.Join(errs...)
}

// arrayLiteral writes vals (text values, none NULL) as an array's text input: each
// element in double quotes, with a backslash before every backslash and double quote.
func arrayLiteral(vals []string) []byte {
	b := []byte{'{'}
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		for j := 0; j < len(v); j++ {
			if v[j] == '\\' || v[j] == '"' {
				b = append(b, '\\')
			}
			b = append(b, v[j])
		}
		b = append(b, '"')
	}
	return append(b, '}')
}

// rowKeys are a row's tracking value and primary key, each as text, when the row has it
// (not NULL): the empty string is a value like any other.
type rowKeys struct {
	track, pk       string
	hasTrack, hasPK bool
}

// message renders one row as upstream does: the record envelope with operation_type
// SELECT (with include_metadata = false the row goes under data.data), or the payload
// column alone.
func (p *poller) message(table string, fields []pgconn.FieldDescription, row [][]byte) (sdk.ProducedMessage, rowKeys, error) {
	var keys rowKeys
	pkCol := p.cfg.PrimaryKeyColumn
	if pkCol == "" {
		pkCol = p.cfg.TrackingColumn
	}
	data := []byte{'{'}
	var payload []byte
	n := 0
	for i, f := range fields {
		name := f.Name
		if i >= len(row) {
			break
		}
		if name == p.cfg.TrackingColumn && row[i] != nil {
			keys.track, keys.hasTrack = string(row[i]), true
		}
		if name == pkCol && row[i] != nil {
			keys.pk, keys.hasPK = string(row[i]), true
		}
		if p.cfg.PayloadColumn != "" && name == p.cfg.PayloadColumn {
			var err error
			if payload, err = p.payload(f.DataTypeOID, row[i]); err != nil {
				return sdk.ProducedMessage{}, keys, fmt.Errorf("column %s: %w", name, err)
			}
			continue
		}
		if p.cfg.SnakeCaseColumns {
			name = snakeCase(name)
		}
		if n > 0 {
			data = append(data, ',')
		}
		n++
		data = appendJSONString(data, name)
		data = append(data, ':')
		if row[i] == nil {
			data = append(data, "null"...)
			continue
		}
		v, err := jsonValue(p.types, f.DataTypeOID, row[i])
		if err != nil {
			return sdk.ProducedMessage{}, keys, fmt.Errorf("column %s: %w", name, err)
		}
		data = append(data, v...)
	}
	data = append(data, '}')
	if payload == nil {
		if !p.cfg.IncludeMetadata {
			data = append(append([]byte(`{"data":`), data...), '}')
		}
		c := change{table: table, op: "SELECT", commitTime: time.Now(), data: data}
		m, err := c.message()
		return sdk.ProducedMessage{Payload: m.Payload}, keys, err
	}
	return sdk.ProducedMessage{Payload: payload}, keys, nil
}

// payload extracts payload_column as payload_format says: bytea (or raw), text, or
// json_direct (the JSON document).
func (p *poller) payload(oid uint32, v []byte) ([]byte, error) {
	if v == nil {
		if p.cfg.PayloadFormat == "json_direct" || p.cfg.PayloadFormat == "jsonb" || p.cfg.PayloadFormat == "jsonb_direct" {
			return []byte("null"), nil
		}
		return []byte{}, nil
	}
	switch p.cfg.PayloadFormat {
	case "text":
		return v, nil
	case "json_direct", "jsonb", "jsonb_direct":
		return jsonValue(p.types, oid, v)
	}
	if oid == pgtype.ByteaOID {
		return byteaText(string(v))
	}
	return v, nil
}
