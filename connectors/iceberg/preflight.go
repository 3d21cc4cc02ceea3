package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"

	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Sink)(nil)

// Preflight implements sdk.Preflighter (`ferry check --connect`): the catalog answers (the
// SQL catalog's PostgreSQL, or the REST catalog); each table of tables exists and takes
// this configuration's rows (the checks Open makes of it: include_metadata's columns, the
// column types), or it is missing and schema declares its columns, so Open creates it (and
// its namespace); a local warehouse is writable. The SQL catalog's own two tables, which
// Open creates when missing, are looked up first and not created: missing, they need the
// login's CREATE right on the schema. Each problem names its plugin_config key. Nothing is
// created.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	warehouse, err := warehouseLocation(&cfg)
	if err != nil {
		return []error{err}
	}
	var errs []error
	if cfg.StoreClass != storeS3 {
		if err := localWritable(warehouse); err != nil {
			errs = append(errs, err)
		}
	}
	props := ioProps(&cfg)
	props["warehouse"] = warehouse
	var cat catalog.Catalog
	switch cfg.CatalogType {
	case catalogSQL:
		db, err := sql.Open("pgx", cfg.URI)
		if err != nil {
			return append(errs, sdk.FieldErr("uri", "cannot be parsed as a PostgreSQL URL (not shown)"))
		}
		defer func() { _ = db.Close() }()
		if err := db.PingContext(ctx); err != nil {
			return append(errs, sdk.FieldErr("uri", "cannot connect to the SQL catalog at %s: %v; fix: start PostgreSQL, or correct uri", redactURL(cfg.URI), redactErr(err, cfg.URI)))
		}
		ready, err := catalogTables(ctx, db)
		if err != nil {
			return append(errs, err)
		}
		if !ready {
			// No catalog yet, so no table: Open creates both, then every table from schema.
			return compact(append(errs, missingTables(&cfg, "the SQL catalog holds none yet")...))
		}
		props["init_catalog_tables"] = "false" // they exist: nothing to create
		c, err := sqlcat.NewCatalog(cfg.CatalogName, db, sqlcat.Postgres, props)
		if err != nil {
			return append(errs, sdk.FieldErr("uri", "the SQL catalog at %s: %v", redactURL(cfg.URI), err))
		}
		cat = c
	default:
		opts := []rest.Option{rest.WithAdditionalProps(props)}
		if cfg.Warehouse != "" {
			opts = append(opts, rest.WithWarehouseLocation(cfg.Warehouse))
		}
		c, err := rest.NewCatalog(ctx, cfg.CatalogName, cfg.URI, opts...)
		if err != nil {
			return append(errs, sdk.FieldErr("uri", "the REST catalog at %s: %v; fix: start it, or correct uri (and its credentials)", redactURL(cfg.URI), err))
		}
		cat = c
	}
	probe := &Sink{cfg: cfg}
	for i, name := range cfg.Tables {
		ident, _ := parseIdent(name) // the config's check parsed it
		tbl, err := cat.LoadTable(ctx, ident)
		switch {
		case errors.Is(err, catalog.ErrNoSuchTable):
			errs = append(errs, missingTables(&cfg, "")[i:i+1]...)
		case err != nil:
			errs = append(errs, sdk.FieldErr("tables", "load table %s: %v", name, err))
		default:
			if _, err := probe.newTable(name, ident, tbl); err != nil {
				errs = append(errs, sdk.FieldErr("tables", "table %s: %v; fix: alter the table, or correct schema and include_metadata", name, err))
			}
		}
	}
	return compact(errs)
}

// catalogTables says whether the SQL catalog's two tables exist; when they do not, an
// error unless the login may create them where Open would (the current schema).
func catalogTables(ctx context.Context, db *sql.DB) (bool, error) {
	var tables, namespaces bool
	var schema sql.NullString
	var mayCreate sql.NullBool
	var role string
	err := db.QueryRowContext(ctx, `SELECT to_regclass('iceberg_tables') IS NOT NULL, to_regclass('iceberg_namespace_properties') IS NOT NULL,
	current_schema(), CASE WHEN current_schema() IS NULL THEN NULL ELSE has_schema_privilege(current_schema(), 'CREATE') END, current_user`).
		Scan(&tables, &namespaces, &schema, &mayCreate, &role)
	if err != nil {
		return false, fmt.Errorf("look up the SQL catalog's tables: %w", err)
	}
	if tables && namespaces {
		return true, nil
	}
	switch {
	case !schema.Valid:
		return false, sdk.FieldErr("uri", "the SQL catalog's tables iceberg_tables and iceberg_namespace_properties do not exist and cannot be created: no schema of the search_path exists; fix: CREATE SCHEMA, or set search_path for role %s", role)
	case !mayCreate.Bool:
		return false, sdk.FieldErr("uri", "the SQL catalog's tables iceberg_tables and iceberg_namespace_properties do not exist and role %s may not create them in schema %s; fix: GRANT CREATE ON SCHEMA %s TO %s;",
			role, schema.String, schema.String, role)
	}
	return false, nil
}

// missingTables is, for each table of tables in order, the problem of it missing: nil
// when schema declares the columns Open creates it with. why, when set, says why it is
// missing.
func missingTables(c *config, why string) []error {
	out := make([]error, len(c.Tables))
	if len(c.Schema) > 0 {
		if _, err := partitionSpec(c, declaredSchema(c)); err != nil && len(out) > 0 {
			out[0] = err // Open could create none of them
		}
		return out
	}
	if why != "" {
		why = " (" + why + ")"
	}
	for i, name := range c.Tables {
		out[i] = sdk.FieldErr("tables", "table %s does not exist%s and plugin_config.schema declares no columns to create it with; fix: declare schema, or create the table", name, why)
	}
	return out
}

// compact drops the nil entries of errs.
func compact(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// localWritable checks a file:// warehouse: the directory, or the nearest one above it
// that exists (Open's writer creates the rest), must be writable (access(2)).
func localWritable(warehouse string) error {
	u, err := url.Parse(warehouse)
	if err != nil || u.Path == "" {
		return sdk.FieldErr("warehouse", "%q is not a local path", warehouse)
	}
	dir := u.Path
	for {
		st, err := os.Stat(dir)
		if err == nil && !st.IsDir() {
			return sdk.FieldErr("warehouse", "%s is not a directory (in the path of %s); fix: choose another warehouse", dir, u.Path)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) || filepath.Dir(dir) == dir {
			return sdk.FieldErr("warehouse", "%s: %v", dir, err)
		}
		dir = filepath.Dir(dir)
	}
	if err := syscall.Access(dir, 2|1 /* W_OK|X_OK */); err != nil {
		return sdk.FieldErr("warehouse", "%s is not writable: %v; fix: make it writable for the user ferry runs as, or choose another warehouse", dir, err)
	}
	return nil
}

// redactErr is err's text with the URI, and its password, left out.
func redactErr(err error, uri string) string {
	msg := err.Error()
	if uri == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, uri, redactURL(uri))
	if u, perr := url.Parse(uri); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, sdk.RedactedText)
		}
	}
	return msg
}
