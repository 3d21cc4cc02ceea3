package httpapi

// This file is where the API meets connect/config's provider API: the sentinels a
// ConfigStore's errors are matched against, and the renderers of connector configs.
// connect/config's LocalProvider, its sentinels (ErrConfigNotFound, ErrInvalidConfig,
// ErrNoPluginConfig) and renderers (SinkJSON, SourceJSON, RenderPluginConfig) are being
// written alongside this package; until they are merged, the stand-ins below keep the
// API working, and binding them is a change of this file only.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// The ConfigStore's errors, matched with errors.Is.
var (
	errConfigNotFound = errors.New("config not found")               // config.ErrConfigNotFound
	errInvalidConfig  = errors.New("invalid connector config")       // config.ErrInvalidConfig
	errNoPluginConfig = errors.New("connector has no plugin_config") // config.ErrNoPluginConfig
)

// renderSink renders a sink config as Iggy's SinkConfig JSON object, with secret-looking
// plugin_config values redacted (config.SinkJSON).
func renderSink(s *config.Sink) ([]byte, error) {
	return json.Marshal(struct {
		commonJSON
		Streams      []sinkStreamJSON `json:"streams"`
		OffsetCommit string           `json:"offset_commit"`
	}{commonJSONOf(&s.Common), sinkStreams(s.Streams), string(s.OffsetCommit)})
}

// renderSource renders a source config as Iggy's SourceConfig JSON object, redacted
// (config.SourceJSON).
func renderSource(s *config.Source) ([]byte, error) {
	return json.Marshal(struct {
		commonJSON
		Streams []sourceStreamJSON `json:"streams"`
	}{commonJSONOf(&s.Common), sourceStreams(s.Streams)})
}

// renderPluginConfig renders c's plugin_config, redacted, in format (json, yaml, toml,
// text; "" = the connector's plugin_config_format, else toml) with its Content-Type
// (config.RenderPluginConfig). errNoPluginConfig when there is none.
func renderPluginConfig(c *config.Common, format string) ([]byte, string, error) {
	if len(c.PluginConfig) == 0 || string(c.PluginConfig) == "null" {
		return nil, "", errNoPluginConfig
	}
	if format == "" {
		format = c.PluginConfigFormat
	}
	redacted := []byte(c.RedactedPluginConfig())
	switch format {
	case "json":
		return redacted, "application/json", nil
	case "text":
		return redacted, "text/plain", nil
	case "yaml":
		// JSON is YAML (1.2): a faithful rendering until config's YAML writer lands.
		return redacted, "application/yaml", nil
	case "", "toml":
		dec := json.NewDecoder(bytes.NewReader(redacted))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, "", err
		}
		v = tomlNumbers(v)
		if _, ok := v.(map[string]any); !ok {
			return nil, "", fmt.Errorf("plugin_config is not a table: %w", errInvalidConfig)
		}
		b, err := toml.Marshal(v)
		if err != nil {
			return nil, "", err
		}
		return b, "application/toml", nil
	}
	return nil, "", fmt.Errorf("unknown format %q: %w", format, errInvalidConfig)
}

// tomlNumbers turns the json.Numbers of a decoded tree into int64 (integers) or float64,
// so integers render as TOML integers.
func tomlNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = tomlNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = tomlNumbers(e)
		}
	}
	return v
}

// commonJSON is the part of SinkConfig and SourceConfig both have.
type commonJSON struct {
	Key                string                    `json:"key"`
	Enabled            bool                      `json:"enabled"`
	Version            uint64                    `json:"version"`
	Name               string                    `json:"name"`
	Path               string                    `json:"path"`
	Transforms         map[string]map[string]any `json:"transforms"`
	PluginConfigFormat *string                   `json:"plugin_config_format"`
	PluginConfig       json.RawMessage           `json:"plugin_config"`
	Verbose            bool                      `json:"verbose"`
	Benchmark          bool                      `json:"benchmark"`
}

func commonJSONOf(c *config.Common) commonJSON {
	out := commonJSON{Key: c.Key, Enabled: c.Enabled, Version: c.Version, Name: c.Name, Path: c.Path,
		Verbose: c.Verbose, Benchmark: c.Benchmark, PluginConfig: json.RawMessage("null")}
	if len(c.Transforms) > 0 {
		out.Transforms = make(map[string]map[string]any, len(c.Transforms))
		for _, t := range c.Transforms {
			out.Transforms[t.Type] = t.Config
		}
	}
	if c.PluginConfigFormat != "" {
		f := c.PluginConfigFormat
		out.PluginConfigFormat = &f
	}
	if len(c.PluginConfig) > 0 {
		out.PluginConfig = json.RawMessage(c.RedactedPluginConfig())
	}
	return out
}

// sinkStreamJSON is Iggy's StreamConsumerConfig.
type sinkStreamJSON struct {
	Stream         string   `json:"stream"`
	Topics         []string `json:"topics"`
	Schema         string   `json:"schema"`
	AvroSchemaJSON *string  `json:"avro_schema_json"`
	AvroSchemaPath *string  `json:"avro_schema_path"`
	BatchLength    uint32   `json:"batch_length"`
	PollInterval   string   `json:"poll_interval"`
	ConsumerGroup  string   `json:"consumer_group"`
}

// sourceStreamJSON is Iggy's StreamProducerConfig.
type sourceStreamJSON struct {
	Stream         string  `json:"stream"`
	Topic          string  `json:"topic"`
	Schema         string  `json:"schema"`
	AvroSchemaJSON *string `json:"avro_schema_json"`
	AvroSchemaPath *string `json:"avro_schema_path"`
	BatchLength    uint32  `json:"batch_length"`
	LingerTime     string  `json:"linger_time"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func sinkStreams(in []config.SinkStream) []sinkStreamJSON {
	out := make([]sinkStreamJSON, 0, len(in))
	for _, st := range in {
		topics := st.Topics
		if topics == nil {
			topics = []string{}
		}
		out = append(out, sinkStreamJSON{Stream: st.Stream, Topics: topics, Schema: string(st.Schema),
			AvroSchemaJSON: optional(st.AvroSchemaJSON), AvroSchemaPath: optional(st.AvroSchemaPath),
			BatchLength: st.BatchLength, PollInterval: sdk.FormatDuration(st.PollInterval), ConsumerGroup: st.ConsumerGroup})
	}
	return out
}

func sourceStreams(in []config.SourceStream) []sourceStreamJSON {
	out := make([]sourceStreamJSON, 0, len(in))
	for _, st := range in {
		out = append(out, sourceStreamJSON{Stream: st.Stream, Topic: st.Topic, Schema: string(st.Schema),
			AvroSchemaJSON: optional(st.AvroSchemaJSON), AvroSchemaPath: optional(st.AvroSchemaPath),
			BatchLength: st.BatchLength, LingerTime: sdk.FormatDuration(st.LingerTime)})
	}
	return out
}
