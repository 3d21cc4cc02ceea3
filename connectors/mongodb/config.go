package mongodb

import (
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:mongodb".
const Name = "mongodb"

// PayloadFormat is how a message's payload is stored in the document's payload field.
type PayloadFormat string

// The payload formats, upstream's.
const (
	// FormatBinary stores the bytes as BSON binary (subtype 0).
	FormatBinary PayloadFormat = "binary"
	// FormatJSON stores the JSON payload as an embedded document (or array, or value).
	FormatJSON PayloadFormat = "json"
	// FormatString stores the payload as a UTF-8 string.
	FormatString PayloadFormat = "string"
)

// Defaults, upstream's.
const (
	DefaultBatchSize  = 100
	DefaultMaxRetries = 3
	DefaultRetryDelay = time.Second
)

// config is the sink's plugin_config. The keys are upstream's mongodb_sink's.
type config struct {
	URI            sdk.Secret
	Database       string
	Collection     string
	MaxPoolSize    uint64
	AutoCreate     bool
	BatchSize      int
	Metadata       bool
	Checksum       bool
	OriginTime     bool
	Format         PayloadFormat
	Verbose        bool
	MaxRetries     int
	RetryDelay     time.Duration
	RetryDelayMax  time.Duration
	WriteTimeout   time.Duration
	ConnectTimeout time.Duration
}

// Config declares plugin_config; Spec is its description for the registry.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Secret("connection_uri", &c.URI).Required().
		Doc("the MongoDB URI (mongodb:// or mongodb+srv://), with credentials and write concern (w=majority); never logged")
	f.String("database", &c.Database).Required().NonEmpty().Doc("the database")
	f.String("collection", &c.Collection).Required().NonEmpty().Doc("the collection")
	f.Uint64("max_pool_size", &c.MaxPoolSize).Min(1).Doc("connections in the driver's pool (default: the driver's, 100)")
	f.Bool("auto_create_collection", &c.AutoCreate).Default(false).Doc("create the collection at open when it does not exist; off: a missing collection is refused at open (upstream lets the first insert create it)")
	f.Int("batch_size", &c.BatchSize).Default(DefaultBatchSize).Min(1).Max(100000).Doc("documents per insertMany")
	f.Bool("include_metadata", &c.Metadata).Default(true).Doc("write iggy_offset, iggy_timestamp, iggy_stream, iggy_topic, iggy_partition_id")
	f.Bool("include_checksum", &c.Checksum).Default(true).Doc("write iggy_checksum")
	f.Bool("include_origin_timestamp", &c.OriginTime).Default(true).Doc("write iggy_origin_timestamp")
	sdk.Enum(f, "payload_format", &c.Format, sdk.Choice(FormatBinary), sdk.Choice(FormatJSON), sdk.Choice(FormatString, "text")).
		Default(FormatBinary).Doc("how payload is stored: BSON binary, an embedded document from JSON, or a string")
	f.Bool("verbose_logging", &c.Verbose).Default(false).Doc("log every batch at info instead of debug")
	f.Int("max_retries", &c.MaxRetries).Default(DefaultMaxRetries).Min(0).Max(1000).
		Doc("attempts of an insertMany that failed transiently before the batch fails, 0 meaning 1 as upstream (the runtime's [retry] then applies; a lost connection is waited out)")
	f.Duration("retry_delay", &c.RetryDelay).Default(DefaultRetryDelay).Min(time.Millisecond).Doc("the first wait between attempts, doubling")
	f.Duration("retry_max_delay", &c.RetryDelayMax).Default(30 * time.Second).Min(time.Millisecond).Doc("the longest wait between attempts")
	f.Duration("write_timeout", &c.WriteTimeout).Default(30 * time.Second).Min(time.Millisecond).Doc("bounds one insertMany (and the write concern's wait)")
	f.Duration("connect_timeout", &c.ConnectTimeout).Default(10 * time.Second).Min(time.Millisecond).
		Doc("how long open and each operation wait for a reachable server (serverSelectionTimeoutMS of the URI wins)")
	f.CommitModes("sink_controlled")
	f.Commits(sdk.CommitsEachBatch)
})

// Spec describes plugin_config for `ferry connectors` and `ferry check`.
var Spec = Config.Spec()
