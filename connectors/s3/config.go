package s3

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:s3".
const Name = "s3"

// plugin_config fields. The first sixteen are Iggy's s3_sink's, with its defaults; the rest
// are Ferry's.
const (
	// FieldBucket: the bucket objects go to. Required.
	FieldBucket = "bucket"
	// FieldRegion: the bucket's region ("us-east-1", "auto" for R2). Required.
	FieldRegion = "region"
	// FieldPrefix: prepended to every key (slashes at both ends trimmed); default none.
	FieldPrefix = "prefix"
	// FieldEndpoint: an S3-compatible endpoint URL (MinIO, R2, versitygw); default AWS.
	FieldEndpoint = "endpoint"
	// FieldAccessKeyID, FieldSecretAccessKey: static credentials, both or neither; without
	// them the standard AWS chain is used (environment, shared profile, instance role).
	// Never logged.
	FieldAccessKeyID     = "access_key_id"
	FieldSecretAccessKey = "secret_access_key"
	// FieldPathTemplate: the key's directories, with {stream}, {topic}, {partition},
	// {date}, {hour} and {timestamp} taken from the object's first message; default
	// "{stream}/{topic}/{date}/{hour}". A {stream} or {topic} path segment it lacks is
	// appended (see key.go), so every key names one stream and topic.
	FieldPathTemplate = "path_template"
	// FieldFileRotation: size (default) or messages: which limit closes an object.
	FieldFileRotation = "file_rotation"
	// FieldMaxFileSize: an object's size limit ("8MiB", "10MB", bytes); default 8MiB.
	FieldMaxFileSize = "max_file_size"
	// FieldMaxMessagesPerFile: an object's message limit; required with file_rotation =
	// "messages", also applied with size rotation when set.
	FieldMaxMessagesPerFile = "max_messages_per_file"
	// FieldOutputFormat: json_lines (default; also jsonl, jsonlines), json_array, raw, parquet.
	FieldOutputFormat = "output_format"
	// FieldIncludeMetadata: JSON formats write offset, timestamp, stream, topic,
	// partition_id; default true.
	FieldIncludeMetadata = "include_metadata"
	// FieldIncludeHeaders: JSON formats write the user headers as an object; default false.
	FieldIncludeHeaders = "include_headers"
	// FieldMaxAttempts: upload attempts per object before Consume fails (the runtime then
	// retries the batch); default 3. FieldMaxRetries is its alias, as upstream.
	FieldMaxAttempts = "max_attempts"
	FieldMaxRetries  = "max_retries"
	// FieldRetryDelay: the first wait between attempts, doubling up to 60s; default 1s.
	FieldRetryDelay = "retry_delay"
	// FieldPathStyle: path-style addressing; default on when endpoint is set.
	FieldPathStyle = "path_style"

	// FieldFlushInterval: a partition whose buffer got nothing for this long is uploaded
	// and committed; default 10s.
	FieldFlushInterval = "flush_interval"
	// FieldMaxBufferedBytes: the bytes buffered across all partitions of the sink; past
	// it the largest buffer is uploaded early; default 64MiB.
	FieldMaxBufferedBytes = "max_buffered_bytes"
	// FieldCompression: parquet's codec: zstd (default), snappy, gzip or none.
	FieldCompression = "compression"
	// FieldCompressionLevel: zstd's level: fastest, default or better (klauspost/compress's
	// levels, about zstd's 1, 3 and 7); default fastest. Only with compression = "zstd".
	FieldCompressionLevel = "compression_level"
	// FieldRowGroupSize: parquet rows per row group; default 65536.
	FieldRowGroupSize = "row_group_size"
	// FieldPartSize: a partition whose buffer reaches this size while its object is not yet
	// full streams the object through a multipart upload in parts of this size instead of
	// holding it in memory; at least 5MiB (S3's smallest part); default 8MiB.
	FieldPartSize = "part_size"
	// FieldColumns: [[plugin_config.columns]] name, type, path: typed parquet columns
	// filled from the JSON payload's fields (see Column).
	FieldColumns = "columns"
)

