package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:postgres".
const Name = "postgres"

// plugin_config fields. The first twelve are the official Iggy PostgreSQL sink's, with its
// defaults (batch_size 0 behaves as 1, as there); the rest are Ferry's.
const (
	// FieldConnectionString: PostgreSQL URL or key=value DSN. Required; never logged.
	FieldConnectionString = "connection_string"
	// FieldTargetTable: the table rows go to, one identifier quoted as a whole (as the
	// official sink: "a.b" names a table a.b); default iggy_messages.
	FieldTargetTable = "target_table"
	// FieldBatchSize: rows per INSERT pipeline in insert and upsert modes; default 100.
	FieldBatchSize = "batch_size"
	// FieldMaxConnections: the connection pool's size; default 10.
	FieldMaxConnections = "max_connections"
	// FieldAutoCreateTable: create the target table (official layout) when missing; default false.
	FieldAutoCreateTable = "auto_create_table"
	// FieldIncludeMetadata: write iggy_offset, iggy_timestamp, iggy_stream, iggy_topic and
	// iggy_partition_id; default true.
	FieldIncludeMetadata = "include_metadata"
	// FieldIncludeChecksum: write iggy_checksum; default true.
	FieldIncludeChecksum = "include_checksum"
	// FieldIncludeOriginTimestamp: write iggy_origin_timestamp; default true.
	FieldIncludeOriginTimestamp = "include_origin_timestamp"
	// FieldPayloadFormat: the payload column's type: bytea (default), json (jsonb) or text.
	FieldPayloadFormat = "payload_format"
	// FieldVerboseLogging: log each written batch at info instead of debug; default false.
	FieldVerboseLogging = "verbose_logging"
	// FieldMaxRetries: accepted for compatibility and not used: transient database
	// failures are retried until the sink stops, so no batch is given up on them.
	FieldMaxRetries = "max_retries"
	// FieldRetryDelay: the first wait of those retries (doubling up to 2s), Go or
	// humantime duration syntax; default 50ms.
	FieldRetryDelay = "retry_delay"
	// FieldExactlyOnce: write each batch and its offsets in one transaction and resume
	// from the database's offsets; default true.
	FieldExactlyOnce = "exactly_once"
	// FieldOffsetsTable: the table of the last written offset per connector key, stream,
	// topic and partition, quoted as a whole; default ferry_offsets (created when missing).
	FieldOffsetsTable = "offsets_table"
	// FieldOnOffsetsMismatch: what Open does when the offsets rows of the connector key
	// do not match the target table (they name another table, or the table holds no rows
	// while they say offsets were written into it): error (default: Open fails naming
	// them), resume (write after those offsets anyway) or restart (write those
	// partitions again from offset 0).
	FieldOnOffsetsMismatch = "on_offsets_mismatch"
	// FieldWriteMode: copy (COPY FROM, default), insert, or upsert (INSERT … ON CONFLICT
	// (upsert_key) DO UPDATE).
	FieldWriteMode = "write_mode"
	// FieldUpsertKey: the column upsert conflicts on (it must have a unique index);
	// default id, the message id.
	FieldUpsertKey = "upsert_key"
	// FieldColumns: [[plugin_config.columns]] name, type, path: extra columns filled from
	// the JSON payload's field at path (dot-separated; missing → NULL).
	FieldColumns = "columns"
	// FieldFlushInterval: group commit. 0 (default): each batch is one transaction. A
	// duration: a partition's transaction stays open across batches and commits when it
	// is this old, holds max_rows_per_transaction rows, or the sink stops or the
	// partition is assigned again; the offset goes to Iggy only after that commit
	// (offset_commit = "sink_controlled"). Keep it below the connector's shutdown_timeout.
	FieldFlushInterval = "flush_interval"
	// FieldMaxRowsPerTransaction: with flush_interval, a partition's transaction commits
	// once it holds this many rows; default 10000.
	FieldMaxRowsPerTransaction = "max_rows_per_transaction"
	// FieldCommitWhenCaughtUp: with flush_interval, a partition's transaction also commits
	// when a batch reaches the partition's end as the poll saw it (its last offset is the
	// poll's current offset): nothing more is waiting, so holding it open would only delay
	// what is written. Under a backlog batches do not reach the end, and they group.
	// Default true; false keeps every group open until its age or size.
	FieldCommitWhenCaughtUp = "commit_when_caught_up"
	// FieldCopyFormat: COPY's format in the copy write mode: binary (default) or text.
	// Both write the same rows; with warm_backends PostgreSQL spends less CPU per row
	// reading the binary one (it parses no timestamps or numbers).
	FieldCopyFormat = "copy_format"
	// FieldWarmBackends: send one 3 MiB parameter on each new connection, so that the
	// server's backend keeps the heap memory its COPYs use instead of returning it to the
	// kernel after every statement and taking it again (warm.go). Default true.
	FieldWarmBackends = "warm_backends"
)

