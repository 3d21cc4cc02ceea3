package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// CommitMode is a sink's offset_commit: when its consumed offsets are stored.
type CommitMode string

// Commit modes. "auto" in a file is read as CommitAfterPolling.
const (
	CommitAfterPolling   CommitMode = "after_polling"
	CommitAfterConsuming CommitMode = "after_consuming"
	CommitSinkControlled CommitMode = "sink_controlled"
)

// FailurePolicy is a connector's on_failure: what happens to a batch whose retries ran out
// (a sink's batch that the plugin failed to consume, a source's batch that could not be
// sent). It is the sdk's value, the one a Go sink is opened with.
type FailurePolicy = sdk.OnFailure

// Failure policies.
const (
	FailureStop       = sdk.FailureStop
	FailureDeadLetter = sdk.FailureDeadLetter
	FailureSkip       = sdk.FailureSkip
)

// Connector defaults (upstream's, and Ferry's for Ferry keys).
const (
	DefaultBatchLength    = 1000
	DefaultPollInterval   = 5 * time.Millisecond
	DefaultLingerTime     = 5 * time.Millisecond
	DefaultMaxRetries     = 3
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultCommitInterval = time.Second
	// DefaultCommitDelay is commit.delay when unset: how long a done offset (a sink's
	// commit, or a batch the runtime resolved) may wait before it is stored, so commits
	// that follow it closely share one store. It is the redelivery window after a crash.
	DefaultCommitDelay = 10 * time.Millisecond
	// DefaultKeeperCommitDelay is commit.delay when unset for a sink that keeps its own
	// positions in its target (sdk.PositionKeeper): the offset stored in Iggy then only
	// shows progress (lag, Iggy's tools), a crash redelivers nothing more for a longer
	// delay, and each store costs the server a synced write.
	DefaultKeeperCommitDelay = 100 * time.Millisecond
	// DefaultMaxUncommitted is commit.max_uncommitted when unset: messages per partition
	// delivered and not yet stored. It must cover what a sink_controlled sink receives
	// between two of its commits (a sink that commits on a 1 s timer needs rate × 1 s), or
	// the partition pauses and throughput is capped at max_uncommitted per commit period;
	// 100000 lets such a sink run at up to 100k messages/s per partition. The runtime keeps
	// offsets, not messages, for it: the limit bounds redelivery after a crash (and what a
	// sink may have buffered), not the runtime's memory.
	DefaultMaxUncommitted  = 100000
	DefaultShutdownTimeout = 10 * time.Second
	// MaxMaxInFlight bounds max_in_flight: batches in Consume at once per topic.
	MaxMaxInFlight = 1024
	// DefaultMaxRestarts is restart.max_restarts when unset (Ferry).
	DefaultMaxRestarts = 60
	// DefaultRestartInitialBackoff is restart.initial_backoff when unset (Ferry).
	DefaultRestartInitialBackoff = time.Second
	// DefaultRestartMaxBackoff is restart.max_backoff when unset (Ferry).
	DefaultRestartMaxBackoff = 5 * time.Second
	// BuiltinPrefix in a connector's path selects a built-in Go connector: "builtin:NAME".
	BuiltinPrefix = "builtin:"
)

// DefaultConsumerGroup is the consumer group of a sink stream that names none.
func DefaultConsumerGroup(key string) string { return "iggy-connect-sink-" + key }

// Transform is one `[transforms.<type>]` table; connect/transform builds and applies it.
type Transform struct {
	Type    string         // add_fields, update_fields, delete_fields, filter_fields, unwrap_envelope, proto_convert, flat_buffer_convert, avro_convert
	Enabled bool           // required in the file
	Config  map[string]any // the whole table, including enabled
}

// Common holds the fields sinks and sources share.
type Common struct {
	File    string // the file it was read from
	Key     string
	Enabled bool
	Version uint64
	Name    string
	Path    string // plugin library path, or "builtin:NAME"
	// PluginConfigFormat is json, yaml, toml, text, or "" (rendering only).
	PluginConfigFormat string
	// PluginConfig is plugin_config as compact JSON with sorted keys; "null" when absent.
	PluginConfig []byte
	Verbose      bool
	Benchmark    bool
	Transforms   []Transform   // in file order (the order they run in)
	Restart      RestartPolicy // Ferry
	// Warnings lists environment variables that were ignored.
	Warnings []string
	// PluginKeys says where each plugin_config key is written ("columns[2].type"; "" for
	// the plugin_config table itself), so an error in it names the line; nil for a config
	// not read from a file.
	PluginKeys map[string]KeyPosition
}

// KeyPosition is where a key's value comes from: a line of the file, or an environment
// variable.
type KeyPosition struct {
	Line int
	Env  string
}

