package redis

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ferryio/ferry/sdk"
)

// Headers of every message the source produces: where the entry came from. The pair is
// the entry's identity, read back at open to skip what Iggy already holds.
const (
	HeaderStream  = "redis_stream"   // string: the stream key
	HeaderEntryID = "redis_entry_id" // string: the entry's id, "<ms>-<seq>"
)

type startFrom string

const (
	startEarliest startFrom = "earliest"
	startLatest   startFrom = "latest"
)

// sourceConfig is the source's plugin_config.
type sourceConfig struct {
	URL        string
	StreamKeys []string
	Group      string
	Consumer   string
	Block      time.Duration
	ClaimIdle  time.Duration
	BatchSize  int
	Field      string
	StartFrom  startFrom
}

// SourceConfig declares the source's plugin_config.
var SourceConfig = sdk.NewConfig(func(c *sourceConfig, f *sdk.Fields) {
	f.URL("url", &c.URL, "redis", "rediss").Required().Doc("redis://[user:password@]host:port/db (rediss:// for TLS); the password is never shown")
	f.Strings("stream_keys", &c.StreamKeys).Required().Doc("the streams read, each through the consumer group")
	f.String("group", &c.Group).Doc("the consumer group (default ferry-<key>), created at open where missing")
	f.String("consumer", &c.Consumer).Doc("this reader's name in the group (default ferry-<key>); keep it stable: its pending entries are read again after a restart")
	f.Duration("block", &c.Block).Default(time.Second).Min(time.Millisecond).Max(time.Minute).Doc("how long one XREADGROUP waits for new entries")
	f.Duration("claim_idle", &c.ClaimIdle).Default(time.Minute).Min(0).Doc("entries pending this long with another consumer are claimed (XAUTOCLAIM); 0: never")
	f.Int("batch_size", &c.BatchSize).Default(1000).Min(1).Max(100000).Doc("the most entries read per stream at once (COUNT)")
	f.String("field", &c.Field).Default("payload").NonEmpty().Doc("an entry with only this field gives its value as the payload; any other entry a JSON object of its fields")
	sdk.Enum(f, "start_from", &c.StartFrom, sdk.Choice(startEarliest), sdk.Choice(startLatest)).Default(startEarliest).
		Doc("where a group created at open begins: the stream's first entry or after its last")
	f.Check(func() error {
		if len(c.StreamKeys) == 0 {
			return sdk.FieldErr("stream_keys", "no stream to read")
		}
		seen := map[string]bool{}
		for _, k := range c.StreamKeys {
			if k == "" {
				return sdk.FieldErr("stream_keys", "an empty stream key")
			}
			if seen[k] {
				return sdk.FieldErr("stream_keys", "%q is listed twice", k)
			}
			seen[k] = true
		}
		return nil
	})
})

// SourceSpec is the registry's description of the source's plugin_config.
var SourceSpec = SourceConfig.Spec()

// Source reads Redis streams through a consumer group into Iggy. One batch is in flight
// at a time (no sdk.PipelinedSource): a batch's entries are acknowledged (XACK) in its
// AckFunc, after Iggy confirmed them, before the next Read.
type Source struct {
	cfg    sourceConfig
	key    string
	log    *slog.Logger
	where  string
	client *goredis.Client

	// held are the entries (stream, id) Iggy held at open among each partition's last
	// messages: a pending entry found there is acknowledged, not sent again.
	held map[entryKey]bool
	// recover: read this consumer's pending entries (id 0) before new ones: at open (the
	// previous run's unacknowledged entries) and after a nack (the batch is read again).
	recover   atomic.Bool
	lastClaim time.Time

	mu      sync.Mutex
	unacked map[string][]string // stream -> ids whose XACK failed, retried at the next Read

	read, skipped, redelivered, claimed, acked, ackFailed, doubleAcked atomic.Uint64
}

type entryKey struct{ stream, id string }

// NewSource returns an unopened source.
func NewSource() *Source { return &Source{} }