// Defaults.
const (
	DefaultPathTemplate     = "{stream}/{topic}/{date}/{hour}"
	DefaultMaxFileSize      = "8MiB"
	DefaultMaxAttempts      = 3
	DefaultRetryDelay       = time.Second
	DefaultFlushInterval    = 10 * time.Second
	DefaultMaxBufferedBytes = "64MiB"
	DefaultRowGroupSize     = 65536
	DefaultCompressionLevel = LevelFastest
	DefaultPartSize         = "8MiB"
	minPartSize             = 5 << 20 // S3's smallest part but the last
	maxRetryDelay           = 60 * time.Second
	maxSinglePut            = 5 << 30 // S3's PutObject limit
)

// Output formats and rotations.
const (
	FormatJSONLines = "json_lines"
	FormatJSONArray = "json_array"
	FormatRaw       = "raw"
	FormatParquet   = "parquet"

	LevelFastest = "fastest"
	LevelDefault = "default"
	LevelBetter  = "better"

	RotationSize     = "size"
	RotationMessages = "messages"
)

// Spec declares plugin_config and the one commit mode the sink runs with (also when a
// file sets no offset_commit, as upstream's s3_sink files do), committing a partition's
// offsets once their object is in the bucket; Open decodes with it and `ferry check`
// validates with it.
var Spec = sdk.ConfigSpec{CommitModes: []string{"sink_controlled"}, Commits: sdk.CommitsWhenDurable, Fields: []sdk.ConfigField{
	{Name: FieldBucket, Type: sdk.TypeString, Required: true, Doc: "the bucket objects go to"},
	{Name: FieldRegion, Type: sdk.TypeString, Required: true, Doc: "the bucket's region (us-east-1; auto for R2)"},
	{Name: FieldPrefix, Type: sdk.TypeString, Doc: "prepended to every object key"},
	{Name: FieldEndpoint, Type: sdk.TypeString, Doc: "an S3-compatible endpoint URL (MinIO, R2, versitygw)"},
	{Name: FieldAccessKeyID, Type: sdk.TypeString, Doc: "static access key (with secret_access_key); default the AWS chain; never logged"},
	{Name: FieldSecretAccessKey, Type: sdk.TypeString, Doc: "static secret key (with access_key_id); never logged"},
	{Name: FieldPathTemplate, Type: sdk.TypeString, Default: DefaultPathTemplate, Doc: "key directories: {stream} {topic} {partition} {date} {hour} {timestamp} of the first message; a {stream} or {topic} path segment it lacks is appended"},
	{Name: FieldFileRotation, Type: sdk.TypeString, Default: RotationSize, Doc: "size or messages: which limit closes an object"},
	{Name: FieldMaxFileSize, Type: sdk.TypeString, Default: DefaultMaxFileSize, Doc: "an object's size limit (8MiB, 10MB, bytes)"},
	{Name: FieldMaxMessagesPerFile, Type: sdk.TypeUnsigned, Doc: "an object's message limit (required with file_rotation = messages)"},
	{Name: FieldOutputFormat, Type: sdk.TypeString, Default: FormatJSONLines, Doc: "json_lines, json_array, raw or parquet"},
	{Name: FieldIncludeMetadata, Type: sdk.TypeBool, Default: true, Doc: "JSON formats: write offset, timestamp, stream, topic, partition_id"},
	{Name: FieldIncludeHeaders, Type: sdk.TypeBool, Default: false, Doc: "JSON formats: write the user headers"},
	{Name: FieldMaxAttempts, Type: sdk.TypeUnsigned, Doc: "upload attempts per object before the batch fails (default 3)"},
	{Name: FieldMaxRetries, Type: sdk.TypeUnsigned, Doc: "alias of max_attempts"},
	{Name: FieldRetryDelay, Type: sdk.TypeDuration, Default: sdk.FormatDuration(DefaultRetryDelay), Doc: "first wait between upload attempts (doubling up to 60s)"},
	{Name: FieldPathStyle, Type: sdk.TypeBool, Doc: "path-style addressing (default: on when endpoint is set)"},
	{Name: FieldFlushInterval, Type: sdk.TypeDuration, Default: sdk.FormatDuration(DefaultFlushInterval), Doc: "a partition idle this long is uploaded and committed"},
	{Name: FieldMaxBufferedBytes, Type: sdk.TypeString, Default: DefaultMaxBufferedBytes, Doc: "bytes buffered across partitions before the largest is uploaded early"},
	{Name: FieldCompression, Type: sdk.TypeString, Default: "zstd", Doc: "parquet: zstd, snappy, gzip or none"},
	{Name: FieldCompressionLevel, Type: sdk.TypeString, Doc: "parquet, zstd only: fastest (default), default or better"},
	{Name: FieldRowGroupSize, Type: sdk.TypeUnsigned, Default: DefaultRowGroupSize, Doc: "parquet: rows per row group"},
	{Name: FieldPartSize, Type: sdk.TypeString, Default: DefaultPartSize, Doc: "a partition buffering this much before its object is full streams it through a multipart upload in parts of this size (at least 5MiB)"},
	{Name: FieldColumns, Type: sdk.TypeTables, Doc: "parquet: [[plugin_config.columns]] name, type (string, int64, float64, bool, json), path: typed columns from JSON payload fields"},
}}

