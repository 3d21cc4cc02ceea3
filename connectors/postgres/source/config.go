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

// plugin_config fields. Those up to FieldRetryDelay are Iggy's postgres_source's, with its
// defaults; the rest are Ferry's.
const (
	// FieldConnectionString: PostgreSQL URL or key=value DSN. Required; never logged.
	FieldConnectionString = "connection_string"
	// FieldMode: cdc (logical replication) or polling. Required, as upstream.
	FieldMode = "mode"
	// FieldTables: the tables captured ("name" or "schema.name"). Required.
	FieldTables = "tables"
	// FieldPollInterval: polling mode: time between polls; default 10s (upstream's code).
	FieldPollInterval = "poll_interval"
	// FieldBatchSize: the most messages in one batch sent to Iggy; default 1000.
	FieldBatchSize = "batch_size"
	// FieldTrackingColumn: polling mode: the column rows are read in order of; default id.
	FieldTrackingColumn = "tracking_column"
	// FieldInitialOffset: polling mode: the tracking value to start after.
	FieldInitialOffset = "initial_offset"
	// FieldMaxConnections: accepted for compatibility; the source uses two connections.
	FieldMaxConnections = "max_connections"
	// FieldCustomQuery: polling mode: the query run instead of the built one.
	FieldCustomQuery = "custom_query"
	// FieldSnakeCaseColumns: convert column names to snake_case; default false.
	FieldSnakeCaseColumns = "snake_case_columns"
	// FieldIncludeMetadata: accepted; CDC messages always carry the record envelope.
	FieldIncludeMetadata = "include_metadata"
	// FieldReplicationSlot: the logical replication slot (pgoutput); default iggy_slot.
	FieldReplicationSlot = "replication_slot"
	// FieldCaptureOperations: which of INSERT, UPDATE, DELETE, TRUNCATE become messages;
	// default INSERT, UPDATE, DELETE.
	FieldCaptureOperations = "capture_operations"
	// FieldCDCBackend: builtin (default) is the only value accepted.
	FieldCDCBackend = "cdc_backend"
	// FieldDeleteAfterRead: polling mode: delete the rows read.
	FieldDeleteAfterRead = "delete_after_read"
	// FieldProcessedColumn: polling mode: the boolean column set on the rows read.
	FieldProcessedColumn = "processed_column"
	// FieldPrimaryKeyColumn: the key column for delete/mark, and for partitioning when a
	// table has no primary key.
	FieldPrimaryKeyColumn = "primary_key_column"
	// FieldPayloadColumn: polling mode: the column taken as the payload.
	FieldPayloadColumn = "payload_column"
	// FieldPayloadFormat: polling mode: bytea (default), text or json_direct.
	FieldPayloadFormat = "payload_format"
	// FieldVerboseLogging: log each batch at info instead of debug; default false.
	FieldVerboseLogging = "verbose_logging"
	// FieldMaxRetries: attempts for transient database errors at open; default 3.
	FieldMaxRetries = "max_retries"
	// FieldRetryDelay: the base wait between those attempts; default 1s.
	FieldRetryDelay = "retry_delay"

	// FieldPublication: the publication the slot reads; default <replication_slot>_pub,
	// created for tables when missing, used as it is when it exists.
	FieldPublication = "publication"
	// FieldPartitionBy: the partition key of a change: key (default: the table and the
	// row's primary key, so one row's changes keep their order), table, or none (one key
	// for every change: total commit order on one partition).
	FieldPartitionBy = "partition_by"
	// FieldStatusInterval: how often the source tells PostgreSQL how far Iggy holds the
	// changes (standby status); default 1s.
	FieldStatusInterval = "status_interval"
)

// Modes, partitionings and defaults.
const (
	ModeCDC               = "cdc"
	ModePolling           = "polling"
	PartitionByKey        = "key"
	PartitionByTable      = "table"
	PartitionByNone       = "none"
	DefaultSlot           = "iggy_slot"
	DefaultBatchSize      = 1000
	DefaultStatusInterval = time.Second
)