// PluginConfigError turns the errors of a plugin_config check (the sdk's *FieldError
// values, joined) into *Error values naming this connector's file, each key and its line
// (a key not written: the line of the nearest table holding it), joined. nil stays nil.
func (c *Common) PluginConfigError(err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range flatten(err) {
		var fe *sdk.FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, &Error{File: c.File, Line: c.pluginLine(""), Key: "plugin_config", Msg: strings.TrimPrefix(e.Error(), "plugin_config: ")})
			continue
		}
		out := &Error{File: c.File, Key: "plugin_config." + fe.Field, Msg: fe.Msg}
		if pos, ok := c.pluginPos(fe.Field); ok {
			out.Line, out.Env = pos.Line, pos.Env
		}
		errs = append(errs, out)
	}
	return errors.Join(errs...)
}

// pluginPos is where key, or the nearest table above it, is written.
func (c *Common) pluginPos(key string) (KeyPosition, bool) {
	for p := key; ; {
		if pos, ok := c.PluginKeys[p]; ok {
			return pos, true
		}
		if p == "" {
			return KeyPosition{}, false
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			p = ""
		} else {
			p = p[:i]
		}
	}
}

func (c *Common) pluginLine(key string) int {
	pos, _ := c.pluginPos(key)
	return pos.Line
}

// flatten lists the errors joined in err (errors.Join's, recursively).
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	// Only a list of errors (errors.Join: its text is theirs, a line each) is split; an
	// error that wraps several others under one text (sdk.Permanent wraps its cause and
	// ErrPermanent) is one problem.
	parts := j.Unwrap()
	texts := make([]string, 0, len(parts))
	for _, e := range parts {
		if e != nil {
			texts = append(texts, e.Error())
		}
	}
	if strings.Join(texts, "\n") != err.Error() {
		return []error{err}
	}
	var out []error
	for _, e := range parts {
		if e != nil {
			out = append(out, flatten(e)...)
		}
	}
	return out
}

// Builtin returns NAME for a path "builtin:NAME".
func (c *Common) Builtin() (string, bool) { return strings.CutPrefix(c.Path, BuiltinPrefix) }

// SinkStream is one [[streams]] entry of a sink.
type SinkStream struct {
	Stream         string
	Topics         []string
	Schema         sdk.Schema
	AvroSchemaJSON string
	AvroSchemaPath string
	BatchLength    uint32        // default 1000
	PollInterval   time.Duration // default 5ms
	ConsumerGroup  string        // default "iggy-connect-sink-<key>"
}

// RestartPolicy is a connector's [restart] table (Ferry; Iggy's runtime restarts a connector
// only when asked through the API): how the runtime restarts a sink or source that failed.
type RestartPolicy struct {
	MaxRestarts    uint32        // default 60; 0 = never restart automatically
	InitialBackoff time.Duration // wait before the first restart; default 1s
	MaxBackoff     time.Duration // longest wait between restarts; default 5s
}

// Retry is a connector's [retry] table.
type Retry struct {
	MaxRetries     uint32        // default 3; 0 = no retry
	InitialBackoff time.Duration // default 100ms
	MaxBackoff     time.Duration // default 5s
}

// DeadLetter is a connector's [dead_letter] table, required when on_failure = "dead_letter".
type DeadLetter struct {
	Stream string
	Topic  string
}

// CommitSettings is a sink's [commit] table (after_consuming and sink_controlled modes).
// A done offset is stored after Delay, or after Interval if that is shorter: Interval is
// the upper bound of the wait (Iggy's runtime has no such table; Ferry's keys).
type CommitSettings struct {
	Interval       time.Duration // longest wait before a done offset is stored; default 1s
	Delay          time.Duration // coalescing wait before a store; default 10ms (Ferry)
	MaxUncommitted uint64        // per partition; past it polling pauses; default 100000
	DelaySet       bool          // the file sets Delay (else a position keeper's default applies)
}

// StoreDelay is how long a done offset waits before it is stored: Delay, at most Interval.
func (c CommitSettings) StoreDelay() time.Duration { return min(c.Delay, c.Interval) }

// Sink is one sink connector file.
type Sink struct {
	Common
	Streams         []SinkStream
	OffsetCommit    CommitMode    // default after_polling
	Retry           Retry         // Ferry
	OnFailure       FailurePolicy // Ferry; default stop
	DeadLetter      DeadLetter    // Ferry
	Commit          CommitSettings
	ShutdownTimeout time.Duration // Ferry; default 10s
	// MaxInFlight is how many batches of one topic may be inside the sink's Consume at
	// once, for different partitions (Ferry). More than 1 needs a sink that accepts it: a
	// Go sink that is an sdk.ConcurrentSink, or a native plugin the user knows to be safe
	// for it. 0 (the file leaves it unset) is the default: DefaultMaxInFlight for a Go sink
	// that declares it accepts concurrent calls (at most what it accepts), 1 for any other
	// and for a native plugin, whose ABI cannot declare it.
	MaxInFlight uint32
	// OffsetCommitUnset: the file has no offset_commit, so OffsetCommit is the default. A
	// built-in that runs with one mode only (a spec listing only sink_controlled) then runs
	// with that mode instead (connect's CheckSink and start). False in a hand-built config:
	// its OffsetCommit counts as given.
	OffsetCommitUnset bool
}