// Open parses the config, connects (PING, three attempts), creates the group on each
// stream where it is missing (MKSTREAM) and reads back the topic's last messages
// (sdk.ReadBack, batch_size × streams per partition: the one batch a crash can leave in
// Iggy unacknowledged). A config error and refused credentials are permanent.
func (s *Source) Open(ctx context.Context, env sdk.SourceEnv) error {
	cfg, err := SourceConfig.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("redis source %s: %w", env.Key, err))
	}
	if cfg.Group == "" {
		cfg.Group = "ferry-" + env.Key
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "ferry-" + env.Key
	}
	s.cfg, s.key, s.log = cfg, env.Key, env.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	opts, err := goredis.ParseURL(cfg.URL)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("redis source %s: plugin_config.url: %s", env.Key, sdk.RedactURLError(err)))
	}
	s.where = opts.Addr
	s.client = goredis.NewClient(opts)
	if err := s.open(ctx, env); err != nil {
		_ = s.client.Close()
		return err
	}
	s.unacked = map[string][]string{}
	s.recover.Store(true)
	return nil
}

func (s *Source) open(ctx context.Context, env sdk.SourceEnv) error {
	retry := sdk.Retry{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Attempts: 3, What: "connect to Redis", Log: s.log,
		Transient: func(err error) bool { return !isAuth(err) }}
	if err := retry.Do(ctx, func(ctx context.Context, _ int) error { return s.client.Ping(ctx).Err() }); err != nil {
		err = fmt.Errorf("redis source %s: connect to Redis at %s: %w", s.key, s.where, err)
		if isAuth(err) {
			return sdk.Permanent(err)
		}
		return err
	}
	start := "0"
	if s.cfg.StartFrom == startLatest {
		start = "$"
	}
	for _, k := range s.cfg.StreamKeys {
		err := s.client.XGroupCreateMkStream(ctx, k, s.cfg.Group, start).Err()
		if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
			err = fmt.Errorf("redis source %s: create group %q on stream %q at %s: %w", s.key, s.cfg.Group, k, s.where, err)
			if strings.Contains(err.Error(), "WRONGTYPE") || isAuth(err) {
				return sdk.Permanent(err)
			}
			return err
		}
	}
	held := map[entryKey]bool{}
	// One batch holds up to batch_size entries of each stream, any number of which may
	// share a partition: the window covers a whole batch.
	_, err := sdk.ReadBack(ctx, env, s.cfg.BatchSize*len(s.cfg.StreamKeys), func(m sdk.SentMessage) (sdk.Origin[string], bool) {
		st, ok1 := sdk.Lookup(m.Headers, HeaderStream)
		id, ok2 := sdk.Lookup(m.Headers, HeaderEntryID)
		if !ok1 || !ok2 {
			return sdk.Origin[string]{}, false
		}
		held[entryKey{string(st.Value), string(id.Value)}] = true
		return sdk.Origin[string]{Lane: string(st.Value), Pos: string(id.Value)}, true
	}, func(a, b string) bool { return compareIDs(a, b) < 0 })
	if err != nil {
		return fmt.Errorf("redis source %s: %w", s.key, err)
	}
	s.held = held
	return nil
}

// UniqueIDs: a message's id is derived from its stream and entry id, so the runtime drops
// a message a retried send already appended.
func (s *Source) UniqueIDs() bool { return true }

// Read returns the next entries: first this consumer's pending ones (after open or a
// nack), then, every claim_idle, entries idle that long with other consumers (XAUTOCLAIM),
// else new ones (XREADGROUP >, blocking up to block). A pending or claimed entry found in
// what Iggy held at open is acknowledged and skipped; one not found is sent again
// (counted: a duplicate when Iggy held it beyond the read-back). Each message's partition
// key is its stream, so one stream keeps its order in one partition.
func (s *Source) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	for {
		if err := ctx.Err(); err != nil {
			return sdk.SourceBatch{}, nil, err
		}
		s.retryAcks(ctx)
		var streams []goredis.XStream
		var again bool
		var err error
		switch {
		case s.recover.Load():
			streams, err = s.readPending(ctx)
			again = true
		case s.cfg.ClaimIdle > 0 && time.Since(s.lastClaim) >= s.cfg.ClaimIdle:
			s.lastClaim = time.Now()
			streams, err = s.claim(ctx)
			again = true
		default:
			streams, err = s.readNew(ctx)
		}
		if err != nil {
			return sdk.SourceBatch{}, nil, err
		}
		batch, ids := s.batch(ctx, streams, again)
		if len(batch.Messages) == 0 {
			continue
		}
		s.read.Add(uint64(len(batch.Messages)))
		var once sync.Once
		return batch, func(ctx context.Context, err error) error {
			var out error
			once.Do(func() {
				if err != nil {
					s.recover.Store(true) // read again from the pending list: nothing after it goes first
					return
				}
				out = s.ack(ctx, ids)
			})
			return out
		}, nil
	}
}

