package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/ferryio/ferry/connect/transform"
	"github.com/ferryio/ferry/sdk"
)

// The decode targets: pointers tell "absent" from "zero" so required fields and defaults
// can be checked with the key's line.
type rawCommon struct {
	Type               string         `toml:"type"`
	Key                *string        `toml:"key"`
	Enabled            *bool          `toml:"enabled"`
	Version            *uint64        `toml:"version"`
	Name               *string        `toml:"name"`
	Path               *string        `toml:"path"`
	PluginConfigFormat *string        `toml:"plugin_config_format"`
	PluginConfig       any            `toml:"plugin_config"`
	Verbose            bool           `toml:"verbose"`
	Benchmark          bool           `toml:"benchmark"`
	Transforms         map[string]any `toml:"transforms"`
	Restart            struct {
		MaxRestarts    *uint32 `toml:"max_restarts"`
		InitialBackoff *string `toml:"initial_backoff"`
		MaxBackoff     *string `toml:"max_backoff"`
	} `toml:"restart"`
}

// rawFailure holds on_failure, [retry] and [dead_letter], which sinks and sources share.
type rawFailure struct {
	OnFailure *string `toml:"on_failure"`
	Retry     struct {
		MaxRetries     *uint32 `toml:"max_retries"`
		InitialBackoff *string `toml:"initial_backoff"`
		MaxBackoff     *string `toml:"max_backoff"`
	} `toml:"retry"`
	DeadLetter struct {
		Stream *string `toml:"stream"`
		Topic  *string `toml:"topic"`
	} `toml:"dead_letter"`
}

type rawSinkStream struct {
	Stream         *string   `toml:"stream"`
	Topics         *[]string `toml:"topics"`
	Schema         *string   `toml:"schema"`
	AvroSchemaJSON *string   `toml:"avro_schema_json"`
	AvroSchemaPath *string   `toml:"avro_schema_path"`
	BatchLength    *uint32   `toml:"batch_length"`
	PollInterval   *string   `toml:"poll_interval"`
	ConsumerGroup  *string   `toml:"consumer_group"`
}

type rawSink struct {
	rawCommon
	rawFailure
	Streams         []rawSinkStream `toml:"streams"`
	OffsetCommit    *string         `toml:"offset_commit"`
	ShutdownTimeout *string         `toml:"shutdown_timeout"`
	MaxInFlight     *uint32         `toml:"max_in_flight"`
	Commit          struct {
		Interval       *string `toml:"interval"`
		Delay          *string `toml:"delay"`
		MaxUncommitted *uint64 `toml:"max_uncommitted"`
	} `toml:"commit"`
}

type rawSourceStream struct {
	Stream         *string `toml:"stream"`
	Topic          *string `toml:"topic"`
	Schema         *string `toml:"schema"`
	AvroSchemaJSON *string `toml:"avro_schema_json"`
	AvroSchemaPath *string `toml:"avro_schema_path"`
	BatchLength    *uint32 `toml:"batch_length"`
	LingerTime     *string `toml:"linger_time"`
}

type rawSource struct {
	rawCommon
	rawFailure
	Streams     []rawSourceStream `toml:"streams"`
	MaxInFlight *uint32           `toml:"max_in_flight"`
}

// ConnectorType is the `type` of a connector file.
type ConnectorType string

// Connector types.
const (
	TypeSink   ConnectorType = "sink"
	TypeSource ConnectorType = "source"
)

// header is what a connector file is first read for: what it configures. A file whose
// header cannot be read cannot be attributed to a connector.
type header struct {
	Type    ConnectorType
	Key     string
	Version uint64
	Enabled bool   // false only when the file says enabled = false
	Name    string // name and path when they are strings (for a connector that does not load)
	Path    string
}