// Spec declares plugin_config; parseConfig decodes with it and `ferry check` validates
// with it.
var Spec = sdk.ConfigSpec{Fields: []sdk.ConfigField{
	{Name: FieldConnectionString, Type: sdk.TypeString, Required: true, Doc: "PostgreSQL URL or key=value DSN; never logged"},
	{Name: FieldMode, Type: sdk.TypeString, Required: true, Doc: "cdc (logical replication, pgoutput) or polling"},
	{Name: FieldTables, Type: sdk.TypeStrings, Required: true, Doc: `tables captured ("name" or "schema.name")`},
	{Name: FieldPollInterval, Type: sdk.TypeDuration, Default: "10s", Doc: "polling: time between polls"},
	{Name: FieldBatchSize, Type: sdk.TypeUnsigned, Default: DefaultBatchSize, Doc: "most messages per batch sent to Iggy"},
	{Name: FieldTrackingColumn, Type: sdk.TypeString, Default: "id", Doc: "polling: the column rows are read in order of"},
	{Name: FieldInitialOffset, Type: sdk.TypeString, Doc: "polling: the tracking value to start after"},
	{Name: FieldMaxConnections, Type: sdk.TypeUnsigned, Default: 10, Doc: "accepted for compatibility; CDC uses two connections"},
	{Name: FieldCustomQuery, Type: sdk.TypeString, Doc: "polling: query run instead of the built one"},
	{Name: FieldSnakeCaseColumns, Type: sdk.TypeBool, Default: false, Doc: "convert column names to snake_case"},
	{Name: FieldIncludeMetadata, Type: sdk.TypeBool, Default: true, Doc: "accepted; CDC messages always carry the record envelope"},
	{Name: FieldReplicationSlot, Type: sdk.TypeString, Default: DefaultSlot, Doc: "the logical replication slot (pgoutput), created when missing"},
	{Name: FieldCaptureOperations, Type: sdk.TypeStrings, Default: []any{"INSERT", "UPDATE", "DELETE"}, Doc: "operations that become messages: INSERT, UPDATE, DELETE, TRUNCATE"},
	{Name: FieldCDCBackend, Type: sdk.TypeString, Default: "builtin", Doc: "builtin only"},
	{Name: FieldDeleteAfterRead, Type: sdk.TypeBool, Default: false, Doc: "polling: delete the rows read"},
	{Name: FieldProcessedColumn, Type: sdk.TypeString, Doc: "polling: boolean column set on the rows read"},
	{Name: FieldPrimaryKeyColumn, Type: sdk.TypeString, Doc: "key column for delete/mark; CDC: the partition key of tables with no primary key"},
	{Name: FieldPayloadColumn, Type: sdk.TypeString, Doc: "polling: the column taken as the payload"},
	{Name: FieldPayloadFormat, Type: sdk.TypeString, Default: "bytea", Doc: "polling: bytea, text or json_direct"},
	{Name: FieldVerboseLogging, Type: sdk.TypeBool, Default: false, Doc: "log each batch at info instead of debug"},
	{Name: FieldMaxRetries, Type: sdk.TypeUnsigned, Default: 3, Doc: "attempts for transient database errors at open"},
	{Name: FieldRetryDelay, Type: sdk.TypeDuration, Default: "1s", Doc: "base wait between those attempts"},
	{Name: FieldPublication, Type: sdk.TypeString, Doc: "the publication read (default <replication_slot>_pub, created for tables when missing)"},
	{Name: FieldPartitionBy, Type: sdk.TypeString, Default: PartitionByKey, Doc: "partition key: key (table + primary key), table or none"},
	{Name: FieldStatusInterval, Type: sdk.TypeDuration, Default: "1s", Doc: "how often the confirmed position is reported to PostgreSQL"},
}}