// Defaults.
const (
	DefaultTargetTable    = "iggy_messages"
	DefaultOffsetsTable   = "ferry_offsets"
	DefaultBatchSize      = 100
	DefaultMaxConnections = 10
	// DefaultMaxRowsPerTransaction is max_rows_per_transaction when unset.
	DefaultMaxRowsPerTransaction = 10000
)

// Spec declares plugin_config (the constants above, their types and defaults); parseConfig
// decodes with it and `ferry check` validates with it. Under sink_controlled the sink
// commits a partition's offset once the transaction holding its rows committed.
var Spec = sdk.ConfigSpec{Commits: sdk.CommitsWhenDurable, Fields: []sdk.ConfigField{
	{Name: FieldConnectionString, Type: sdk.TypeString, Required: true, Doc: "PostgreSQL URL or key=value DSN; never logged"},
	{Name: FieldTargetTable, Type: sdk.TypeString, Default: DefaultTargetTable, Doc: "the table rows go to (one identifier, quoted as a whole)"},
	{Name: FieldBatchSize, Type: sdk.TypeInteger, Default: DefaultBatchSize, Doc: "rows per INSERT pipeline in insert and upsert modes (0 = 1)"},
	{Name: FieldMaxConnections, Type: sdk.TypeInteger, Default: DefaultMaxConnections, Doc: "the connection pool's size"},
	{Name: FieldAutoCreateTable, Type: sdk.TypeBool, Default: false, Doc: "create the target table (official layout) when missing"},
	{Name: FieldIncludeMetadata, Type: sdk.TypeBool, Default: true, Doc: "write iggy_offset, iggy_timestamp, iggy_stream, iggy_topic, iggy_partition_id"},
	{Name: FieldIncludeChecksum, Type: sdk.TypeBool, Default: true, Doc: "write iggy_checksum"},
	{Name: FieldIncludeOriginTimestamp, Type: sdk.TypeBool, Default: true, Doc: "write iggy_origin_timestamp"},
	{Name: FieldPayloadFormat, Type: sdk.TypeString, Default: FormatBytea, Doc: "the payload column: bytea, json (jsonb) or text"},
	{Name: FieldVerboseLogging, Type: sdk.TypeBool, Default: false, Doc: "log each written batch at info instead of debug"},
	{Name: FieldMaxRetries, Type: sdk.TypeInteger, Doc: "accepted for compatibility, not used: database failures are retried until the sink stops"},
	{Name: FieldRetryDelay, Type: sdk.TypeDuration, Default: "50ms", Doc: "the first wait between retries (doubling up to 2s)"},
	{Name: FieldExactlyOnce, Type: sdk.TypeBool, Default: true, Doc: "rows and offsets in one transaction; resume from the database's offsets"},
	{Name: FieldOffsetsTable, Type: sdk.TypeString, Default: DefaultOffsetsTable, Doc: "the offsets table (created when missing)"},
	{Name: FieldOnOffsetsMismatch, Type: sdk.TypeString, Default: MismatchError, Doc: "offsets rows naming another table, or an empty table they say was written: error, resume (after them) or restart (from offset 0)"},
	{Name: FieldWriteMode, Type: sdk.TypeString, Default: ModeCopy, Doc: "copy (COPY FROM), insert, or upsert (ON CONFLICT (upsert_key) DO UPDATE)"},
	{Name: FieldUpsertKey, Type: sdk.TypeString, Default: "id", Doc: "the column upsert conflicts on (unique index)"},
	{Name: FieldColumns, Type: sdk.TypeTables, Doc: "[[plugin_config.columns]] name, type, path: extra columns from JSON payload fields"},
	{Name: FieldFlushInterval, Type: sdk.TypeDuration, Default: "0s", Doc: "group commit: a partition's transaction spans batches and commits at this age (0: one transaction per batch)"},
	{Name: FieldMaxRowsPerTransaction, Type: sdk.TypeInteger, Default: DefaultMaxRowsPerTransaction, Doc: "with flush_interval: commit a partition's transaction once it holds this many rows"},
	{Name: FieldCommitWhenCaughtUp, Type: sdk.TypeBool, Default: true, Doc: "with flush_interval: also commit a partition's transaction when a batch reaches the partition's end (nothing more waiting)"},
	{Name: FieldCopyFormat, Type: sdk.TypeString, Default: CopyBinary, Doc: "COPY's format in the copy write mode: binary or text (the same rows)"},
	{Name: FieldWarmBackends, Type: sdk.TypeBool, Default: true, Doc: "send one 3 MiB parameter on each new connection, so the server's backend keeps its heap between COPYs (glibc)"},
}}