// readHeader reads type, key and version of a connector file.
func readHeader(file string, data []byte) (header, *docIndex, error) {
	idx, err := indexDocument(data)
	if err != nil {
		return header{}, nil, tomlError(file, &docIndex{}, err)
	}
	loc := &locator{file: file, idx: idx}
	var h struct {
		Type    *string `toml:"type"`
		Key     *string `toml:"key"`
		Version *uint64 `toml:"version"`
		Enabled any     `toml:"enabled"` // their types are checked with the rest of the file
		Name    any     `toml:"name"`
		Path    any     `toml:"path"`
	}
	if err := toml.Unmarshal(data, &h); err != nil {
		return header{}, nil, tomlError(file, idx, err)
	}
	if h.Type == nil {
		return header{}, nil, loc.errorf("type", nil, "required (sink or source)")
	}
	if t := ConnectorType(*h.Type); t != TypeSink && t != TypeSource {
		return header{}, nil, loc.errorf("type", nil, "unknown value %q (want sink or source)", *h.Type)
	}
	if h.Key == nil {
		return header{}, nil, loc.errorf("key", nil, "required")
	}
	out := header{Type: ConnectorType(*h.Type), Key: *h.Key, Enabled: h.Enabled != false}
	out.Name, _ = h.Name.(string)
	out.Path, _ = h.Path.(string)
	if h.Version != nil {
		out.Version = *h.Version
	}
	return out, idx, nil
}

// ParseSinkFile reads one sink connector file with environment overrides from env ("K=V"
// entries; nil for none), applies defaults and validates it. Errors are *Error values.
func ParseSinkFile(path string, env []string) (*Sink, error) {
	c, err := parseConnectorFile(path, env)
	if err != nil {
		return nil, err
	}
	s, ok := c.(*Sink)
	if !ok {
		return nil, &Error{File: path, Key: "type", Line: 1, Msg: "want a sink, this file is a source"}
	}
	return s, nil
}

// ParseSourceFile reads one source connector file; see [ParseSinkFile].
func ParseSourceFile(path string, env []string) (*Source, error) {
	c, err := parseConnectorFile(path, env)
	if err != nil {
		return nil, err
	}
	s, ok := c.(*Source)
	if !ok {
		return nil, &Error{File: path, Key: "type", Line: 1, Msg: "want a source, this file is a sink"}
	}
	return s, nil
}

// parseConnectorFile returns a *Sink or a *Source.
func parseConnectorFile(path string, env []string) (any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read connector file", Err: err}
	}
	return ParseConnectorData(path, data, env)
}

// ParseConnectorData parses data as the connector file path; see parseConnectorFile.
func ParseConnectorData(path string, data []byte, env []string) (any, error) {
	h, idx, err := readHeader(path, data)
	if err != nil {
		return nil, err
	}
	return parseBody(path, data, env, h, idx)
}

// parseBody parses the connector file path whose header readHeader read: every error it
// returns is one connector's (h names it).
func parseBody(path string, data []byte, env []string, h header, idx *docIndex) (any, error) {
	loc := &locator{file: path, idx: idx, env: map[string]string{}}
	prefix := EnvPrefix + strings.ToUpper(string(h.Type)) + "_" + strings.ToUpper(h.Key) + "_"
	em := envMap(env)
	if h.Type == TypeSink {
		var raw rawSink
		if err := decodeStrict(data, &raw); err != nil {
			return nil, tomlError(path, idx, err)
		}
		w, err := applyConnectorEnv(reflect.ValueOf(&raw).Elem(), &raw.rawCommon, prefix, em, loc)
		if err != nil {
			return nil, err
		}
		s, err := raw.build(loc)
		if err != nil {
			return nil, err
		}
		s.Warnings = w
		return s, s.validate(loc)
	}
	var raw rawSource
	if err := decodeStrict(data, &raw); err != nil {
		return nil, tomlError(path, idx, err)
	}
	w, err := applyConnectorEnv(reflect.ValueOf(&raw).Elem(), &raw.rawCommon, prefix, em, loc)
	if err != nil {
		return nil, err
	}
	s, err := raw.build(loc)
	if err != nil {
		return nil, err
	}
	s.Warnings = w
	return s, s.validate(loc)
}