// Config is the source's plugin_config.
type Config struct {
	ConnectionString  string   `json:"connection_string"`
	Mode              string   `json:"mode"`
	Tables            []string `json:"tables"`
	PollInterval      string   `json:"poll_interval"`
	BatchSize         int      `json:"batch_size"`
	TrackingColumn    string   `json:"tracking_column"`
	InitialOffset     string   `json:"initial_offset"`
	MaxConnections    int      `json:"max_connections"`
	CustomQuery       string   `json:"custom_query"`
	SnakeCaseColumns  bool     `json:"snake_case_columns"`
	IncludeMetadata   bool     `json:"include_metadata"`
	ReplicationSlot   string   `json:"replication_slot"`
	CaptureOperations []string `json:"capture_operations"`
	CDCBackend        string   `json:"cdc_backend"`
	DeleteAfterRead   bool     `json:"delete_after_read"`
	ProcessedColumn   string   `json:"processed_column"`
	PrimaryKeyColumn  string   `json:"primary_key_column"`
	PayloadColumn     string   `json:"payload_column"`
	PayloadFormat     string   `json:"payload_format"`
	VerboseLogging    bool     `json:"verbose_logging"`
	MaxRetries        int      `json:"max_retries"`
	RetryDelay        string   `json:"retry_delay"`
	Publication       string   `json:"publication"`
	PartitionBy       string   `json:"partition_by"`
	StatusInterval    string   `json:"status_interval"`

	statusEvery time.Duration
	retryDelay  time.Duration
	capture     map[string]bool
}

// ParseConfig decodes and checks plugin_config. Errors name the field.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if err := Spec.Decode(raw, &c); err != nil {
		return c, err
	}
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &sdk.FieldError{Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if strings.TrimSpace(c.ConnectionString) == "" {
		bad(FieldConnectionString, "must not be empty")
	}
	switch c.Mode {
	case ModeCDC, ModePolling:
	default:
		bad(FieldMode, "%q: want cdc or polling", c.Mode)
	}
	if len(c.Tables) == 0 {
		bad(FieldTables, "must name at least one table")
	}
	for i, t := range c.Tables {
		if strings.TrimSpace(t) == "" || strings.Count(t, ".") > 1 {
			bad(FieldTables, "entry %d %q: want name or schema.name", i, t)
		}
	}
	if c.Mode == ModePolling && c.DeleteAfterRead && c.ProcessedColumn != "" {
		bad(FieldDeleteAfterRead, "set with processed_column: a row is either deleted or marked, not both")
	}
	if c.BatchSize <= 0 {
		bad(FieldBatchSize, "must be at least 1")
	}
	if c.CDCBackend != "builtin" {
		bad(FieldCDCBackend, "%q: only builtin is supported", c.CDCBackend)
	}
	if c.ReplicationSlot == "" {
		bad(FieldReplicationSlot, "must not be empty")
	}
	if c.Publication == "" {
		c.Publication = c.ReplicationSlot + "_pub"
	}
	c.capture = map[string]bool{}
	for _, op := range c.CaptureOperations {
		op = strings.ToUpper(strings.TrimSpace(op))
		if !slices.Contains([]string{opInsert, opUpdate, opDelete, opTruncate}, op) {
			bad(FieldCaptureOperations, "%q: want INSERT, UPDATE, DELETE or TRUNCATE", op)
		}
		c.capture[op] = true
	}
	switch c.PartitionBy {
	case PartitionByKey, PartitionByTable, PartitionByNone:
	default:
		bad(FieldPartitionBy, "%q: want key, table or none", c.PartitionBy)
	}
	var err error
	if c.statusEvery, err = sdk.ParseDuration(c.StatusInterval); err != nil || c.statusEvery <= 0 {
		bad(FieldStatusInterval, "%q: want a positive duration", c.StatusInterval)
	}
	if c.retryDelay, err = sdk.ParseDuration(c.RetryDelay); err != nil {
		bad(FieldRetryDelay, "%q: %v", c.RetryDelay, err)
	}
	return c, errors.Join(errs...)
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