// readPending reads this consumer's pending entries (id 0 per stream); none left ends the
// recovery.
func (s *Source) readPending(ctx context.Context) ([]goredis.XStream, error) {
	args := make([]string, 0, 2*len(s.cfg.StreamKeys))
	args = append(args, s.cfg.StreamKeys...)
	for range s.cfg.StreamKeys {
		args = append(args, "0")
	}
	res, err := s.client.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: s.cfg.Group, Consumer: s.cfg.Consumer,
		Streams: args, Count: int64(s.cfg.BatchSize), Block: -1}).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, s.readErr(ctx, "XREADGROUP (pending entries)", err)
	}
	n := 0
	for _, st := range res {
		n += len(st.Messages)
	}
	if n == 0 {
		s.recover.Store(false)
	}
	return res, nil
}

// claim takes over the entries pending longer than claim_idle with any consumer of the
// group, up to batch_size per stream.
func (s *Source) claim(ctx context.Context) ([]goredis.XStream, error) {
	var out []goredis.XStream
	for _, k := range s.cfg.StreamKeys {
		msgs, _, err := s.client.XAutoClaim(ctx, &goredis.XAutoClaimArgs{Stream: k, Group: s.cfg.Group, Consumer: s.cfg.Consumer,
			MinIdle: s.cfg.ClaimIdle, Start: "0-0", Count: int64(s.cfg.BatchSize)}).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, s.readErr(ctx, "XAUTOCLAIM on "+k, err)
		}
		if len(msgs) > 0 {
			s.claimed.Add(uint64(len(msgs)))
			s.log.Info("redis source: entries idle with another consumer claimed", "stream", k, "entries", len(msgs))
			out = append(out, goredis.XStream{Stream: k, Messages: msgs})
		}
	}
	return out, nil
}

// readNew reads entries never delivered to the group, blocking up to block.
func (s *Source) readNew(ctx context.Context) ([]goredis.XStream, error) {
	args := make([]string, 0, 2*len(s.cfg.StreamKeys))
	args = append(args, s.cfg.StreamKeys...)
	for range s.cfg.StreamKeys {
		args = append(args, ">")
	}
	res, err := s.client.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: s.cfg.Group, Consumer: s.cfg.Consumer,
		Streams: args, Count: int64(s.cfg.BatchSize), Block: s.cfg.Block}).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, s.readErr(ctx, "XREADGROUP", err)
	}
	return res, nil
}

// readErr names the call and the server; a group deleted under the source (NOGROUP) and a
// refused login are permanent.
func (s *Source) readErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err = fmt.Errorf("redis source %s: %s, group %q at %s: %w", s.key, what, s.cfg.Group, s.where, err)
	if strings.Contains(err.Error(), "NOGROUP") || isAuth(err) {
		return sdk.Permanent(err)
	}
	return err
}

// batch turns entries into messages. again marks entries delivered before (pending or
// claimed): those Iggy held at open, and deleted ones, are acknowledged at once instead.
// ids are the entries the batch's ack acknowledges, per stream.
func (s *Source) batch(ctx context.Context, streams []goredis.XStream, again bool) (sdk.SourceBatch, map[string][]string) {
	var b sdk.SourceBatch
	ids := map[string][]string{}
	done := map[string][]string{}
	for _, st := range streams {
		for _, m := range st.Messages {
			if again && (m.Values == nil || s.held[entryKey{st.Stream, m.ID}]) {
				done[st.Stream] = append(done[st.Stream], m.ID)
				if m.Values != nil {
					s.skipped.Add(1)
				}
				continue
			}
			if again {
				s.redelivered.Add(1)
			}
			b.Messages = append(b.Messages, s.message(st.Stream, m))
			ids[st.Stream] = append(ids[st.Stream], m.ID)
		}
	}
	if len(done) > 0 {
		if err := s.ack(ctx, done); err != nil {
			s.log.Warn("redis source: XACK of entries Iggy holds failed; retried at the next read", "error", err)
		}
	}
	return b, ids
}