// applyConnectorEnv applies IGGY_CONNECTORS_<SINK|SOURCE>_<KEY>_* variables to root (a
// rawSink or rawSource). Any STREAMS_<i>_* variable replaces the file's streams whole, as
// upstream (figment merge replaces arrays).
func applyConnectorEnv(root reflect.Value, common *rawCommon, prefix string, em map[string]string, loc *locator) ([]string, error) {
	fields := map[string]envField{}
	for _, f := range envFields(root.Type()) {
		fields[f.name] = f
	}
	streams := root.FieldByName("Streams")
	elemFields := map[string]envField{}
	for _, f := range envFields(streams.Type().Elem()) {
		elemFields[f.name] = f
	}
	type streamVar struct {
		i    int
		f    envField
		name string
		val  string
	}
	var svars []streamVar
	var warnings []string
	maxIdx := -1
	for _, name := range sortedKeys(em) {
		val := em[name]
		upper := strings.ToUpper(name)
		if !strings.HasPrefix(upper, prefix) || val == "" {
			continue
		}
		rest := upper[len(prefix):]
		if f, ok := fields[rest]; ok {
			if err := setEnvField(root, f.index, val, false); err != nil {
				return nil, &Error{File: loc.file, Key: f.path, Env: name, Msg: err.Error()}
			}
			loc.env[f.path] = name
			continue
		}
		if field, ok := strings.CutPrefix(rest, "PLUGIN_CONFIG_"); ok {
			m, isMap := common.PluginConfig.(map[string]any)
			if common.PluginConfig == nil {
				m, isMap = map[string]any{}, true
				common.PluginConfig = m
			}
			if !isMap {
				warnings = append(warnings, name+" ignored: plugin_config is not a table")
				continue
			}
			m[strings.ToLower(field)] = typeEnvValue(val)
			continue
		}
		if s, ok := strings.CutPrefix(rest, "STREAMS_"); ok {
			num, fname, _ := strings.Cut(s, "_")
			i, err := strconv.Atoi(num)
			f, known := elemFields[fname]
			if err != nil || i < 0 || i > 255 || !known {
				warnings = append(warnings, "unknown environment variable "+name+" ignored")
				continue
			}
			svars = append(svars, streamVar{i, f, name, val})
			maxIdx = max(maxIdx, i)
			continue
		}
		warnings = append(warnings, "unknown environment variable "+name+" ignored")
	}
	if maxIdx >= 0 {
		streams.Set(reflect.MakeSlice(streams.Type(), maxIdx+1, maxIdx+1))
		loc.envStreams = prefix + "STREAMS_"
		for _, v := range svars {
			path := fmt.Sprintf("streams[%d].%s", v.i, v.f.path)
			if err := setEnvField(streams.Index(v.i), v.f.index, v.val, false); err != nil {
				return nil, &Error{File: loc.file, Key: path, Env: v.name, Msg: err.Error()}
			}
			loc.env[path] = v.name
		}
	}
	return warnings, nil
}

