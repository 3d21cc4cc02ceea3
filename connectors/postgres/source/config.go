package source

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:postgres".
const Name = "postgres"

// config is the source's plugin_config. The keys up to retry_delay are Iggy's
// postgres_source's, with its defaults; the rest are Ferry's.
type config struct {
	ConnectionString  sdk.Secret
	Mode              mode
	Tables            []string
	PollInterval      time.Duration
	BatchSize         int
	TrackingColumn    string
	InitialOffset     string
	MaxConnections    int
	CustomQuery       string
	SnakeCaseColumns  bool
	IncludeMetadata   bool
	ReplicationSlot   string
	CaptureOperations []string
	CDCBackend        string
	DeleteAfterRead   bool
	ProcessedColumn   string
	PrimaryKeyColumn  string
	PayloadColumn     string
	PayloadFormat     string
	VerboseLogging    bool
	MaxRetries        int
	RetryDelay        time.Duration
	Publication       string
	PartitionBy       partitionBy
	StatusInterval    time.Duration

	capture map[string]bool // CaptureOperations, upper-cased
}

type (
	mode        string // how changes are read
	partitionBy string // a change's partition key
)

const (
	modeCDC     mode = "cdc"     // logical replication (pgoutput)
	modePolling mode = "polling" // tables read past a tracking column

	partitionByKey   partitionBy = "key"   // the table and the row's primary key: one row's changes keep their order
	partitionByTable partitionBy = "table" // the table
	partitionByNone  partitionBy = "none"  // one key for every change: total commit order on one partition
)

// Config declares plugin_config: `ferry check` validates with it, Open and Preflight
// decode with it.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Secret("connection_string", &c.ConnectionString).Required().NonEmpty().Doc("PostgreSQL URL or key=value DSN")
	sdk.Enum(f, "mode", &c.Mode, sdk.Choice(modeCDC), sdk.Choice(modePolling)).Required().Doc("how changes are read: logical replication (pgoutput), or tables read past a tracking column")
	f.Strings("tables", &c.Tables).Required().Check(tableList).Doc(`tables captured ("name" or "schema.name")`)
	f.Duration("poll_interval", &c.PollInterval).Default(10 * time.Second).Doc("polling: time between polls")
	f.Int("batch_size", &c.BatchSize).Default(1000).Min(1).Doc("most messages per batch sent to Iggy")
	f.String("tracking_column", &c.TrackingColumn).Default("id").Doc("polling: the column rows are read in order of")
	f.String("initial_offset", &c.InitialOffset).Doc("polling: the tracking value to start after")
	f.Int("max_connections", &c.MaxConnections).Default(10).Min(0).Doc("accepted for compatibility; CDC uses two connections")
	f.String("custom_query", &c.CustomQuery).Doc("polling: query run instead of the built one")
	f.Bool("snake_case_columns", &c.SnakeCaseColumns).Default(false).Doc("convert column names to snake_case")
	f.Bool("include_metadata", &c.IncludeMetadata).Default(true).Doc("accepted; CDC messages always carry the record envelope")
	f.String("replication_slot", &c.ReplicationSlot).Default("iggy_slot").NonEmpty().Doc("the logical replication slot (pgoutput), created when missing")
	f.Strings("capture_operations", &c.CaptureOperations).Default([]string{opInsert, opUpdate, opDelete}).Doc("operations that become messages: INSERT, UPDATE, DELETE, TRUNCATE")
	sdk.Enum(f, "cdc_backend", &c.CDCBackend, sdk.Choice("builtin")).Default("builtin").Doc("accepted for compatibility")
	f.Bool("delete_after_read", &c.DeleteAfterRead).Default(false).Doc("polling: delete the rows read")
	f.String("processed_column", &c.ProcessedColumn).Doc("polling: boolean column set on the rows read")
	f.String("primary_key_column", &c.PrimaryKeyColumn).Doc("key column for delete/mark; CDC: the partition key of tables with no primary key")
	f.String("payload_column", &c.PayloadColumn).Doc("polling: the column taken as the payload")
	f.String("payload_format", &c.PayloadFormat).Default("bytea").Doc("polling: bytea, text or json_direct")
	f.Bool("verbose_logging", &c.VerboseLogging).Default(false).Doc("log each batch at info instead of debug")
	f.Int("max_retries", &c.MaxRetries).Default(3).Min(0).Doc("retries of a connection at open that failed for a transient reason")
	f.Duration("retry_delay", &c.RetryDelay).Default(time.Second).Doc("the first wait between those retries (doubling up to 30s), and of a lost replication connection's reconnects")
	f.String("publication", &c.Publication).Doc("the publication read (default <replication_slot>_pub, created for tables when missing)")
	sdk.Enum(f, "partition_by", &c.PartitionBy, sdk.Choice(partitionByKey), sdk.Choice(partitionByTable), sdk.Choice(partitionByNone)).Default(partitionByKey).
		Doc("a change's partition key: its table and primary key, its table, or none (one partition, total order)")
	f.Duration("status_interval", &c.StatusInterval).Default(time.Second).Min(time.Nanosecond).Doc("how often the confirmed position is reported to PostgreSQL")
	f.Check(func() error {
		c.capture = map[string]bool{}
		for i, op := range c.CaptureOperations {
			op = strings.ToUpper(strings.TrimSpace(op))
			if !slices.Contains([]string{opInsert, opUpdate, opDelete, opTruncate}, op) {
				return sdk.FieldErr("capture_operations", "entry %d %q: want INSERT, UPDATE, DELETE or TRUNCATE", i, op)
			}
			c.capture[op] = true
		}
		if c.Publication == "" {
			c.Publication = c.ReplicationSlot + "_pub"
		}
		if c.Mode != modePolling {
			return nil
		}
		if c.DeleteAfterRead && c.ProcessedColumn != "" {
			return sdk.FieldErr("delete_after_read", "set with processed_column: a row is either deleted or marked, not both")
		}
		if c.PollInterval <= 0 {
			return sdk.FieldErr("poll_interval", "%s: want a positive duration in polling mode", sdk.FormatDuration(c.PollInterval))
		}
		return nil
	})
})

// Spec is Config's spec, for the registry.
var Spec = Config.Spec()

func tableList(tables []string) error {
	if len(tables) == 0 {
		return errors.New("must name at least one table")
	}
	for i, t := range tables {
		if strings.TrimSpace(t) == "" || strings.Count(t, ".") > 1 {
			return fmt.Errorf("entry %d %q: want name or schema.name", i, t)
		}
	}
	return nil
}

// Operation names, as upstream's operation_type.
const (
	opInsert   = "INSERT"
	opUpdate   = "UPDATE"
	opDelete   = "DELETE"
	opTruncate = "TRUNCATE"
)

// tableRef splits "schema.name" (schema public when absent).
func tableRef(t string) (schema, name string) {
	if s, n, ok := strings.Cut(t, "."); ok {
		return s, n
	}
	return "public", t
}
