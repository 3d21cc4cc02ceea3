package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:redis".
const Name = "redis"

// config is the sink's plugin_config.
type config struct {
	URL            string
	StreamKey      string
	Field          string
	FieldsFromJSON bool
	MaxLen         int64
}

// Config declares plugin_config.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.URL("url", &c.URL, "redis", "rediss").Required().Doc("redis://[user:password@]host:port/db (rediss:// for TLS); the password is never shown")
	f.String("stream_key", &c.StreamKey).Default("{stream}:{topic}:{partition}").NonEmpty().
		Doc("the stream each message goes to: a template over {stream}, {topic}, {partition} and {header:NAME}; exactly once needs {partition}")
	f.String("field", &c.Field).Default("payload").NonEmpty().Doc("the entry's field holding the payload")
	f.Bool("fields_from_json", &c.FieldsFromJSON).Default(false).Doc("a JSON object payload's top-level fields become the entry's fields")
	f.Int64("maxlen", &c.MaxLen).Default(0).Min(0).Doc("approximate trimming (MAXLEN ~): 0 keeps every entry")
	f.AtMostOne("field", "fields_from_json")
	f.Commits(sdk.CommitsEachBatch) // once Redis acknowledged the batch's XADDs
	f.Check(func() error {
		if _, err := parseTemplate(c.StreamKey); err != nil {
			return sdk.FieldErr("stream_key", "%v", err)
		}
		return nil
	})
})

// Spec is the registry's description of plugin_config.
var Spec = Config.Spec()

// Sink writes messages as Redis stream entries. Consume is called for one partition at a
// time (no sdk.ConcurrentSink); Gauges may be called from any goroutine.
type Sink struct {
	cfg     config
	key     string
	log     *slog.Logger
	tmpl    template
	derived bool // ids derived from offsets (the key names {partition})
	client  *goredis.Client
	pos     *sdk.Positions
	where   string // the server, without its password

	written    atomic.Uint64
	duplicates atomic.Uint64
}

// New returns an unopened sink.
func New() *Sink { return &Sink{} }

// Open parses the config and connects (PING, three attempts). ctx bounds the opening. A
// config error and refused credentials are permanent.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("redis sink %s: %w", env.Key, err))
	}
	s.cfg, s.key, s.log = cfg, env.Key, env.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	s.tmpl, _ = parseTemplate(cfg.StreamKey)
	s.derived = s.tmpl.hasPartition()
	opts, err := goredis.ParseURL(cfg.URL)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("redis sink %s: plugin_config.url: %s", env.Key, sdk.RedactURLError(err)))
	}
	s.where = opts.Addr
	s.client = goredis.NewClient(opts)
	retry := sdk.Retry{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Attempts: 3, What: "connect to Redis", Log: s.log,
		Transient: func(err error) bool { return !isAuth(err) }}
	if err := retry.Do(ctx, func(ctx context.Context, _ int) error { return s.client.Ping(ctx).Err() }); err != nil {
		_ = s.client.Close()
		err = fmt.Errorf("redis sink %s: connect to Redis at %s: %w", env.Key, s.where, err)
		if isAuth(err) {
			return sdk.Permanent(err)
		}
		return err
	}
	if !s.derived {
		s.log.Warn("redis sink: stream_key has no {partition}: Redis assigns the entry ids and a replay after a crash may append entries again (at least once)",
			"stream_key", cfg.StreamKey)
	}
	s.pos = sdk.NewPositions(env, nil)
	return nil
}

// isAuth reports a refused login: retrying cannot help.
func isAuth(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "WRONGPASS") || strings.Contains(m, "NOAUTH") || strings.Contains(m, "NOPERM") ||
		strings.Contains(m, "invalid password") || strings.Contains(m, "invalid username-password")
}

// entryID is the id of the message at offset of partition: the offset + 1 (ids start
// above 0-0) in the milliseconds part, the partition in the sequence part.
func entryID(partition uint32, offset uint64) string {
	return strconv.FormatUint(offset+1, 10) + "-" + strconv.FormatUint(uint64(partition), 10)
}