func (r *rawCommon) build(loc *locator) (Common, error) {
	c := Common{File: loc.file, Verbose: r.Verbose, Benchmark: r.Benchmark, PluginKeys: loc.pluginKeys()}
	for _, req := range []struct {
		key string
		ok  bool
	}{{"key", r.Key != nil}, {"enabled", r.Enabled != nil}, {"version", r.Version != nil}, {"name", r.Name != nil}, {"path", r.Path != nil}} {
		if !req.ok {
			return c, loc.errorf(req.key, nil, "required key missing")
		}
	}
	c.Key, c.Enabled, c.Version, c.Name, c.Path = *r.Key, *r.Enabled, *r.Version, *r.Name, *r.Path
	if r.PluginConfigFormat != nil {
		c.PluginConfigFormat = *r.PluginConfigFormat
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.PluginConfig); err != nil {
		return c, loc.errorf("plugin_config", err, "cannot convert to JSON: %v", err)
	}
	c.PluginConfig = bytes.TrimRight(buf.Bytes(), "\n")
	c.Restart.MaxRestarts = or(r.Restart.MaxRestarts, DefaultMaxRestarts)
	var err error
	if c.Restart.InitialBackoff, err = durationOr(loc, "restart.initial_backoff", r.Restart.InitialBackoff, DefaultRestartInitialBackoff); err != nil {
		return c, err
	}
	if c.Restart.MaxBackoff, err = durationOr(loc, "restart.max_backoff", r.Restart.MaxBackoff, DefaultRestartMaxBackoff); err != nil {
		return c, err
	}
	// File order (a deliberate difference: upstream runs them in a hash map's order).
	types := sortedKeys(r.Transforms)
	sort.SliceStable(types, func(i, j int) bool {
		return loc.lineFor("transforms."+types[i]) < loc.lineFor("transforms."+types[j])
	})
	specs := make([]transform.Spec, 0, len(types))
	for _, typ := range types {
		path := "transforms." + typ
		if !knownTransforms[typ] {
			return c, loc.errorf(path, nil, "unknown transform (want one of %s)", strings.Join(sortedKeys(knownTransforms), ", "))
		}
		tbl, ok := r.Transforms[typ].(map[string]any)
		if !ok {
			return c, loc.errorf(path, nil, "must be a table")
		}
		en, ok := tbl["enabled"].(bool)
		if _, present := tbl["enabled"]; !present {
			return c, loc.errorf(path+".enabled", nil, "required key missing")
		} else if !ok {
			return c, loc.errorf(path+".enabled", nil, "want true or false")
		}
		c.Transforms = append(c.Transforms, Transform{Type: typ, Enabled: en, Config: tbl})
		specs = append(specs, transform.Spec{Type: typ, Enabled: en, Table: tbl})
	}
	if _, err := transform.Build(specs); err != nil {
		var ce *transform.ConfigError
		if errors.As(err, &ce) {
			return c, loc.errorf(ce.Path, err, "%s", ce.Msg)
		}
		return c, loc.errorf("transforms", err, "%v", err)
	}
	return c, nil
}

var knownTransforms = map[string]bool{
	"add_fields": true, "update_fields": true, "delete_fields": true, "filter_fields": true,
	"unwrap_envelope": true, "proto_convert": true, "flat_buffer_convert": true, "avro_convert": true,
}

// durationOr parses *text at path, or returns def when absent.
func durationOr(loc *locator, path string, text *string, def time.Duration) (time.Duration, error) {
	if text == nil {
		return def, nil
	}
	d, err := sdk.ParseDuration(*text)
	if err != nil {
		return 0, loc.errorf(path, err, "%v", err)
	}
	return d, nil
}

// upstreamWords puts words upstream's runtime reports for the same mistake before an
// *Error's message: users of Iggy's runtime match on them in a connector's last_error.
func upstreamWords(err error, words string) error {
	var e *Error
	if errors.As(err, &e) {
		e.Msg = words + ": " + e.Msg
	}
	return err
}

