package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Sink)(nil)

// Preflight implements sdk.Preflighter (`ferry check --connect`): PostgreSQL answers with
// connection_string's login; the target table exists with every column this configuration
// writes, each of a type the sink writes, or auto_create_table is on and the role may
// create it; the role may INSERT there (COPY FROM needs INSERT; upsert also UPDATE); with
// exactly_once the offsets table exists with the rights Open and each batch use, or the
// role may create it. Each problem names its plugin_config key and the SQL that fixes it.
// Nothing is created: the checks read the catalogs and has_*_privilege.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	p := &Sink{cfg: cfg, target: pgx.Identifier{cfg.TargetTable}, offsets: pgx.Identifier{cfg.OffsetsTable}.Sanitize()}
	p.cols = p.columns()
	cc, err := pgx.ParseConfig(cfg.ConnectionString.Reveal())
	if err != nil {
		return []error{sdk.FieldErr("connection_string", "cannot be parsed (not shown)")}
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return []error{sdk.FieldErr("connection_string", "cannot connect to PostgreSQL at %s:%d (database %q, user %q): %v; fix: start the server, or correct the host, port, database, user or password",
			cc.Host, cc.Port, cc.Database, cc.User, redactErr(err, cfg.ConnectionString.Reveal()))}
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var errs []error
	var schema *string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return []error{fmt.Errorf("read current_schema(): %w", err)}
	}
	errs = append(errs, p.preflightTarget(ctx, conn, schema)...)
	if cfg.ExactlyOnce {
		errs = append(errs, p.preflightOffsets(ctx, conn, schema)...)
	}
	return errs
}

