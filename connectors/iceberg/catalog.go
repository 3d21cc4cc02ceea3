package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers the s3:// scheme
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/ferryio/ferry/sdk"
)

// warehouseLocation is warehouse as a location iceberg-go's file IO opens: a local path
// made absolute and a file:// URL (fs), a bucket name made s3://bucket (s3).
func warehouseLocation(c *config) (string, error) {
	w := c.Warehouse
	switch c.StoreClass {
	case storeS3:
		if strings.HasPrefix(w, "s3://") || strings.HasPrefix(w, "s3a://") {
			return w, nil
		}
		if strings.Contains(w, "://") {
			return "", sdk.FieldErr("warehouse", "%q: store_class s3 wants a bucket or an s3:// URL", w)
		}
		return "s3://" + strings.Trim(w, "/"), nil
	default:
		if u, err := url.Parse(w); err == nil && u.Scheme == "file" {
			return w, nil
		}
		if strings.Contains(w, "://") {
			return "", sdk.FieldErr("warehouse", "%q: store_class fs wants a path or a file:// URL", w)
		}
		abs, err := filepath.Abs(w)
		if err != nil {
			return "", sdk.FieldErr("warehouse", "%q: %v", w, err)
		}
		return "file://" + abs, nil
	}
}

// ioProps are the storage properties of the catalog and its tables' file IO.
func ioProps(c *config) iceberg.Properties {
	p := iceberg.Properties{}
	if c.StoreClass != storeS3 {
		return p
	}
	p[icebergio.S3Region] = c.StoreRegion
	if c.StoreURL != "" {
		p[icebergio.S3EndpointURL] = c.StoreURL
		p["s3.force-virtual-addressing"] = "false"
	}
	if c.StoreAccessKeyID != "" {
		p[icebergio.S3AccessKeyID] = c.StoreAccessKeyID
		p[icebergio.S3SecretAccessKey] = c.StoreSecretAccessKey.Reveal()
	}
	return p
}

// openCatalog connects to the configured catalog. The SQL catalog creates its two tables
// (iceberg_tables, iceberg_namespace_properties) when missing, as pyiceberg's does.
func openCatalog(ctx context.Context, c *config, warehouse string) (catalog.Catalog, func() error, error) {
	props := ioProps(c)
	props["warehouse"] = warehouse
	switch c.CatalogType {
	case catalogSQL:
		db, err := sql.Open("pgx", c.URI)
		if err != nil {
			return nil, nil, sdk.Permanent(fmt.Errorf("plugin_config.uri: %w", err))
		}
		if err := db.PingContext(ctx); err != nil {
			_ = db.Close()
			return nil, nil, fmt.Errorf("the SQL catalog at %s: %w", redactURL(c.URI), err)
		}
		cat, err := sqlcat.NewCatalog(c.CatalogName, db, sqlcat.Postgres, props)
		if err != nil {
			_ = db.Close()
			return nil, nil, fmt.Errorf("the SQL catalog at %s: %w", redactURL(c.URI), err)
		}
		return cat, db.Close, nil
	default:
		opts := []rest.Option{rest.WithAdditionalProps(props)}
		if c.Warehouse != "" {
			opts = append(opts, rest.WithWarehouseLocation(c.Warehouse))
		}
		cat, err := rest.NewCatalog(ctx, c.CatalogName, c.URI, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("the REST catalog at %s: %w", redactURL(c.URI), err)
		}
		return cat, func() error { return nil }, nil
	}
}

// loadOrCreate loads a table (its schema evolved to the declared one: evolve), creating
// it (and its namespace) from the declared schema when it is missing and a schema is
// declared.
func loadOrCreate(ctx context.Context, cat catalog.Catalog, c *config, ident table.Identifier, log *slog.Logger) (*table.Table, error) {
	name := strings.Join(ident, ".")
	tbl, err := cat.LoadTable(ctx, ident)
	if err == nil {
		return evolve(ctx, c, name, tbl, log)
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("load table %s: %w", name, err)
	}
	if len(c.Schema) == 0 {
		return nil, sdk.Permanent(fmt.Errorf("table %s does not exist and plugin_config.schema declares no columns to create it with", name))
	}
	ns := catalog.NamespaceFromIdent(ident)
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("create namespace %s: %w", strings.Join(ns, "."), err)
	}
	sc := declaredSchema(c)
	spec, err := partitionSpec(c, sc)
	if err != nil {
		return nil, sdk.Permanent(err)
	}
	tbl, err = cat.CreateTable(ctx, ident, sc, catalog.WithPartitionSpec(&spec))
	if errors.Is(err, catalog.ErrTableAlreadyExists) { // another instance created it first
		return cat.LoadTable(ctx, ident)
	}
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", name, err)
	}
	return tbl, nil
}

// redactURL drops a URL's password, for errors and logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(the uri)"
	}
	return u.Redacted()
}

// evolve brings an existing table's schema up to the declared one in the only way that
// is safe for the rows it holds and the readers that know it: a declared column the table
// lacks is added as an optional column (old rows read it as null). Any other difference
// (a declared column's type or requiredness not the table's, a required column to add)
// is refused, naming the column and the change; a table column the declaration lacks is
// kept (never dropped). Another instance adding the same column first makes the commit
// conflict; the retry of Open reloads the table and finds nothing left to add.
func evolve(ctx context.Context, c *config, name string, tbl *table.Table, log *slog.Logger) (*table.Table, error) {
	var add []column
	for _, col := range c.Schema {
		want := columnTypes[strings.ToLower(col.Type)]
		f, ok := tbl.Schema().FindFieldByName(col.Name)
		switch {
		case !ok && col.Required:
			return nil, sdk.Permanent(fmt.Errorf("table %s: plugin_config.schema declares column %q (%s, required), which the table lacks: "+
				"adding a required column to a table that has rows is refused (declare it optional)", name, col.Name, want))
		case !ok:
			add = append(add, col)
		case !f.Type.Equals(want):
			return nil, sdk.Permanent(fmt.Errorf("table %s: column %q is %s in the table, plugin_config.schema declares %s: "+
				"changing a column's type is refused (the sink only adds optional columns)", name, col.Name, f.Type, want))
		case f.Required != col.Required:
			return nil, sdk.Permanent(fmt.Errorf("table %s: column %q is %s in the table, plugin_config.schema declares it %s: "+
				"changing whether a column is required is refused (the sink only adds optional columns)", name, col.Name, requiredWord(f.Required), requiredWord(col.Required)))
		}
	}
	if len(add) == 0 {
		return tbl, nil
	}
	tx := tbl.NewTransaction()
	us := tx.UpdateSchema(true, false)
	for _, col := range add {
		us.AddColumn([]string{col.Name}, columnTypes[strings.ToLower(col.Type)], "", false, nil)
	}
	if err := us.Commit(); err != nil {
		return nil, sdk.Permanent(fmt.Errorf("table %s: add optional columns: %w", name, err))
	}
	evolved, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("table %s: commit the added columns: %w", name, err)
	}
	for _, col := range add {
		log.Info("iceberg sink: optional column added to the table", "table", name, "column", col.Name, "type", col.Type)
	}
	return evolved, nil
}

func requiredWord(required bool) string {
	if required {
		return "required"
	}
	return "optional"
}