func or[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// required is one required key of a table and whether the file set it.
type required struct {
	key     string
	present bool
}

// requireKeys returns the error naming prefix+key for the first required key missing.
func requireKeys(loc *locator, prefix string, keys ...required) error {
	for _, k := range keys {
		if !k.present {
			return loc.errorf(prefix+k.key, nil, "required key missing")
		}
	}
	return nil
}

// build applies the defaults of on_failure (stop), [retry] and [dead_letter].
func (r *rawFailure) build(loc *locator) (FailurePolicy, Retry, DeadLetter, error) {
	p := FailurePolicy(or(r.OnFailure, string(FailureStop)))
	dl := DeadLetter{Stream: or(r.DeadLetter.Stream, ""), Topic: or(r.DeadLetter.Topic, "")}
	rt := Retry{MaxRetries: or(r.Retry.MaxRetries, DefaultMaxRetries)}
	var err error
	if rt.InitialBackoff, err = durationOr(loc, "retry.initial_backoff", r.Retry.InitialBackoff, DefaultInitialBackoff); err != nil {
		return p, rt, dl, err
	}
	if rt.MaxBackoff, err = durationOr(loc, "retry.max_backoff", r.Retry.MaxBackoff, DefaultMaxBackoff); err != nil {
		return p, rt, dl, err
	}
	return p, rt, dl, nil
}

func (r *rawSink) build(loc *locator) (*Sink, error) {
	c, err := r.rawCommon.build(loc)
	if err != nil {
		return nil, err
	}
	s := &Sink{Common: c}
	for i, rs := range r.Streams {
		p := fmt.Sprintf("streams[%d].", i)
		if err := requireKeys(loc, p, required{"stream", rs.Stream != nil}, required{"topics", rs.Topics != nil}, required{"schema", rs.Schema != nil}); err != nil {
			return nil, err
		}
		st := SinkStream{
			Stream: *rs.Stream, Topics: *rs.Topics, Schema: sdk.Schema(*rs.Schema),
			AvroSchemaJSON: or(rs.AvroSchemaJSON, ""), AvroSchemaPath: or(rs.AvroSchemaPath, ""),
			BatchLength: or(rs.BatchLength, DefaultBatchLength), ConsumerGroup: or(rs.ConsumerGroup, DefaultConsumerGroup(c.Key)),
		}
		if st.PollInterval, err = durationOr(loc, p+"poll_interval", rs.PollInterval, DefaultPollInterval); err != nil {
			return nil, upstreamWords(err, "Invalid poll interval")
		}
		if sc, err := sdk.ParseSchema(string(st.Schema)); err == nil {
			st.Schema = sc
		}
		s.Streams = append(s.Streams, st)
	}
	s.OffsetCommit = CommitMode(or(r.OffsetCommit, string(CommitAfterPolling)))
	s.OffsetCommitUnset = r.OffsetCommit == nil
	if s.OffsetCommit == "auto" {
		s.OffsetCommit = CommitAfterPolling
	}
	if s.OnFailure, s.Retry, s.DeadLetter, err = r.rawFailure.build(loc); err != nil {
		return nil, err
	}
	s.Commit.MaxUncommitted = or(r.Commit.MaxUncommitted, DefaultMaxUncommitted)
	if s.MaxInFlight = or(r.MaxInFlight, 0); r.MaxInFlight != nil && s.MaxInFlight == 0 {
		return nil, loc.errorf("max_in_flight", nil, "must be between 1 and %d", MaxMaxInFlight)
	}
	for _, d := range []struct {
		path string
		text *string
		def  time.Duration
		dst  *time.Duration
	}{
		{"commit.interval", r.Commit.Interval, DefaultCommitInterval, &s.Commit.Interval},
		{"commit.delay", r.Commit.Delay, DefaultCommitDelay, &s.Commit.Delay},
		{"shutdown_timeout", r.ShutdownTimeout, DefaultShutdownTimeout, &s.ShutdownTimeout},
	} {
		if *d.dst, err = durationOr(loc, d.path, d.text, d.def); err != nil {
			return nil, err
		}
	}
	s.Commit.DelaySet = r.Commit.Delay != nil
	return s, nil
}

func (r *rawSource) build(loc *locator) (*Source, error) {
	c, err := r.rawCommon.build(loc)
	if err != nil {
		return nil, err
	}
	s := &Source{Common: c}
	for i, rs := range r.Streams {
		p := fmt.Sprintf("streams[%d].", i)
		if err := requireKeys(loc, p, required{"stream", rs.Stream != nil}, required{"topic", rs.Topic != nil}, required{"schema", rs.Schema != nil}); err != nil {
			return nil, err
		}
		st := SourceStream{
			Stream: *rs.Stream, Topic: *rs.Topic, Schema: sdk.Schema(*rs.Schema),
			AvroSchemaJSON: or(rs.AvroSchemaJSON, ""), AvroSchemaPath: or(rs.AvroSchemaPath, ""),
			BatchLength: or(rs.BatchLength, DefaultBatchLength),
		}
		if st.LingerTime, err = durationOr(loc, p+"linger_time", rs.LingerTime, DefaultLingerTime); err != nil {
			return nil, upstreamWords(err, "Invalid linger time")
		}
		if sc, err := sdk.ParseSchema(string(st.Schema)); err == nil {
			st.Schema = sc
		}
		s.Streams = append(s.Streams, st)
	}
	if s.OnFailure, s.Retry, s.DeadLetter, err = r.rawFailure.build(loc); err != nil {
		return nil, err
	}
	if s.MaxInFlight = or(r.MaxInFlight, 0); r.MaxInFlight != nil && s.MaxInFlight == 0 {
		return nil, loc.errorf("max_in_flight", nil, "must be between 1 and %d", MaxMaxInFlight)
	}
	return s, nil
}
