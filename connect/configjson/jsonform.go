package configjson

import (
	"encoding/json"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// SinkConfigJSON is a sink config in the JSON form of the HTTP API: the keys of Iggy's
// SinkConfig (with offset_commit, which upstream added later) followed by Ferry's keys, which
// upstream clients ignore. Build it with [SinkJSON]; [provider.Local.CreateSink] accepts it as
// a request body. The API adds "active" by embedding it.
//
// Unlike upstream, which echoes the optional stream keys as written (null when absent),
// batch_length, poll_interval and consumer_group carry the values in effect, defaults
// included.
type SinkConfigJSON struct {
	Key     string `json:"key"`
	Enabled bool   `json:"enabled"`
	Version uint64 `json:"version"`
	Name    string `json:"name"`
	Path    string `json:"path"`
	// Transforms maps each transform type to its whole table; nil (null) when there is none.
	Transforms map[string]any   `json:"transforms"`
	Streams    []SinkStreamJSON `json:"streams"`
	// PluginConfigFormat is nil (null) when the file names none.
	PluginConfigFormat *string `json:"plugin_config_format"`
	// PluginConfig is the plugin config with secrets redacted ([config.RedactSecrets]); nil (null)
	// when absent.
	PluginConfig    json.RawMessage      `json:"plugin_config"`
	Verbose         bool                 `json:"verbose"`
	Benchmark       bool                 `json:"benchmark"`
	OffsetCommit    config.CommitMode    `json:"offset_commit"`
	OnFailure       config.FailurePolicy `json:"on_failure"`
	Retry           RetryJSON            `json:"retry"`
	DeadLetter      *DeadLetterJSON      `json:"dead_letter"` // nil (null) when neither key is set
	Commit          CommitJSON           `json:"commit"`
	ShutdownTimeout string               `json:"shutdown_timeout"`
	MaxInFlight     *uint32              `json:"max_in_flight"` // nil (null) when the file leaves it to the runtime's default
	Restart         RestartJSON          `json:"restart"`
}

// SinkStreamJSON is upstream's StreamConsumerConfig: one entry of a sink's streams.
type SinkStreamJSON struct {
	Stream         string     `json:"stream"`
	Topics         []string   `json:"topics"`
	Schema         sdk.Schema `json:"schema"`
	AvroSchemaJSON *string    `json:"avro_schema_json"` // nil (null) when unset
	AvroSchemaPath *string    `json:"avro_schema_path"` // nil (null) when unset
	BatchLength    uint32     `json:"batch_length"`
	PollInterval   string     `json:"poll_interval"` // e.g. "5ms"
	ConsumerGroup  string     `json:"consumer_group"`
}

// SourceConfigJSON is a source config in the JSON form of the HTTP API: the keys of Iggy's
// SourceConfig followed by Ferry's keys. Build it with [SourceJSON]; see [SinkConfigJSON].
type SourceConfigJSON struct {
	Key                string               `json:"key"`
	Enabled            bool                 `json:"enabled"`
	Version            uint64               `json:"version"`
	Name               string               `json:"name"`
	Path               string               `json:"path"`
	Transforms         map[string]any       `json:"transforms"`
	Streams            []SourceStreamJSON   `json:"streams"`
	PluginConfigFormat *string              `json:"plugin_config_format"`
	PluginConfig       json.RawMessage      `json:"plugin_config"`
	Verbose            bool                 `json:"verbose"`
	Benchmark          bool                 `json:"benchmark"`
	OnFailure          config.FailurePolicy `json:"on_failure"`
	Retry              RetryJSON            `json:"retry"`
	DeadLetter         *DeadLetterJSON      `json:"dead_letter"`
	MaxInFlight        *uint32              `json:"max_in_flight"` // nil (null): the runtime's default
	Restart            RestartJSON          `json:"restart"`
}

// SourceStreamJSON is upstream's StreamProducerConfig: one entry of a source's streams.
type SourceStreamJSON struct {
	Stream         string     `json:"stream"`
	Topic          string     `json:"topic"`
	Schema         sdk.Schema `json:"schema"`
	AvroSchemaJSON *string    `json:"avro_schema_json"`
	AvroSchemaPath *string    `json:"avro_schema_path"`
	BatchLength    uint32     `json:"batch_length"`
	LingerTime     string     `json:"linger_time"`
}

// RetryJSON is the [retry] table; durations as in the file, e.g. "100ms".
type RetryJSON struct {
	MaxRetries     uint32 `json:"max_retries"`
	InitialBackoff string `json:"initial_backoff"`
	MaxBackoff     string `json:"max_backoff"`
}

// DeadLetterJSON is the [dead_letter] table; an unset key is nil (null).
type DeadLetterJSON struct {
	Stream *string `json:"stream"`
	Topic  *string `json:"topic"`
}

// CommitJSON is a sink's [commit] table.
type CommitJSON struct {
	Interval       string `json:"interval"`
	Delay          string `json:"delay,omitempty"` // only when the file sets it: unset, a position keeper's default applies
	MaxUncommitted uint64 `json:"max_uncommitted"`
}

// RestartJSON is the [restart] table.
type RestartJSON struct {
	MaxRestarts    uint32 `json:"max_restarts"`
	InitialBackoff string `json:"initial_backoff"`
	MaxBackoff     string `json:"max_backoff"`
}

// SinkJSON returns the JSON form of s, with plugin_config secrets redacted. Durations are
// written as [sdk.FormatDuration] does ("5ms", "1m 30s"), which the files' parser reads back.
func SinkJSON(s *config.Sink) SinkConfigJSON {
	out := SinkConfigJSON{
		Key: s.Key, Enabled: s.Enabled, Version: s.Version, Name: s.Name, Path: s.Path,
		Transforms: transformsJSON(s.Transforms), Streams: []SinkStreamJSON{},
		PluginConfigFormat: optString(s.PluginConfigFormat), PluginConfig: pluginConfigJSON(s.PluginConfig),
		Verbose: s.Verbose, Benchmark: s.Benchmark, OffsetCommit: s.OffsetCommit, OnFailure: s.OnFailure,
		Retry: retryJSON(s.Retry), DeadLetter: deadLetterJSON(s.DeadLetter),
		Commit:          CommitJSON{Interval: sdk.FormatDuration(s.Commit.Interval), MaxUncommitted: s.Commit.MaxUncommitted},
		ShutdownTimeout: sdk.FormatDuration(s.ShutdownTimeout), MaxInFlight: inFlightJSON(s.MaxInFlight), Restart: restartJSON(s.Restart),
	}
	if s.Commit.DelaySet {
		out.Commit.Delay = sdk.FormatDuration(s.Commit.Delay)
	}
	for _, st := range s.Streams {
		topics := st.Topics
		if topics == nil {
			topics = []string{}
		}
		out.Streams = append(out.Streams, SinkStreamJSON{
			Stream: st.Stream, Topics: topics, Schema: st.Schema,
			AvroSchemaJSON: optString(st.AvroSchemaJSON), AvroSchemaPath: optString(st.AvroSchemaPath),
			BatchLength: st.BatchLength, PollInterval: sdk.FormatDuration(st.PollInterval), ConsumerGroup: st.ConsumerGroup,
		})
	}
	return out
}

// SourceJSON returns the JSON form of s, with plugin_config secrets redacted; see [SinkJSON].
func SourceJSON(s *config.Source) SourceConfigJSON {
	out := SourceConfigJSON{
		Key: s.Key, Enabled: s.Enabled, Version: s.Version, Name: s.Name, Path: s.Path,
		Transforms: transformsJSON(s.Transforms), Streams: []SourceStreamJSON{},
		PluginConfigFormat: optString(s.PluginConfigFormat), PluginConfig: pluginConfigJSON(s.PluginConfig),
		Verbose: s.Verbose, Benchmark: s.Benchmark, OnFailure: s.OnFailure,
		Retry: retryJSON(s.Retry), DeadLetter: deadLetterJSON(s.DeadLetter), MaxInFlight: inFlightJSON(s.MaxInFlight),
		Restart: restartJSON(s.Restart),
	}
	for _, st := range s.Streams {
		out.Streams = append(out.Streams, SourceStreamJSON{
			Stream: st.Stream, Topic: st.Topic, Schema: st.Schema,
			AvroSchemaJSON: optString(st.AvroSchemaJSON), AvroSchemaPath: optString(st.AvroSchemaPath),
			BatchLength: st.BatchLength, LingerTime: sdk.FormatDuration(st.LingerTime),
		})
	}
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func transformsJSON(ts []config.Transform) map[string]any {
	if len(ts) == 0 {
		return nil
	}
	m := make(map[string]any, len(ts))
	for _, t := range ts {
		m[t.Type] = t.Config
	}
	return m
}

// pluginConfigJSON is PluginConfig redacted; nil (null) when absent or not JSON.
func pluginConfigJSON(pc []byte) json.RawMessage {
	b, ok := config.RedactJSON(pc)
	if !ok || string(b) == "null" {
		return nil
	}
	return b
}

func retryJSON(r config.Retry) RetryJSON {
	return RetryJSON{MaxRetries: r.MaxRetries, InitialBackoff: sdk.FormatDuration(r.InitialBackoff), MaxBackoff: sdk.FormatDuration(r.MaxBackoff)}
}

func restartJSON(r config.RestartPolicy) RestartJSON {
	return RestartJSON{MaxRestarts: r.MaxRestarts, InitialBackoff: sdk.FormatDuration(r.InitialBackoff), MaxBackoff: sdk.FormatDuration(r.MaxBackoff)}
}

func deadLetterJSON(d config.DeadLetter) *DeadLetterJSON {
	if d == (config.DeadLetter{}) {
		return nil
	}
	return &DeadLetterJSON{Stream: optString(d.Stream), Topic: optString(d.Topic)}
}

// inFlightJSON is max_in_flight in the JSON form: nil (null) for 0, a file that leaves it to
// the runtime's default, which a create body's null means too.
func inFlightJSON(n uint32) *uint32 {
	if n == 0 {
		return nil
	}
	return &n
}