// Config is the sink's plugin_config as written. Pointers tell "unset" from zero.
type Config struct {
	Bucket             string   `json:"bucket"`
	Region             string   `json:"region"`
	Prefix             string   `json:"prefix"`
	Endpoint           string   `json:"endpoint"`
	AccessKeyID        string   `json:"access_key_id"`
	SecretAccessKey    string   `json:"secret_access_key"`
	PathTemplate       string   `json:"path_template"`
	FileRotation       string   `json:"file_rotation"`
	MaxFileSize        string   `json:"max_file_size"`
	MaxMessagesPerFile *uint64  `json:"max_messages_per_file"`
	OutputFormat       string   `json:"output_format"`
	IncludeMetadata    bool     `json:"include_metadata"`
	IncludeHeaders     bool     `json:"include_headers"`
	MaxAttempts        *uint64  `json:"max_attempts"`
	MaxRetries         *uint64  `json:"max_retries"`
	RetryDelay         string   `json:"retry_delay"`
	PathStyle          *bool    `json:"path_style"`
	FlushInterval      string   `json:"flush_interval"`
	MaxBufferedBytes   string   `json:"max_buffered_bytes"`
	Compression        string   `json:"compression"`
	CompressionLevel   string   `json:"compression_level"`
	RowGroupSize       uint64   `json:"row_group_size"`
	PartSize           string   `json:"part_size"`
	Columns            []Column `json:"columns"`
}

// settings is Config resolved: every limit a number, every choice validated.
type settings struct {
	Config
	format        string // one of the Format constants
	maxBytes      uint64 // rotation by size (math.MaxUint64 with messages rotation)
	maxMessages   uint64 // math.MaxUint64 when unset
	maxAttempts   int
	retryDelay    time.Duration
	flushInterval time.Duration
	maxBuffered   uint64
	partSize      uint64
	pathStyle     bool
	level         string // zstd's level, one of the Level constants
}