// COPY formats.
const (
	CopyText   = "text"
	CopyBinary = "binary"
)

// Write modes.
const (
	ModeCopy   = "copy"
	ModeInsert = "insert"
	ModeUpsert = "upsert"
)

// Payload formats.
const (
	FormatBytea = "bytea"
	FormatJSON  = "json"
	FormatText  = "text"
)

// Config is the sink's plugin_config. Pointers tell "unset" from false.
type Config struct {
	ConnectionString       string   `json:"connection_string"`
	TargetTable            string   `json:"target_table"`
	BatchSize              *int     `json:"batch_size"`
	MaxConnections         int      `json:"max_connections"`
	AutoCreateTable        bool     `json:"auto_create_table"`
	IncludeMetadata        *bool    `json:"include_metadata"`
	IncludeChecksum        *bool    `json:"include_checksum"`
	IncludeOriginTimestamp *bool    `json:"include_origin_timestamp"`
	PayloadFormat          string   `json:"payload_format"`
	VerboseLogging         bool     `json:"verbose_logging"`
	MaxRetries             *int     `json:"max_retries"`
	RetryDelay             string   `json:"retry_delay"`
	ExactlyOnce            *bool    `json:"exactly_once"`
	OffsetsTable           string   `json:"offsets_table"`
	OnOffsetsMismatch      string   `json:"on_offsets_mismatch"`
	WriteMode              string   `json:"write_mode"`
	UpsertKey              string   `json:"upsert_key"`
	Columns                []Column `json:"columns"`
	FlushInterval          string   `json:"flush_interval"`
	MaxRowsPerTransaction  int      `json:"max_rows_per_transaction"`
	CommitWhenCaughtUp     *bool    `json:"commit_when_caught_up"`
	CopyFormat             string   `json:"copy_format"`
	WarmBackends           *bool    `json:"warm_backends"`
}

// Column maps a JSON payload field to a column.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"` // SQL type, used by auto_create_table and to convert the value
	Path string `json:"path"` // dot-separated field path in the JSON payload
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxIdentifier is PostgreSQL's identifier length limit (NAMEDATALEN − 1 bytes).
const maxIdentifier = 63

// validTable reports whether name can be a table identifier. It is quoted as a whole, as
// the official sink does: "a.b" is one table named a.b in the search path's schema.
func validTable(name string) bool {
	return name != "" && len(name) <= maxIdentifier && utf8.ValidString(name) && !strings.ContainsRune(name, 0)
}

