package postgres

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:postgres".
const Name = "postgres"

// config is the sink's plugin_config. The keys up to retry_delay are the official Iggy
// PostgreSQL sink's, with its defaults; the rest are Ferry's.
type config struct {
	ConnectionString       sdk.Secret
	TargetTable            string
	BatchSize              int
	MaxConnections         int
	AutoCreateTable        bool
	IncludeMetadata        bool
	IncludeChecksum        bool
	IncludeOriginTimestamp bool
	PayloadFormat          payloadFormat
	VerboseLogging         bool
	MaxRetries             int
	RetryDelay             time.Duration
	ExactlyOnce            bool
	OffsetsTable           string
	OnOffsetsMismatch      mismatchPolicy
	WriteMode              writeMode
	UpsertKey              string
	Columns                []column
	FlushInterval          time.Duration
	MaxRowsPerTransaction  int
	CommitWhenCaughtUp     bool
	CopyFormat             copyFormat
	WarmBackends           bool
}

// column maps a JSON payload field to a column.
type column struct {
	Name string
	Type string // SQL type, used by auto_create_table and to convert the value
	Path string // dot-separated field path in the JSON payload
}

type (
	payloadFormat  string // the payload column's type
	writeMode      string // how rows are written
	copyFormat     string // COPY's format in the copy write mode
	mismatchPolicy string // what Open does with offsets rows the target does not match (offsets.go)
)

const (
	formatBytea payloadFormat = "bytea"
	formatJSON  payloadFormat = "json" // jsonb
	formatText  payloadFormat = "text"

	modeCopy   writeMode = "copy"   // COPY FROM
	modeInsert writeMode = "insert" // INSERT statements, batch_size per pipelined round trip
	modeUpsert writeMode = "upsert" // INSERT … ON CONFLICT (upsert_key) DO UPDATE

	copyText   copyFormat = "text"
	copyBinary copyFormat = "binary"

	mismatchError   mismatchPolicy = "error"   // Open fails, naming the rows
	mismatchResume  mismatchPolicy = "resume"  // write after those offsets anyway
	mismatchRestart mismatchPolicy = "restart" // write those partitions again from offset 0
)

// Defaults a value of 0 also stands for.
const (
	defaultMaxConnections        = 10
	defaultMaxRowsPerTransaction = 10000
)