// parseConfig decodes plugin_config and checks every field; errors name the field.
func parseConfig(raw []byte) (settings, error) {
	var s settings
	if err := Spec.Decode(raw, &s.Config); err != nil {
		return s, err
	}
	c := &s.Config
	bad := func(field, format string, args ...any) (settings, error) {
		return s, fmt.Errorf("plugin_config.%s: %s", field, fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(c.Bucket) == "" {
		return bad(FieldBucket, "must not be empty")
	}
	if strings.TrimSpace(c.Region) == "" {
		return bad(FieldRegion, "must not be empty")
	}
	if c.PathTemplate == "" {
		return bad(FieldPathTemplate, "must not be empty")
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return bad(FieldAccessKeyID, "access_key_id and secret_access_key go together: set both or neither")
	}
	switch strings.ToLower(c.OutputFormat) {
	case "json_lines", "jsonl", "jsonlines":
		s.format = FormatJSONLines
	case FormatJSONArray, FormatRaw, FormatParquet:
		s.format = strings.ToLower(c.OutputFormat)
	default:
		return bad(FieldOutputFormat, "unknown format %q (want json_lines, json_array, raw or parquet)", c.OutputFormat)
	}
	switch c.Compression {
	case "zstd", "snappy", "gzip", "none":
	default:
		return bad(FieldCompression, "unknown codec %q (want zstd, snappy, gzip or none)", c.Compression)
	}
	switch {
	case c.CompressionLevel == "":
		s.level = DefaultCompressionLevel
	case c.Compression != "zstd":
		return bad(FieldCompressionLevel, "applies to zstd only (compression is %q)", c.Compression)
	case c.CompressionLevel == LevelFastest, c.CompressionLevel == LevelDefault, c.CompressionLevel == LevelBetter:
		s.level = c.CompressionLevel
	default:
		return bad(FieldCompressionLevel, "unknown level %q (want fastest, default or better)", c.CompressionLevel)
	}
	if c.RowGroupSize == 0 {
		return bad(FieldRowGroupSize, "must be at least 1")
	}
	size, err := parseSize(c.MaxFileSize)
	if err != nil {
		return bad(FieldMaxFileSize, "%v", err)
	}
	if size == 0 || size > maxSinglePut {
		return bad(FieldMaxFileSize, "%q: want more than 0 and at most 5GiB (one PutObject)", c.MaxFileSize)
	}
	s.maxMessages = math.MaxUint64
	if c.MaxMessagesPerFile != nil {
		if *c.MaxMessagesPerFile == 0 {
			return bad(FieldMaxMessagesPerFile, "must be at least 1")
		}
		s.maxMessages = *c.MaxMessagesPerFile
	}
	switch c.FileRotation {
	case RotationSize:
		s.maxBytes = size
	case RotationMessages:
		if c.MaxMessagesPerFile == nil {
			return bad(FieldMaxMessagesPerFile, "required with file_rotation = \"messages\"")
		}
		s.maxBytes = math.MaxUint64
	default:
		return bad(FieldFileRotation, "unknown rotation %q (want size or messages)", c.FileRotation)
	}
	s.maxAttempts = DefaultMaxAttempts
	if c.MaxAttempts != nil && c.MaxRetries != nil {
		return bad(FieldMaxRetries, "is an alias of max_attempts: set one of them")
	}
	if n := c.MaxAttempts; n != nil || c.MaxRetries != nil {
		if n == nil {
			n = c.MaxRetries
		}
		if *n == 0 || *n > 1000 {
			return bad(FieldMaxAttempts, "must be between 1 and 1000")
		}
		s.maxAttempts = int(*n)
	}
	if s.retryDelay, err = sdk.ParseDuration(c.RetryDelay); err != nil || s.retryDelay <= 0 {
		return bad(FieldRetryDelay, "%q: want a positive duration like \"1s\"", c.RetryDelay)
	}
	if s.flushInterval, err = sdk.ParseDuration(c.FlushInterval); err != nil || s.flushInterval <= 0 {
		return bad(FieldFlushInterval, "%q: want a positive duration like \"10s\"", c.FlushInterval)
	}
	if s.maxBuffered, err = parseSize(c.MaxBufferedBytes); err != nil || s.maxBuffered == 0 {
		return bad(FieldMaxBufferedBytes, "%q: want a size like \"64MiB\"", c.MaxBufferedBytes)
	}
	if s.partSize, err = parseSize(c.PartSize); err != nil || s.partSize < minPartSize || s.partSize > maxSinglePut {
		return bad(FieldPartSize, "%q: want a size from 5MiB (S3's smallest part) to 5GiB", c.PartSize)
	}
	s.pathStyle = c.Endpoint != ""
	if c.PathStyle != nil {
		s.pathStyle = *c.PathStyle
	}
	if _, err := newTemplate(c.PathTemplate); err != nil {
		return bad(FieldPathTemplate, "%v", err)
	}
	if err := checkColumns(c.Columns, s.format); err != nil {
		return s, err
	}
	return s, nil
}

// sizeUnits are the suffixes parseSize accepts, longest first so "MiB" wins over "B".
var sizeUnits = []struct {
	suffix string
	mult   uint64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"b", 1},
}

// parseSize reads a byte size as upstream does: a number with an optional unit, decimal
// (KB, MB, GB) or binary (KiB, MiB, GiB), case-insensitive, spaces allowed between.
func parseSize(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a size (want e.g. 8MiB, 10MB or 1048576)", s)
	}
	total := v * float64(mult)
	if total >= math.MaxUint64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return uint64(total), nil
}
