package iceberg

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:iceberg".
const Name = "iceberg"

// config is the sink's plugin_config. The keys up to store_class are upstream's
// iceberg_sink's; the rest are Ferry's.
type config struct {
	Tables               []string
	CatalogType          catalogType
	Warehouse            string
	URI                  string
	DynamicRouting       bool
	DynamicRouteField    string
	StoreURL             string
	StoreAccessKeyID     string
	StoreSecretAccessKey sdk.Secret
	StoreRegion          string
	StoreClass           storeClass

	CatalogName     string
	Schema          []column
	PartitionBy     []string
	IncludeMetadata bool
	FlushInterval   time.Duration
	MaxBufferedRows int
	CommitAttempts  int
}

// column is one [[plugin_config.schema]] entry: a column of a table the sink creates.
type column struct {
	Name     string
	Type     string
	Required bool
}

type (
	catalogType string
	storeClass  string
)

const (
	catalogREST catalogType = "rest"
	catalogSQL  catalogType = "sql"

	storeS3 storeClass = "s3"
	storeFS storeClass = "fs"
)

// Config declares plugin_config.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Strings("tables", &c.Tables).Doc("the tables written, each namespace.table; with dynamic_routing, the tables messages may name")
	sdk.Enum(f, "catalog_type", &c.CatalogType, sdk.Choice(catalogREST), sdk.Choice(catalogSQL)).Required().
		Doc("rest (an Iceberg REST catalog at uri) or sql (a PostgreSQL database at uri)")
	f.String("warehouse", &c.Warehouse).Required().NonEmpty().
		Doc("where table data goes: a path or file:// URL (store_class fs), a bucket or s3://bucket/prefix (s3); the REST catalog's warehouse name")
	f.String("uri", &c.URI).Required().NonEmpty().Doc("the catalog: the REST catalog's URL, or the PostgreSQL URL of the SQL catalog")
	f.Bool("dynamic_routing", &c.DynamicRouting).Doc("route each message to the table its dynamic_route_field names")
	f.String("dynamic_route_field", &c.DynamicRouteField).Doc("the JSON payload field naming a message's table (namespace.table)")
	f.URL("store_url", &c.StoreURL, "http", "https").Doc("the S3-compatible endpoint (store_class s3); default AWS")
	f.String("store_access_key_id", &c.StoreAccessKeyID).Doc("S3 access key (with store_secret_access_key); default the AWS chain")
	f.Secret("store_secret_access_key", &c.StoreSecretAccessKey).Doc("S3 secret key; never logged")
	f.String("store_region", &c.StoreRegion).Default("us-east-1").Doc("the S3 region")
	sdk.Enum(f, "store_class", &c.StoreClass, sdk.Choice(storeS3), sdk.Choice(storeFS, "file", "local")).Default(storeFS).
		Doc("s3 (S3-compatible storage) or fs (the local filesystem)")

	f.String("catalog_name", &c.CatalogName).Default("ferry").NonEmpty().
		Doc("the SQL catalog's name (its catalog_name rows; readers such as pyiceberg's SqlCatalog use the same)")
	sdk.Tables(f, "schema", &c.Schema, func(col *column, f *sdk.Fields) {
		f.String("name", &col.Name).Required().NonEmpty().Doc("the column's name, and the JSON payload field it is filled from")
		f.String("type", &col.Type).Required().Check(func(s string) error {
			if _, ok := columnTypes[strings.ToLower(s)]; !ok {
				return fmt.Errorf("unknown type %q (want %s)", s, typeNames())
			}
			return nil
		}).Doc("string, long, int, double, float, boolean, timestamptz, timestamp, date, binary")
		f.Bool("required", &col.Required).Doc("a message without the field is rejected")
	}).Doc("[[plugin_config.schema]] name, type, required: the columns of a table created when missing")
	f.Strings("partition_by", &c.PartitionBy).Doc(`a created table's partition spec: "day(ts)", "hour(ts)", "month(ts)", "year(ts)", "identity(col)", "bucket[16](col)", "truncate[4](col)"`)
	f.Bool("include_metadata", &c.IncludeMetadata).Doc("fill the columns iggy_stream, iggy_topic, iggy_partition, iggy_offset, iggy_timestamp (added to a created table)")
	f.Duration("flush_interval", &c.FlushInterval).Default(10 * time.Second).Min(10 * time.Millisecond).
		Doc("buffered rows are written and committed at least this often")
	f.Int("max_buffered_rows", &c.MaxBufferedRows).Default(500_000).Min(1).
		Doc("rows buffered across tables and partitions before a flush starts early")
	f.Int("commit_attempts", &c.CommitAttempts).Default(10).Min(1).
		Doc("catalog commit attempts per table and flush (each on fresh metadata) before the flush fails")
	f.CommitModes("sink_controlled")
	f.Commits(sdk.CommitsWhenDurable)
	f.Check(func() error {
		if c.DynamicRouting && c.DynamicRouteField == "" {
			return sdk.FieldErr("dynamic_route_field", "required with dynamic_routing = true")
		}
		if len(c.Tables) == 0 {
			return sdk.FieldErr("tables", "must name at least one table (namespace.table)")
		}
		for i, t := range c.Tables {
			if _, err := parseIdent(t); err != nil {
				return sdk.FieldErr(fmt.Sprintf("tables[%d]", i), "%v", err)
			}
		}
		if (c.StoreAccessKeyID == "") != (c.StoreSecretAccessKey.Reveal() == "") {
			return sdk.FieldErr("store_access_key_id", "store_access_key_id and store_secret_access_key go together: set both or neither")
		}
		seen := map[string]bool{}
		for i, col := range c.Schema {
			if seen[col.Name] {
				return sdk.FieldErr(fmt.Sprintf("schema[%d].name", i), "%q is declared twice", col.Name)
			}
			if c.IncludeMetadata && metadataColumn(col.Name) {
				return sdk.FieldErr(fmt.Sprintf("schema[%d].name", i), "%q is a metadata column (include_metadata)", col.Name)
			}
			seen[col.Name] = true
		}
		for i, p := range c.PartitionBy {
			if _, _, err := parsePartition(p); err != nil {
				return sdk.FieldErr(fmt.Sprintf("partition_by[%d]", i), "%v", err)
			}
		}
		return nil
	})
})

// Spec describes plugin_config for the registry and `ferry check`.
var Spec = Config.Spec()

// parseIdent splits "namespace.table" (a namespace may have levels: "a.b.table").
func parseIdent(s string) ([]string, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%q: want namespace.table", s)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%q: an empty name between dots", s)
		}
	}
	return parts, nil
}