// parseConfig decodes plugin_config, applies defaults and checks every field; errors name
// the field.
func parseConfig(raw []byte) (Config, error) {
	var c Config
	if err := Spec.Decode(raw, &c); err != nil {
		return c, err
	}
	t := true
	if c.ConnectionString == "" {
		return c, errors.New("plugin_config: connection_string is required")
	}
	if c.TargetTable == "" {
		c.TargetTable = DefaultTargetTable
	}
	if c.OffsetsTable == "" {
		c.OffsetsTable = DefaultOffsetsTable
	}
	for _, f := range []struct{ name, v string }{{FieldTargetTable, c.TargetTable}, {FieldOffsetsTable, c.OffsetsTable}} {
		if !validTable(f.v) {
			return c, fmt.Errorf("plugin_config: %s %q: want a table name (1 to %d bytes of UTF-8, quoted as a whole)", f.name, f.v, maxIdentifier)
		}
	}
	switch {
	case c.BatchSize == nil:
		c.BatchSize = new(DefaultBatchSize)
	case *c.BatchSize < 0:
		return c, fmt.Errorf("plugin_config: batch_size %d: want a positive number", *c.BatchSize)
	case *c.BatchSize == 0:
		*c.BatchSize = 1
	}
	if c.RetryDelay != "" {
		if d, err := sdk.ParseDuration(c.RetryDelay); err != nil || d <= 0 {
			return c, fmt.Errorf("plugin_config: retry_delay %q: want a positive duration like \"1s\"", c.RetryDelay)
		}
	}
	switch {
	case c.MaxConnections == 0:
		c.MaxConnections = DefaultMaxConnections
	case c.MaxConnections < 0:
		return c, fmt.Errorf("plugin_config: max_connections %d: want a positive number", c.MaxConnections)
	}
	for _, p := range []**bool{&c.IncludeMetadata, &c.IncludeChecksum, &c.IncludeOriginTimestamp, &c.ExactlyOnce} {
		if *p == nil {
			*p = &t
		}
	}
	c.PayloadFormat = strings.ToLower(c.PayloadFormat)
	switch c.PayloadFormat {
	case "":
		c.PayloadFormat = FormatBytea
	case "jsonb":
		c.PayloadFormat = FormatJSON
	case FormatBytea, FormatJSON, FormatText:
	default:
		return c, fmt.Errorf("plugin_config: payload_format %q: want bytea, json or text", c.PayloadFormat)
	}
	switch c.WriteMode {
	case "":
		c.WriteMode = ModeCopy
	case ModeCopy, ModeInsert, ModeUpsert:
	default:
		return c, fmt.Errorf("plugin_config: write_mode %q: want copy, insert or upsert", c.WriteMode)
	}
	c.CopyFormat = strings.ToLower(c.CopyFormat)
	switch c.CopyFormat {
	case "":
		c.CopyFormat = CopyBinary
	case CopyText, CopyBinary:
	default:
		return c, fmt.Errorf("plugin_config: %s %q: want text or binary", FieldCopyFormat, c.CopyFormat)
	}
	switch c.OnOffsetsMismatch {
	case "":
		c.OnOffsetsMismatch = MismatchError
	case MismatchError, MismatchResume, MismatchRestart:
	default:
		return c, fmt.Errorf("plugin_config: %s %q: want error, resume or restart", FieldOnOffsetsMismatch, c.OnOffsetsMismatch)
	}
	if c.UpsertKey == "" {
		c.UpsertKey = "id"
	}
	seen := map[string]bool{}
	for i, col := range c.Columns {
		where := fmt.Sprintf("plugin_config: columns[%d]", i)
		if !identRe.MatchString(col.Name) {
			return c, fmt.Errorf("%s: name %q: want a column name (letters, digits, _)", where, col.Name)
		}
		if seen[col.Name] {
			return c, fmt.Errorf("%s: name %q appears twice", where, col.Name)
		}
		seen[col.Name] = true
		if col.Path == "" {
			return c, fmt.Errorf("%s (%s): path is required", where, col.Name)
		}
		if col.Type == "" {
			c.Columns[i].Type = "text"
		}
		if !regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_ (),]*$`).MatchString(c.Columns[i].Type) {
			return c, fmt.Errorf("%s (%s): type %q: want an SQL type name", where, col.Name, col.Type)
		}
	}
	if c.FlushInterval != "" {
		if d, err := sdk.ParseDuration(c.FlushInterval); err != nil || d < 0 {
			return c, fmt.Errorf("plugin_config: %s %q: want a duration like \"500ms\" (0: one transaction per batch)", FieldFlushInterval, c.FlushInterval)
		}
	}
	switch {
	case c.MaxRowsPerTransaction == 0:
		c.MaxRowsPerTransaction = DefaultMaxRowsPerTransaction
	case c.MaxRowsPerTransaction < 0:
		return c, fmt.Errorf("plugin_config: %s %d: want a positive number", FieldMaxRowsPerTransaction, c.MaxRowsPerTransaction)
	}
	if c.WriteMode == ModeUpsert && c.UpsertKey != "id" && !seen[c.UpsertKey] {
		return c, fmt.Errorf("plugin_config: upsert_key %q: want id or the name of one of columns", c.UpsertKey)
	}
	return c, nil
}
