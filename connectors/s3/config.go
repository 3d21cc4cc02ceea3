package s3

import (
	"math"
	"time"

	"github.com/ferryio/ferry/connectors/internal/parquetrows"
	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:s3".
const Name = "s3"

// The values of the enum keys.
type (
	format   string // output_format
	rotation string // file_rotation
)

const (
	formatJSONLines format = "json_lines"
	formatJSONArray format = "json_array"
	formatRaw       format = "raw"
	formatParquet   format = "parquet"

	rotationSize     rotation = "size"
	rotationMessages rotation = "messages"
)

const (
	defaultPathTemplate = "{stream}/{topic}/{date}/{hour}"
	maxSinglePut        = 5 * sdk.GiB // S3's PutObject limit
)

// config is the sink's plugin_config, decoded by Config: every limit a number, every
// choice one of its type's values.
type config struct {
	Bucket, Region, Prefix, Endpoint, PathTemplate string
	AccessKeyID, SecretAccessKey                   sdk.Secret // both or neither; neither: the AWS chain
	Format                                         format
	Rotation                                       rotation
	MaxFileSize, MaxBuffered, PartSize             sdk.ByteSize
	MaxMessages                                    uint64 // math.MaxUint64 when unset
	IncludeMetadata, IncludeHeaders, PathStyle     bool
	MaxAttempts, RowGroupSize                      int
	RetryDelay, FlushInterval                      time.Duration
	Compression                                    parquetrows.Compression
	Level                                          parquetrows.ZstdLevel
	Columns                                        []parquetrows.Column // typed Parquet columns filled from the JSON payload

	maxBytes uint64   // an object's size limit: MaxFileSize, or none with messages rotation
	tpl      template // PathTemplate parsed
}

// Config declares plugin_config: the first sixteen keys are upstream Iggy's s3_sink's,
// with its defaults; the rest are Ferry's. The sink runs in one commit mode (also when a
// file sets no offset_commit, as upstream's s3_sink files do), committing a partition's
// offsets once their object is in the bucket.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	var pathStyleSet, levelSet bool
	f.CommitModes("sink_controlled")
	f.Commits(sdk.CommitsWhenDurable)
	f.String("bucket", &c.Bucket).Required().NonEmpty().Doc("the bucket objects go to")
	f.String("region", &c.Region).Required().NonEmpty().Doc("the bucket's region (us-east-1; auto for R2)")
	f.String("prefix", &c.Prefix).Doc("prepended to every object key (slashes at both ends trimmed)")
	f.URL("endpoint", &c.Endpoint, "http", "https").Doc("an S3-compatible endpoint (MinIO, R2, versitygw); default AWS")
	f.Secret("access_key_id", &c.AccessKeyID).Doc("static access key (with secret_access_key); default the AWS chain (environment, profile, instance role)")
	f.Secret("secret_access_key", &c.SecretAccessKey).Doc("static secret key (with access_key_id)")
	f.BothOrNeither("access_key_id", "secret_access_key")
	f.String("path_template", &c.PathTemplate).Default(defaultPathTemplate).NonEmpty().
		Doc("key directories: {stream} {topic} {partition} {date} {hour} {timestamp} of the first message; a {stream} or {topic} path segment it lacks is appended")
	sdk.Enum(f, "file_rotation", &c.Rotation, sdk.Choice(rotationSize), sdk.Choice(rotationMessages)).
		Default(rotationSize).Doc("which limit closes an object")
	f.Size("max_file_size", &c.MaxFileSize).Default(8 * sdk.MiB).Min(1).Max(maxSinglePut).Doc("an object's size limit (at most one PutObject)")
	f.Uint64("max_messages_per_file", &c.MaxMessages).Min(1).Doc("an object's message limit; also applied with size rotation when set")
	f.RequiredWhen("max_messages_per_file", "file_rotation", string(rotationMessages))
	sdk.Enum(f, "output_format", &c.Format, sdk.Choice(formatJSONLines, "jsonl", "jsonlines"), sdk.Choice(formatJSONArray),
		sdk.Choice(formatRaw), sdk.Choice(formatParquet)).Default(formatJSONLines).Doc("the objects' format")
	f.Bool("include_metadata", &c.IncludeMetadata).Default(true).Doc("JSON formats: write offset, timestamp, stream, topic, partition_id")
	f.Bool("include_headers", &c.IncludeHeaders).Default(false).Doc("JSON formats: write the user headers")
	f.Int("max_attempts", &c.MaxAttempts).Alias("max_retries").Default(3).Min(1).Max(1000).Doc("attempts of each request of an upload (a PUT, a part, the copy) before the batch fails")
	f.Duration("retry_delay", &c.RetryDelay).Default(time.Second).Min(time.Nanosecond).Doc("the first wait between attempts, doubling up to 60s")
	f.Bool("path_style", &c.PathStyle).Present(&pathStyleSet).Doc("path-style addressing (default: on when endpoint is set)")
	f.Duration("flush_interval", &c.FlushInterval).Default(10 * time.Second).Min(time.Nanosecond).Doc("a partition idle this long is uploaded and committed")
	f.Size("max_buffered_bytes", &c.MaxBuffered).Default(64 * sdk.MiB).Min(1).Doc("bytes buffered across partitions before the largest is uploaded early")
	sdk.Enum(f, "compression", &c.Compression, sdk.Choice(parquetrows.Zstd), sdk.Choice(parquetrows.Snappy), sdk.Choice(parquetrows.Gzip),
		sdk.Choice(parquetrows.Uncompressed)).Default(parquetrows.Zstd).Doc("parquet: the codec")
	sdk.Enum(f, "compression_level", &c.Level, sdk.Choice(parquetrows.ZstdFastest), sdk.Choice(parquetrows.ZstdDefault), sdk.Choice(parquetrows.ZstdBetter)).
		Default(parquetrows.ZstdFastest).Present(&levelSet).Doc("parquet, zstd only: its level")
	f.Int("row_group_size", &c.RowGroupSize).Default(65536).Min(1).Doc("parquet: rows per row group")
	f.Size("part_size", &c.PartSize).Default(8 * sdk.MiB).Min(5 * sdk.MiB).Max(maxSinglePut).
		Doc("a partition buffering this much before its object is full streams it through a multipart upload in parts of this size (S3's smallest part is 5MiB)")
	sdk.Tables(f, "columns", &c.Columns, func(col *parquetrows.Column, f *sdk.Fields) {
		f.String("name", &col.Name).Required().NonEmpty().Doc("the column's name")
		parquetrows.TypeField(f, "type", &col.Type).Required().Doc("the column's type (json: the value's JSON text)")
		f.String("path", &col.Path).Required().Check(parquetrows.CheckPath).Doc("the payload field, dot-separated; a missing field or a JSON null is null")
	}).Doc("parquet: typed columns filled from JSON payload fields")
	f.Check(func() (err error) {
		switch {
		case c.AccessKeyID.IsZero() != c.SecretAccessKey.IsZero(): // both written, one empty
			return sdk.FieldErr("access_key_id", "access_key_id and secret_access_key go together: set both or neither")
		case levelSet && c.Compression != parquetrows.Zstd:
			return sdk.FieldErr("compression_level", "applies to zstd only (compression is %q)", c.Compression)
		}
		if c.tpl, err = newTemplate(c.PathTemplate); err != nil {
			return sdk.FieldErr("path_template", "%v", err)
		}
		return checkColumns(c.Columns, c.Format)
	})
	f.Check(func() error {
		// Not a check: the limits and defaults that depend on other keys.
		if !pathStyleSet {
			c.PathStyle = c.Endpoint != ""
		}
		c.maxBytes = uint64(c.MaxFileSize)
		if c.Rotation == rotationMessages {
			c.maxBytes = math.MaxUint64
		}
		if c.MaxMessages == 0 {
			c.MaxMessages = math.MaxUint64
		}
		return nil
	})
})

// Spec is what the registry, `ferry check` and `ferry connectors` know of the sink.
var Spec = Config.Spec()