// Config declares plugin_config: `ferry check` validates with it, Open decodes with it.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	// Under sink_controlled a partition's offset is committed once the transaction
	// holding its rows committed.
	f.Commits(sdk.CommitsWhenDurable)
	f.Secret("connection_string", &c.ConnectionString).Required().NonEmpty().Doc("PostgreSQL URL or key=value DSN")
	f.String("target_table", &c.TargetTable).Default("iggy_messages").Check(tableName).Doc("the table rows go to (one identifier, quoted as a whole)")
	f.Int("batch_size", &c.BatchSize).Default(100).Min(0).Doc("rows per INSERT pipeline in insert and upsert modes; 0 behaves as 1")
	f.Int("max_connections", &c.MaxConnections).Default(defaultMaxConnections).Min(0).Doc("the connection pool's size; 0 is the default")
	f.Bool("auto_create_table", &c.AutoCreateTable).Default(false).Doc("create the target table (official layout) when missing")
	f.Bool("include_metadata", &c.IncludeMetadata).Default(true).Doc("write iggy_offset, iggy_timestamp, iggy_stream, iggy_topic, iggy_partition_id")
	f.Bool("include_checksum", &c.IncludeChecksum).Default(true).Doc("write iggy_checksum")
	f.Bool("include_origin_timestamp", &c.IncludeOriginTimestamp).Default(true).Doc("write iggy_origin_timestamp")
	sdk.Enum(f, "payload_format", &c.PayloadFormat, sdk.Choice(formatBytea), sdk.Choice(formatJSON, "jsonb"), sdk.Choice(formatText)).Default(formatBytea).Doc("the payload column's type")
	f.Bool("verbose_logging", &c.VerboseLogging).Default(false).Doc("log each written batch at info instead of debug")
	f.Int("max_retries", &c.MaxRetries).Default(3).Doc("accepted for compatibility, not used: database failures are retried until the sink stops")
	f.Duration("retry_delay", &c.RetryDelay).Default(50 * time.Millisecond).Min(time.Nanosecond).Doc("the first wait of the retries inside Open, a flush and Close (doubling up to 2s)")
	f.Bool("exactly_once", &c.ExactlyOnce).Default(true).Doc("rows and offsets in one transaction; resume from the database's offsets")
	f.String("offsets_table", &c.OffsetsTable).Default("ferry_offsets").Check(tableName).Doc("the offsets table (created when missing)")
	sdk.Enum(f, "on_offsets_mismatch", &c.OnOffsetsMismatch, sdk.Choice(mismatchError), sdk.Choice(mismatchResume), sdk.Choice(mismatchRestart)).Default(mismatchError).
		Doc("offsets rows naming another table, or an empty table they say was written: fail, resume after them, or restart from offset 0")
	sdk.Enum(f, "write_mode", &c.WriteMode, sdk.Choice(modeCopy), sdk.Choice(modeInsert), sdk.Choice(modeUpsert)).Default(modeCopy).
		Doc("how rows are written: COPY FROM, INSERT statements, or INSERT … ON CONFLICT (upsert_key) DO UPDATE")
	f.String("upsert_key", &c.UpsertKey).Default("id").Doc("the column upsert conflicts on (unique index): id or one of columns")
	sdk.Tables(f, "columns", &c.Columns, func(col *column, f *sdk.Fields) {
		f.String("name", &col.Name).Required().Check(matches(identRe, "a column name (letters, digits, _)")).Doc("the column")
		f.String("type", &col.Type).Default("text").Check(matches(sqlTypeRe, "an SQL type name")).Doc("its SQL type (auto_create_table; the value is converted to it)")
		f.String("path", &col.Path).Required().Doc("the JSON payload's field, dot-separated (missing: NULL)")
	}).Doc("extra columns filled from JSON payload fields")
	f.Duration("flush_interval", &c.FlushInterval).Default(0).Doc("group commit: a partition's transaction spans batches and commits at this age (0: one transaction per batch)")
	f.Int("max_rows_per_transaction", &c.MaxRowsPerTransaction).Default(defaultMaxRowsPerTransaction).Min(0).
		Doc("with flush_interval: commit a partition's transaction once it holds this many rows; 0 is the default")
	f.Bool("commit_when_caught_up", &c.CommitWhenCaughtUp).Default(true).
		Doc("with flush_interval: also commit a partition's transaction when a batch reaches the partition's end (nothing more waiting)")
	sdk.Enum(f, "copy_format", &c.CopyFormat, sdk.Choice(copyText), sdk.Choice(copyBinary)).Default(copyBinary).Doc("COPY's format in the copy write mode (the same rows)")
	f.Bool("warm_backends", &c.WarmBackends).Default(true).Doc("send one 3 MiB parameter on each new connection, so the server's backend keeps its heap between COPYs (glibc)")
	f.Check(func() error {
		// 0 stands for the default, as the official sink's batch_size 0 behaves as 1.
		c.BatchSize = max(c.BatchSize, 1)
		c.MaxConnections = cmp.Or(c.MaxConnections, defaultMaxConnections)
		c.MaxRowsPerTransaction = cmp.Or(c.MaxRowsPerTransaction, defaultMaxRowsPerTransaction)
		seen := map[string]bool{}
		for i, col := range c.Columns {
			if seen[col.Name] {
				return sdk.FieldErr(fmt.Sprintf("columns[%d].name", i), "%q appears twice", col.Name)
			}
			seen[col.Name] = true
		}
		if c.WriteMode == modeUpsert && c.UpsertKey != "id" && !seen[c.UpsertKey] {
			return sdk.FieldErr("upsert_key", "%q: want id or the name of one of columns", c.UpsertKey)
		}
		return nil
	})
})

// Spec is Config's spec, for the registry.
var Spec = Config.Spec()

// maxIdentifier is PostgreSQL's identifier length limit (NAMEDATALEN − 1 bytes).
const maxIdentifier = 63

// tableName accepts a table identifier. It is quoted as a whole, as the official sink
// does: "a.b" is one table named a.b in the search path's schema.
func tableName(name string) error {
	if name == "" || len(name) > maxIdentifier || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%q: want a table name (1 to %d bytes of UTF-8, quoted as a whole)", name, maxIdentifier)
	}
	return nil
}

var (
	identRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sqlTypeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_ (),]*$`)
)

// matches accepts a value re matches, refusing the others as not what want names.
func matches(re *regexp.Regexp, want string) func(string) error {
	return func(v string) error {
		if !re.MatchString(v) {
			return fmt.Errorf("%q: want %s", v, want)
		}
		return nil
	}
}