// SourceStream is one [[streams]] entry of a source. Upstream uses only the last entry.
type SourceStream struct {
	Stream         string
	Topic          string
	Schema         sdk.Schema
	AvroSchemaJSON string
	AvroSchemaPath string
	BatchLength    uint32        // default 1000
	LingerTime     time.Duration // default 5ms
}

// Source is one source connector file.
type Source struct {
	Common
	Streams    []SourceStream
	OnFailure  FailurePolicy // Ferry; default stop
	Retry      Retry         // Ferry
	DeadLetter DeadLetter    // Ferry
	// MaxInFlight is how many batches the runner may hold read but not yet acknowledged
	// (Ferry). More than 1 needs a source that accepts it (sdk.PipelinedSource); batches
	// are still sent in read order and acknowledged in read order. 0 (the file leaves it
	// unset) is the default: DefaultMaxInFlight for a source that accepts reads ahead (at
	// most what it accepts), 1 (the next Read waits for the previous batch's ack) for any
	// other.
	MaxInFlight uint32
}

// DefaultMaxInFlight is max_in_flight when a connector file leaves it unset, for a
// connector that declares it accepts more than one batch at once: sdk.DefaultMaxInFlight.
func DefaultMaxInFlight() int { return sdk.DefaultMaxInFlight() }

// Validate checks a Sink built or changed by code; parsing already did. Errors name File.
func (s *Sink) Validate() error { return s.validate(&locator{file: s.File}) }

// Validate checks a Source built or changed by code; parsing already did.
func (s *Source) Validate() error { return s.validate(&locator{file: s.File}) }

func (c *Common) validate(loc *locator) error {
	if c.Key == "" {
		return loc.errorf("key", nil, "must not be empty")
	}
	if c.Name == "" {
		return loc.errorf("name", nil, "must not be empty")
	}
	if c.Path == "" {
		return loc.errorf("path", nil, "must not be empty")
	}
	if name, ok := c.Builtin(); ok && name == "" {
		return loc.errorf("path", nil, "builtin: needs a connector name, e.g. \"builtin:stdout\"")
	}
	switch c.PluginConfigFormat {
	case "", "json", "yaml", "toml", "text":
	default:
		return loc.errorf("plugin_config_format", nil, "unknown value %q (want json, yaml, toml or text)", c.PluginConfigFormat)
	}
	if len(c.PluginConfig) == 0 || !json.Valid(c.PluginConfig) {
		return loc.errorf("plugin_config", nil, "not valid JSON")
	}
	r := c.Restart
	if r.MaxRestarts > 0 {
		if r.InitialBackoff <= 0 {
			return loc.errorf("restart.initial_backoff", nil, "must be positive when restart.max_restarts > 0")
		}
		if r.MaxBackoff <= 0 {
			return loc.errorf("restart.max_backoff", nil, "must be positive when restart.max_restarts > 0")
		}
	}
	if r.MaxBackoff < r.InitialBackoff {
		return loc.errorf("restart.max_backoff", nil, "must be at least restart.initial_backoff (%s)", sdk.FormatDuration(r.InitialBackoff))
	}
	return nil
}

// validateFailure checks on_failure, [retry] and [dead_letter], which sinks and sources share.
func validateFailure(loc *locator, policy FailurePolicy, r Retry, dl DeadLetter) error {
	switch policy {
	case FailureStop, FailureSkip:
	case FailureDeadLetter:
		for _, kv := range [][2]string{{"dead_letter.stream", dl.Stream}, {"dead_letter.topic", dl.Topic}} {
			key := kv[0]
			if kv[1] != "" {
				continue
			}
			e := loc.errorf(key, nil, "required when on_failure = \"dead_letter\"")
			if e.Env == "" && loc.idx != nil && !loc.idx.has("dead_letter") {
				// No [dead_letter] table: point at the policy, in the file or the environment.
				if name, ok := loc.env["on_failure"]; ok {
					e.Line, e.Env = 0, name
				} else {
					e.Line = loc.lineFor("on_failure")
				}
			}
			return e
		}
	default:
		return loc.errorf("on_failure", nil, "unknown value %q (want stop, dead_letter or skip)", policy)
	}
	if r.InitialBackoff <= 0 {
		return loc.errorf("retry.initial_backoff", nil, "must be positive")
	}
	if r.MaxBackoff < r.InitialBackoff {
		return loc.errorf("retry.max_backoff", nil, "must be at least retry.initial_backoff (%s)", sdk.FormatDuration(r.InitialBackoff))
	}
	return nil
}