// preflightTarget checks the target table: its columns and types, or that it may be
// created; and the rights to write it.
func (s *Sink) preflightTarget(ctx context.Context, conn *pgx.Conn, schema *string) []error {
	name := s.target.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1::text) IS NOT NULL", name).Scan(&exists); err != nil {
		return []error{fmt.Errorf("look up table %s: %w", s.cfg.TargetTable, err)}
	}
	if !exists {
		if !s.cfg.AutoCreateTable {
			return []error{sdk.FieldErr("target_table", "table %s does not exist and auto_create_table is false; fix: set auto_create_table = true, or run %s;",
				name, strings.ReplaceAll(s.createTableSQL(), "\n\t", " "))}
		}
		if err := mayCreate(ctx, conn, schema, "target_table", "table "+name); err != nil {
			return []error{err}
		}
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid::regtype::text FROM pg_attribute a
	WHERE a.attrelid = to_regclass($1::text) AND a.attnum > 0 AND NOT a.attisdropped`, name)
	if err != nil {
		return []error{fmt.Errorf("read the columns of %s: %w", name, err)}
	}
	have := map[string]string{}
	var col, typ string
	if _, err := pgx.ForEachRow(rows, []any{&col, &typ}, func() error { have[col] = typ; return nil }); err != nil {
		return []error{fmt.Errorf("read the columns of %s: %w", name, err)}
	}
	var errs []error
	for _, want := range s.wantedColumns(ctx, conn) {
		got, ok := have[want.name]
		ident := pgx.Identifier{want.name}.Sanitize()
		switch {
		case !ok:
			errs = append(errs, sdk.FieldErr(want.key, "table %s has no column %s (%s); fix: ALTER TABLE %s ADD COLUMN %s %s;%s",
				name, ident, want.why, name, ident, want.types[0], want.instead))
		case !slices.Contains(want.types, got):
			errs = append(errs, sdk.FieldErr(want.key, "column %s of table %s is %s; the sink writes %s there; fix: ALTER TABLE %s ALTER COLUMN %s TYPE %s USING %s::%s;%s",
				ident, name, got, strings.Join(want.types, " or "), name, ident, want.types[0], ident, want.types[0], want.instead))
		}
	}
	rights := []string{"INSERT"}
	if s.cfg.WriteMode == modeUpsert {
		rights = append(rights, "UPDATE")
	}
	if s.cfg.ExactlyOnce {
		rights = append(rights, "SELECT") // Open compares the offsets rows with the table's rows
	}
	if err := mayDo(ctx, conn, "target_table", name, rights); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// wanted is one column the sink writes, with the types it writes there (the first is
// what auto_create_table creates) and the key a problem with it names.
type wanted struct {
	name, key, why string
	types          []string // as regtype prints them
	instead        string   // another fix, or ""
}

// wantedColumns lists the target's columns this configuration writes. A mapped column's
// type is its declared type as PostgreSQL names it (unresolvable: as written).
func (s *Sink) wantedColumns(ctx context.Context, conn *pgx.Conn) []wanted {
	const meta = "include_metadata"
	out := []wanted{{name: "id", key: "target_table", why: "the message id", types: []string{"numeric"}}}
	if s.cfg.IncludeMetadata {
		off := " or set include_metadata = false"
		out = append(out,
			wanted{"iggy_offset", meta, "include_metadata", []string{"bigint", "numeric"}, off},
			wanted{"iggy_timestamp", meta, "include_metadata", []string{"timestamp with time zone", "timestamp without time zone"}, off},
			wanted{"iggy_stream", meta, "include_metadata", []string{"text", "character varying"}, off},
			wanted{"iggy_topic", meta, "include_metadata", []string{"text", "character varying"}, off},
			wanted{"iggy_partition_id", meta, "include_metadata", []string{"integer", "bigint"}, off})
	}
	if s.cfg.IncludeChecksum {
		out = append(out, wanted{"iggy_checksum", "include_checksum", "include_checksum", []string{"bigint", "numeric"}, " or set include_checksum = false"})
	}
	if s.cfg.IncludeOriginTimestamp {
		out = append(out, wanted{"iggy_origin_timestamp", "include_origin_timestamp", "include_origin_timestamp",
			[]string{"timestamp with time zone", "timestamp without time zone"}, " or set include_origin_timestamp = false"})
	}
	payload := map[payloadFormat][]string{formatBytea: {"bytea"}, formatJSON: {"jsonb", "json"}, formatText: {"text", "character varying"}}[s.cfg.PayloadFormat]
	out = append(out, wanted{"payload", "payload_format", "payload_format = " + string(s.cfg.PayloadFormat), payload, " or set payload_format to the column's type"})
	for i, c := range s.cfg.Columns {
		typ := c.Type
		var resolved string
		if err := conn.QueryRow(ctx, "SELECT coalesce(to_regtype($1::text)::text, '')", c.Type).Scan(&resolved); err == nil && resolved != "" {
			typ = resolved
		}
		out = append(out, wanted{c.Name, fmt.Sprintf("columns[%d].type", i), fmt.Sprintf("columns[%d]", i), []string{typ}, fmt.Sprintf(" or set columns[%d].type to the column's type", i)})
	}
	return out
}

// preflightOffsets checks the offsets table: the rights Open and each batch use on it, or
// that it may be created.
func (s *Sink) preflightOffsets(ctx context.Context, conn *pgx.Conn, schema *string) []error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1::text) IS NOT NULL", s.offsets).Scan(&exists); err != nil {
		return []error{fmt.Errorf("look up table %s: %w", s.cfg.OffsetsTable, err)}
	}
	if !exists {
		if err := mayCreate(ctx, conn, schema, "offsets_table", "the offsets table "+s.offsets); err != nil {
			return []error{err}
		}
		return nil
	}
	if err := mayDo(ctx, conn, "offsets_table", s.offsets, []string{"SELECT", "INSERT", "UPDATE"}); err != nil {
		return []error{err}
	}
	return nil
}

// mayCreate is nil when the role may create what in the current schema (the one an
// unqualified name is created in), else an error for key with the GRANT that fixes it.
func mayCreate(ctx context.Context, conn *pgx.Conn, schema *string, key, what string) error {
	if schema == nil {
		return sdk.FieldErr(key, "%s does not exist and cannot be created: no schema of the search_path exists; fix: CREATE SCHEMA, or set search_path for the role", what)
	}
	var ok bool
	var role string
	if err := conn.QueryRow(ctx, "SELECT has_schema_privilege($1::text, 'CREATE'), current_user", *schema).Scan(&ok, &role); err != nil {
		return fmt.Errorf("check CREATE on schema %s: %w", *schema, err)
	}
	if !ok {
		return sdk.FieldErr(key, "%s does not exist and role %s may not create it in schema %s; fix: GRANT CREATE ON SCHEMA %s TO %s;",
			what, pgx.Identifier{role}.Sanitize(), pgx.Identifier{*schema}.Sanitize(), pgx.Identifier{*schema}.Sanitize(), pgx.Identifier{role}.Sanitize())
	}
	return nil
}

// mayDo is nil when the role holds every one of rights on table, else an error for key
// with the GRANT that fixes it.
func mayDo(ctx context.Context, conn *pgx.Conn, key, table string, rights []string) error {
	var missing []string
	var role string
	for _, r := range rights {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT has_table_privilege($1::text, $2::text), current_user", table, r).Scan(&ok, &role); err != nil {
			return fmt.Errorf("check %s on %s: %w", r, table, err)
		}
		if !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return sdk.FieldErr(key, "role %s lacks %s on table %s; fix: GRANT %s ON %s TO %s;",
		pgx.Identifier{role}.Sanitize(), strings.Join(missing, ", "), table, strings.Join(missing, ", "), table, pgx.Identifier{role}.Sanitize())
}

// redactErr is err's text with the connection string, and its password, left out.
func redactErr(err error, dsn string) string {
	msg := err.Error()
	if dsn != "" {
		msg = strings.ReplaceAll(msg, dsn, "(connection_string)")
	}
	if cc, perr := pgx.ParseConfig(dsn); perr == nil && cc.Password != "" {
		msg = strings.ReplaceAll(msg, cc.Password, sdk.RedactedText)
	}
	return msg
}
