package source

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connectReplication opens a logical replication connection (replication=database). The
// session time zone is UTC so timestamptz values arrive as UTC text.
func connectReplication(ctx context.Context, connString string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("connection_string: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["timezone"] = "UTC"
	cfg.RuntimeParams["application_name"] = "ferry-postgres-source"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("replication connection: %w", err)
	}
	return conn, nil
}

// escapeLiteral doubles the quotes of a string put inside '…'.
func escapeLiteral(s string) string { return strings.ReplaceAll(s, "'", "''") }

// SetupError is a database setting or right CDC needs and lacks, with the SQL that fixes it.
type SetupError struct {
	Problem string
	Fix     string
}

func (e *SetupError) Error() string { return e.Problem + "; fix: " + e.Fix }

// checkSetup verifies what CDC needs on the server: wal_level = logical, the REPLICATION
// right (or superuser) and, for each table, that it exists and has a replica identity
// that sends old keys. Every problem is returned, each with its fix.
func checkSetup(ctx context.Context, conn *pgx.Conn, cfg *config) []error {
	var errs []error
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return []error{fmt.Errorf("read wal_level: %w", err)}
	}
	if level != "logical" {
		errs = append(errs, &SetupError{Problem: fmt.Sprintf("wal_level is %s; CDC needs logical", level),
			Fix: "ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL"})
	}
	var repl, super bool
	var role string
	if err := conn.QueryRow(ctx, "SELECT rolname, rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&role, &repl, &super); err != nil {
		return append(errs, fmt.Errorf("read the role's rights: %w", err))
	}
	if !repl && !super {
		errs = append(errs, &SetupError{Problem: fmt.Sprintf("role %s has no REPLICATION right", role),
			Fix: fmt.Sprintf("ALTER ROLE %s WITH REPLICATION;", pgx.Identifier{role}.Sanitize())})
	}
	for _, t := range cfg.Tables {
		schema, name := tableRef(t)
		var ident string
		err := conn.QueryRow(ctx, `SELECT c.relreplident::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r','p')`, schema, name).Scan(&ident)
		if errors.Is(err, pgx.ErrNoRows) {
			errs = append(errs, &SetupError{Problem: fmt.Sprintf("tables: table %s.%s does not exist", schema, name),
				Fix: "create it, or remove it from plugin_config.tables"})
			continue
		}
		if err != nil {
			return append(errs, fmt.Errorf("read the replica identity of %s.%s: %w", schema, name, err))
		}
		q := pgx.Identifier{schema, name}.Sanitize()
		switch ident {
		case "n":
			errs = append(errs, &SetupError{Problem: fmt.Sprintf("table %s has REPLICA IDENTITY NOTHING: its updates and deletes cannot be captured", q),
				Fix: fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY DEFAULT; (with a primary key) or REPLICA IDENTITY FULL;", q)})
		case "d":
			var pk bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = $1::regclass AND indisprimary)`, q).Scan(&pk); err != nil {
				return append(errs, fmt.Errorf("read the primary key of %s: %w", q, err))
			}
			if !pk {
				errs = append(errs, &SetupError{Problem: fmt.Sprintf("table %s has no primary key: with REPLICA IDENTITY DEFAULT its updates and deletes fail", q),
					Fix: fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (…); or ALTER TABLE %s REPLICA IDENTITY FULL;", q, q)})
			}
		}
	}
	return errs
}

// primaryKeys reads the primary key columns of the configured tables, in key order.
func primaryKeys(ctx context.Context, conn *pgx.Conn, tables []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, t := range tables {
		schema, name := tableRef(t)
		rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_index i
			JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
			WHERE n.nspname = $1 AND c.relname = $2 AND i.indisprimary ORDER BY k.ord`, schema, name)
		if err != nil {
			return nil, fmt.Errorf("read the primary key of %s.%s: %w", schema, name, err)
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("read the primary key of %s.%s: %w", schema, name, err)
		}
		out[schema+"."+name] = cols
	}
	return out, nil
}

// ensurePublication creates the publication for the tables when it does not exist; an
// existing one is used as it is.
func ensurePublication(ctx context.Context, conn *pgx.Conn, cfg *config) (created bool, err error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", cfg.Publication).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up publication %s: %w", cfg.Publication, err)
	}
	if exists {
		return false, nil
	}
	names := make([]string, len(cfg.Tables))
	for i, t := range cfg.Tables {
		schema, name := tableRef(t)
		names[i] = pgx.Identifier{schema, name}.Sanitize()
	}
	// Every operation is published, whatever capture_operations says, so a change's index
	// inside its transaction does not depend on the configuration.
	q := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert, update, delete, truncate')",
		pgx.Identifier{cfg.Publication}.Sanitize(), strings.Join(names, ", "))
	if _, err := conn.Exec(ctx, q); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42710" { // created meanwhile by another instance
			return false, nil
		}
		return false, fmt.Errorf("create publication %s: %w", cfg.Publication, err)
	}
	return true, nil
}

// ensureSlot creates the logical slot with pgoutput when it does not exist, and returns
// its confirmed flush position. A slot of another plugin (upstream's test_decoding) is an
// error naming the fix.
func ensureSlot(ctx context.Context, conn *pgx.Conn, cfg *config) (confirmed uint64, created bool, err error) {
	var plugin, slotType string
	var flush *string
	err = conn.QueryRow(ctx, "SELECT plugin, slot_type, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
		cfg.ReplicationSlot).Scan(&plugin, &slotType, &flush)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var lsn string
		if err := conn.QueryRow(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", cfg.ReplicationSlot).Scan(&lsn); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42710" {
				return ensureSlot(ctx, conn, cfg)
			}
			return 0, false, fmt.Errorf("create replication slot %s: %w", cfg.ReplicationSlot, err)
		}
		l, err := pglogrepl.ParseLSN(lsn)
		return uint64(l), true, err
	case err != nil:
		return 0, false, fmt.Errorf("look up replication slot %s: %w", cfg.ReplicationSlot, err)
	}
	if slotType != "logical" || plugin != "pgoutput" {
		return 0, false, &SetupError{
			Problem: fmt.Sprintf("replication_slot: slot %s exists with plugin %q (%s); this source reads pgoutput", cfg.ReplicationSlot, plugin, slotType),
			Fix:     fmt.Sprintf("SELECT pg_drop_replication_slot('%s'); or set replication_slot to another name", escapeLiteral(cfg.ReplicationSlot))}
	}
	if flush == nil {
		return 0, false, nil
	}
	l, err := pglogrepl.ParseLSN(*flush)
	return uint64(l), false, err
}