func validateSchema(loc *locator, path string, s sdk.Schema) error {
	if _, err := sdk.ParseSchema(string(s)); err != nil {
		return loc.errorf(path, nil, "%v", err)
	}
	return nil
}

func (s *Sink) validate(loc *locator) error {
	if err := s.Common.validate(loc); err != nil {
		return err
	}
	for i, st := range s.Streams {
		p := fmt.Sprintf("streams[%d].", i)
		if st.Stream == "" {
			return loc.errorf(p+"stream", nil, "must not be empty")
		}
		if err := validateSchema(loc, p+"schema", st.Schema); err != nil {
			return err
		}
		if st.BatchLength == 0 {
			return loc.errorf(p+"batch_length", nil, "must be at least 1")
		}
		if st.ConsumerGroup == "" {
			return loc.errorf(p+"consumer_group", nil, "must not be empty")
		}
	}
	switch s.OffsetCommit {
	case CommitAfterPolling, CommitAfterConsuming, CommitSinkControlled:
	default:
		return loc.errorf("offset_commit", nil, "unknown value %q (want after_polling, auto, after_consuming or sink_controlled)", s.OffsetCommit)
	}
	if err := validateFailure(loc, s.OnFailure, s.Retry, s.DeadLetter); err != nil {
		return err
	}
	if s.Commit.Interval <= 0 {
		return loc.errorf("commit.interval", nil, "must be positive")
	}
	if s.Commit.Delay <= 0 {
		return loc.errorf("commit.delay", nil, "must be positive")
	}
	if s.Commit.MaxUncommitted == 0 {
		return loc.errorf("commit.max_uncommitted", nil, "must be at least 1")
	}
	if s.MaxInFlight > MaxMaxInFlight {
		return loc.errorf("max_in_flight", nil, "must be between 1 and %d", MaxMaxInFlight)
	}
	if s.ShutdownTimeout <= 0 {
		return loc.errorf("shutdown_timeout", nil, "must be positive")
	}
	return nil
}

func (s *Source) validate(loc *locator) error {
	if err := s.Common.validate(loc); err != nil {
		return err
	}
	for i, st := range s.Streams {
		p := fmt.Sprintf("streams[%d].", i)
		if st.Stream == "" {
			return loc.errorf(p+"stream", nil, "must not be empty")
		}
		if st.Topic == "" {
			return loc.errorf(p+"topic", nil, "must not be empty")
		}
		if err := validateSchema(loc, p+"schema", st.Schema); err != nil {
			return err
		}
		if st.BatchLength == 0 {
			return loc.errorf(p+"batch_length", nil, "must be at least 1")
		}
	}
	if s.MaxInFlight > MaxMaxInFlight {
		return loc.errorf("max_in_flight", nil, "must be between 1 and %d", MaxMaxInFlight)
	}
	return validateFailure(loc, s.OnFailure, s.Retry, s.DeadLetter)
}

// RedactedPluginConfig returns PluginConfig as compact JSON with the value of every key that
// looks like a secret replaced by "***", at any depth (see [RedactSecrets]); "(invalid JSON)"
// when PluginConfig does not parse. For logs.
func (c *Common) RedactedPluginConfig() string {
	b, ok := RedactJSON(c.PluginConfig)
	if !ok {
		return "(invalid JSON)"
	}
	return string(b)
}

// String describes the sink for logs, with secret-looking plugin_config values redacted.
func (s *Sink) String() string {
	return fmt.Sprintf("sink %s v%d (%s) path=%s enabled=%t offset_commit=%s on_failure=%s streams=%d plugin_config=%s",
		s.Key, s.Version, s.File, s.Path, s.Enabled, s.OffsetCommit, s.OnFailure, len(s.Streams), s.RedactedPluginConfig())
}

// String describes the source for logs, with secret-looking plugin_config values redacted.
func (s *Source) String() string {
	return fmt.Sprintf("source %s v%d (%s) path=%s enabled=%t on_failure=%s streams=%d plugin_config=%s",
		s.Key, s.Version, s.File, s.Path, s.Enabled, s.OnFailure, len(s.Streams), s.RedactedPluginConfig())
}

// DeadLetterTopic returns the dead-letter topic of a connector whose on_failure sends
// there, and false for any other on_failure.
func DeadLetterTopic(policy FailurePolicy, dl DeadLetter) (DeadLetter, bool) {
	return dl, policy == FailureDeadLetter
}