// message is one entry as an Iggy message: its payload the value of field when that is
// its only field, else a JSON object of its fields; its id derived from (stream, entry
// id); its partition key the stream.
func (s *Source) message(stream string, m goredis.XMessage) sdk.ProducedMessage {
	var payload []byte
	if v, ok := m.Values[s.cfg.Field]; ok && len(m.Values) == 1 {
		payload = []byte(fmt.Sprint(v))
	} else {
		obj := make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			obj[k] = fmt.Sprint(v)
		}
		payload, _ = json.Marshal(obj) // a map of strings always encodes
	}
	sum := sha256.Sum256([]byte(stream + "\x00" + m.ID))
	var id sdk.MessageID
	copy(id[:], sum[:16])
	return sdk.ProducedMessage{ID: id, Payload: payload, PartitionKey: []byte(stream), Headers: []sdk.Header{
		{Key: sdk.String(HeaderStream), Value: sdk.String(stream)},
		{Key: sdk.String(HeaderEntryID), Value: sdk.String(m.ID)},
	}}
}

// ack acknowledges ids (XACK per stream, in one pipeline, three attempts). What still
// fails is kept and retried before the next read, so no entry stays pending for the next
// run to send again.
func (s *Source) ack(ctx context.Context, ids map[string][]string) error {
	var cmds map[string]*goredis.IntCmd
	retry := sdk.Retry{Initial: 100 * time.Millisecond, Max: time.Second, Attempts: 3, What: "XACK", Log: s.log,
		Transient: func(err error) bool { return !isAuth(err) }}
	err := retry.Do(ctx, func(ctx context.Context, _ int) error {
		pipe := s.client.Pipeline()
		cmds = make(map[string]*goredis.IntCmd, len(ids))
		for k, list := range ids {
			cmds[k] = pipe.XAck(ctx, k, s.cfg.Group, list...)
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		s.ackFailed.Add(1)
		s.mu.Lock()
		for k, list := range ids {
			s.unacked[k] = append(s.unacked[k], list...)
		}
		s.mu.Unlock()
		return fmt.Errorf("redis source %s: XACK, group %q at %s: %w", s.key, s.cfg.Group, s.where, err)
	}
	n := 0
	for k, c := range cmds {
		got := int(c.Val())
		n += got
		if want := len(ids[k]); got < want {
			// Another consumer acknowledged them first: it claimed them while this one
			// had them, so both may have sent them.
			s.doubleAcked.Add(uint64(want - got))
		}
	}
	s.acked.Add(uint64(n))
	return nil
}

// retryAcks acknowledges what an earlier ack could not.
func (s *Source) retryAcks(ctx context.Context) {
	s.mu.Lock()
	pending := s.unacked
	s.unacked = map[string][]string{}
	s.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	if err := s.ack(ctx, pending); err != nil {
		s.log.Warn("redis source: XACK still failing; retried at the next read", "error", err)
	}
}

// compareIDs orders entry ids "<ms>-<seq>" numerically.
func compareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	if c := compareNum(am, bm); c != 0 {
		return c
	}
	return compareNum(as, bs)
}

func compareNum(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// Gauges reports the entries read, skipped, sent again, claimed and acknowledged.
func (s *Source) Gauges() []sdk.Gauge {
	return []sdk.Gauge{
		{Name: "entries_read", Help: "stream entries sent to Iggy", Value: s.read.Load()},
		{Name: "entries_skipped", Help: "pending entries Iggy already held at open, acknowledged without sending", Value: s.skipped.Load()},
		{Name: "entries_redelivered", Help: "pending or claimed entries sent again (a duplicate in Iggy when it held them beyond the read-back)", Value: s.redelivered.Load()},
		{Name: "entries_claimed", Help: "entries claimed from other consumers (XAUTOCLAIM)", Value: s.claimed.Load()},
		{Name: "entries_acked", Help: "entries acknowledged (XACK) after Iggy confirmed them", Value: s.acked.Load()},
		{Name: "entries_acked_elsewhere", Help: "entries another consumer acknowledged first (both may have sent them)", Value: s.doubleAcked.Load()},
		{Name: "ack_failures", Help: "XACKs that failed after their retries (retried at the next read)", Value: s.ackFailed.Load()},
	}
}

// Close disconnects. ctx is not needed: go-redis closes at once.
func (s *Source) Close(context.Context) error {
	if s.client == nil {
		return nil
	}
	return s.client.Close()
}