// isDuplicate reports Redis refusing an id at or below the stream's top: this entry (or a
// later one of the same partition) is already written.
func isDuplicate(err error) bool {
	return err != nil && strings.Contains(err.Error(), "equal or smaller than the target stream top item")
}

// Consume appends the batch's entries in one pipeline, in order, then makes their offsets
// durable (commit). An entry Redis refuses as a duplicate id counts as written. A payload
// that is not a JSON object under fields_from_json is rejected alone
// (sdk.RejectedMessages); any other refusal fails the batch (retried by the runtime).
func (s *Sink) Consume(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	fresh := s.pos.Fresh(m.Partition, msgs)
	if len(fresh) == 0 {
		return nil
	}
	part := m.Partition.PartitionID
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.StringCmd, 0, len(fresh))
	var rejected []uint64
	var rejectErr error
	for i := range fresh {
		msg := &fresh[i]
		values, err := s.values(msg.Payload)
		if err != nil {
			rejected, rejectErr = append(rejected, msg.Offset), err
			cmds = append(cmds, nil)
			continue
		}
		args := &goredis.XAddArgs{Stream: s.tmpl.render(t, part, msg.Headers), Values: values}
		if s.derived {
			args.ID = entryID(part, msg.Offset)
		}
		if s.cfg.MaxLen > 0 {
			args.MaxLen, args.Approx = s.cfg.MaxLen, true
		}
		cmds = append(cmds, pipe.XAdd(ctx, args))
	}
	if _, err := pipe.Exec(ctx); err != nil && !isDuplicate(err) && !allDuplicates(cmds) {
		for i, c := range cmds {
			if c != nil && c.Err() != nil && !isDuplicate(c.Err()) {
				return fmt.Errorf("redis sink %s: XADD %s (partition %d offset %d) at %s: %w", s.key, c.Args()[1], part, fresh[i].Offset, s.where, c.Err())
			}
		}
		return fmt.Errorf("redis sink %s: XADD at %s: %w", s.key, s.where, err)
	}
	for _, c := range cmds {
		switch {
		case c == nil:
		case isDuplicate(c.Err()):
			s.duplicates.Add(1)
		default:
			s.written.Add(1)
		}
	}
	if err := s.pos.Durable(m.Partition, fresh[len(fresh)-1].Offset); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		return err
	}
	if len(rejected) > 0 {
		return &sdk.RejectedMessages{Offsets: rejected, Err: rejectErr}
	}
	return nil
}

// allDuplicates reports whether every failed command of a pipeline failed as a duplicate.
func allDuplicates(cmds []*goredis.StringCmd) bool {
	for _, c := range cmds {
		if c != nil && c.Err() != nil && !isDuplicate(c.Err()) {
			return false
		}
	}
	return true
}

// values is an entry's fields: the payload in one field, or a JSON object's top-level
// fields (strings as they are, any other value as its JSON text).
func (s *Sink) values(payload []byte) (any, error) {
	if !s.cfg.FieldsFromJSON {
		return []any{s.cfg.Field, payload}, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return nil, fmt.Errorf("fields_from_json: the payload is not a JSON object: %w", err)
	}
	if len(obj) == 0 {
		return nil, errors.New("fields_from_json: an empty JSON object has no fields (Redis entries need one)")
	}
	out := make([]any, 0, 2*len(obj))
	for k, v := range obj {
		var str string
		if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &str) == nil {
			out = append(out, k, str)
		} else {
			out = append(out, k, string(v))
		}
	}
	return out, nil
}

// Gauges reports the entries written and the entries Redis refused as already written (a
// replay).
func (s *Sink) Gauges() []sdk.Gauge {
	return []sdk.Gauge{
		{Name: "entries_written", Help: "stream entries Redis appended", Value: s.written.Load()},
		{Name: "duplicates_refused", Help: "entries Redis refused as an id already written (a replay)", Value: s.duplicates.Load()},
	}
}

// Close disconnects. ctx is not needed: go-redis closes at once.
func (s *Sink) Close(context.Context) error {
	if s.client == nil {
		return nil
	}
	return s.client.Close()
}
