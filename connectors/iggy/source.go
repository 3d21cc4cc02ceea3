package iggy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	iggyclient "github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// The origin headers each replicated message carries (any of these the remote message
// had, a replica of a replica, are replaced: they name the nearest origin).
const (
	HeaderStream    = "iggy_origin_stream"           // string
	HeaderTopic     = "iggy_origin_topic"            // string
	HeaderPartition = "iggy_origin_partition"        // uint32
	HeaderOffset    = "iggy_origin_offset"           // uint64
	HeaderCreatedAt = "iggy_origin_topic_created_at" // uint64, µs: the remote topic's creation
	originPrefix    = "iggy_origin_"
)

// Source replicates one remote topic. Open, Read and Close are called by the runtime's
// source runner goroutine; the AckFuncs may run on another (sdk.PipelinedSource), and
// Gauges on any.
type Source struct {
	cfg    config
	key    string
	log    *slog.Logger
	client *iggyclient.Client
	cn     *iggyclient.Consumer

	// Read's goroutine only (the consumer's assignment reports run inside Poll).
	identity iggyclient.TopicIdentity
	lives    map[uint32]uint64 // partition → the incarnation its assignment came with
	held     *heldBack
	hdrs     []wire.KV // decode scratch

	nacked     atomic.Bool
	replicated atomic.Uint64
	skipped    atomic.Uint64
	replaced   atomic.Uint64
	closeOnce  sync.Once
}

// New returns an unopened source.
func New() *Source { return &Source{} }

// UniqueIDs reports that a replica's ids are the remote's, unique per partition as Iggy
// assigns them, so the runtime may drop what a failed send already stored before it
// retries (sdk.UniqueIDs).
func (s *Source) UniqueIDs() bool { return true }

// MaxUnacked is how many batches may be read and not yet acknowledged
// (sdk.PipelinedSource): max_unacked. Each ack stores its own partition's offset on the
// remote; a nack stops the source so that a restart replays from the remote group's
// stored offsets.
func (s *Source) MaxUnacked() int { return max(s.cfg.InFlight, 1) }

// Open connects to the remote, reads back what the local topic holds and joins the
// remote consumer group. ctx bounds the opening. A config error, refused credentials and
// a local topic with fewer partitions than partitioning = "same" needs are permanent; an
// unreachable remote and a missing remote stream or topic are retried by the runtime.
func (s *Source) Open(ctx context.Context, env sdk.SourceEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("iggy source %s: %w", env.Key, err))
	}
	s.cfg, s.key, s.log = cfg, env.Key, env.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	opts, who, err := cfg.dialOptions(s.log.With("remote", cfg.address()))
	if err != nil {
		return sdk.Permanent(fmt.Errorf("iggy source %s: %w", env.Key, err))
	}
	if err := s.dial(ctx, opts, who); err != nil {
		return err
	}
	t, err := s.client.GetTopic(ctx, iggyclient.Name(cfg.Stream), iggyclient.Name(cfg.Topic))
	if err != nil {
		s.closeClient()
		return fmt.Errorf("iggy source %s: %s: %w", env.Key, cfg.where(), err)
	}
	s.identity = iggyclient.TopicIdentity{ID: t.ID, CreatedAt: t.CreatedAt}
	if s.held, err = readBack(ctx, env, &s.cfg, s.client, s.identity); err != nil {
		s.closeClient()
		return fmt.Errorf("iggy source %s: %w", env.Key, err)
	}
	if local := s.held.partitions; cfg.Partitioning == partitionSame && s.held.read && local < len(t.Partitions) {
		s.closeClient()
		return sdk.Permanent(fmt.Errorf("iggy source %s: partitioning = \"same\" needs the local topic to have at least the %d partitions of %s; it has %d (add partitions, or use partitioning = \"key\")",
			env.Key, len(t.Partitions), cfg.where(), local))
	}
	for lane, pos := range s.held.pos {
		s.log.Info("iggy source: the local topic holds the remote partition up to an offset; replaying from above it",
			"remote", cfg.where(), "lane", lane, "offset", pos)
	}
	s.lives = map[uint32]uint64{}
	s.cn, err = s.client.NewConsumer(ctx, iggyclient.ConsumerConfig{
		Stream: iggyclient.Name(cfg.Stream), Topic: iggyclient.Name(cfg.Topic), Group: cfg.group(env.Key),
		BatchSize: uint32(cfg.BatchSize), OnAssignmentChange: s.onChange,
	})
	if err != nil {
		s.closeClient()
		return fmt.Errorf("iggy source %s: join group %s on %s: %w", env.Key, cfg.group(env.Key), cfg.where(), err)
	}
	return nil
}

// dial connects and logs in to the remote: refused credentials are permanent, a remote
// that cannot be reached is tried three times, then left to the runtime's restarts.
func (s *Source) dial(ctx context.Context, opts []iggyclient.Opt, who string) error {
	retry := sdk.Retry{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Attempts: 3, Jitter: 0.2,
		What: "connect to the remote Iggy server", Log: s.log}
	err := retry.Do(ctx, func(ctx context.Context, _ int) error {
		c, err := iggyclient.Dial(ctx, s.cfg.address(), opts...)
		if err != nil {
			if isAuth(err) {
				return sdk.Permanent(err)
			}
			return err
		}
		s.client = c
		return nil
	})
	if err != nil {
		err = fmt.Errorf("iggy source %s: connect to the remote Iggy server at %s as %s: %w", s.key, s.cfg.address(), who, err)
		if isAuth(err) {
			return sdk.Permanent(err)
		}
		return err
	}
	return nil
}

// isAuth reports a refused login (a password or a personal access token): retrying cannot
// help.
func isAuth(err error) bool {
	return errors.Is(err, wire.ErrInvalidCredentials) || errors.Is(err, wire.ErrInvalidPAT) || errors.Is(err, wire.ErrUnauthenticated) ||
		errors.Is(err, wire.ErrUnauthorized) || errors.Is(err, wire.ErrInvalidUsername) || errors.Is(err, wire.ErrInvalidPassword)
}

// onChange follows the remote assignment (on Read's goroutine, inside Poll): each
// partition's incarnation for its stores, a recreated remote topic (a new identity: the
// lanes of the old one no longer match anything read back) and purged partitions (what
// was read back of them does not describe their new messages).
func (s *Source) onChange(ch iggyclient.AssignmentChange) {
	if r := ch.Replaced; r != nil {
		s.replaced.Add(1)
		s.identity = r.New
		s.log.Warn("iggy source: the remote topic was deleted and created again; replicating the new one from its start",
			"remote", s.cfg.where(), "old", r.Old.String(), "new", r.New.String())
	}
	for _, r := range ch.Rewound {
		s.held.forget(laneOf(s.cfg.Stream, s.cfg.Topic, r.Partition, s.identity.CreatedAt))
		s.log.Warn("iggy source: a remote partition went back to an earlier offset (purged); replicating it from its start",
			"remote", s.cfg.where(), "partition", r.Partition, "position", r.Position, "current", r.Current)
	}
	for _, p := range ch.Assigned {
		s.lives[p] = ch.Incarnation
	}
}

// Read polls the next batch of one remote partition and returns its messages not yet in
// the local topic. The batch's buffer is kept until its ack (payloads and headers are
// views into it).
func (s *Source) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	if s.nacked.Load() {
		return sdk.SourceBatch{}, nil, sdk.Permanent(errors.New("iggy source: a batch was not delivered; restart to replay from the remote group's offsets"))
	}
	b, err := s.cn.Poll(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return sdk.SourceBatch{}, nil, ctx.Err()
		}
		return sdk.SourceBatch{}, nil, fmt.Errorf("iggy source %s: poll %s: %w", s.key, s.cfg.where(), err)
	}
	part, life := b.Partition, s.lives[b.Partition]
	lane := laneOf(s.cfg.Stream, s.cfg.Topic, part, s.identity.CreatedAt)
	batch := sdk.SourceBatch{Messages: make([]sdk.ProducedMessage, 0, len(b.Messages))}
	var key []byte
	if s.cfg.Partitioning == partitionKey {
		key = binary.LittleEndian.AppendUint32(nil, part)
	}
	origin := []sdk.Header{
		{Key: sdk.String(HeaderStream), Value: sdk.String(s.cfg.Stream)},
		{Key: sdk.String(HeaderTopic), Value: sdk.String(s.cfg.Topic)},
		{Key: sdk.String(HeaderPartition), Value: uint32Field(part)},
		{Key: sdk.String(HeaderCreatedAt), Value: sdk.Uint64(s.identity.CreatedAt)},
	}
	skipped := 0
	for i := range b.Messages {
		m := &b.Messages[i]
		if s.held.holds(lane, key, part, m.Offset, s.cfg.Partitioning) {
			skipped++
			continue
		}
		s.held.pass(lane) // everything after the first message not held is new
		pm, err := s.message(m, origin)
		if err != nil {
			b.Release()
			return sdk.SourceBatch{}, nil, sdk.Permanent(fmt.Errorf("iggy source %s: %s partition %d offset %d: headers: %w", s.key, s.cfg.where(), part, m.Offset, err))
		}
		switch s.cfg.Partitioning {
		case partitionSame:
			pm.Partition = sdk.PartitionAt(part)
		case partitionKey:
			pm.PartitionKey = key
		}
		batch.Messages = append(batch.Messages, pm)
	}
	if skipped > 0 {
		s.skipped.Add(uint64(skipped))
		s.log.Info("iggy source: remote messages already in the local topic skipped", "remote", s.cfg.where(),
			"partition", part, "skipped", skipped)
	}
	last := b.LastOffset()
	n := uint64(len(batch.Messages))
	var once sync.Once
	ack := func(ctx context.Context, err error) error {
		defer once.Do(b.Release)
		if err != nil {
			s.nacked.Store(true) // the next Read stops the source: a restart replays from the remote's offsets
			return nil           //nolint:nilerr // a nack is recorded, not a failed ack
		}
		s.replicated.Add(n)
		if err := s.cn.StoreOffsetIn(ctx, life, part, last); err != nil {
			if errors.Is(err, iggyclient.ErrTopicReplaced) || errors.Is(err, iggyclient.ErrPartitionRewound) || errors.Is(err, iggyclient.ErrOffsetBehind) {
				s.log.Info("iggy source: a remote offset of an earlier assignment was not stored", "partition", part, "offset", last, "reason", err)
				return nil
			}
			return fmt.Errorf("iggy source %s: store the remote offset %d of partition %d on %s: %w", s.key, last, part, s.cfg.where(), err)
		}
		return nil
	}
	return batch, ack, nil
}

// message builds the local copy of m: its id, origin timestamp, payload and user headers
// as the remote holds them (but for origin headers of an earlier hop), then this hop's
// origin headers.
func (s *Source) message(m *wire.Message, origin []sdk.Header) (sdk.ProducedMessage, error) {
	var err error
	s.hdrs, err = m.Headers(s.hdrs[:0])
	if err != nil {
		return sdk.ProducedMessage{}, err
	}
	hs := make([]sdk.Header, 0, len(s.hdrs)+len(origin)+1)
	for _, kv := range s.hdrs {
		if kv.Key.Kind == wire.HeaderKind(sdk.HeaderString) && strings.HasPrefix(string(kv.Key.Raw), originPrefix) {
			continue
		}
		hs = append(hs, sdk.Header{Key: sdk.HeaderField{Kind: sdk.HeaderKind(kv.Key.Kind), Value: kv.Key.Raw},
			Value: sdk.HeaderField{Kind: sdk.HeaderKind(kv.Value.Kind), Value: kv.Value.Raw}})
	}
	hs = append(hs, origin...)
	hs = append(hs, sdk.Header{Key: sdk.String(HeaderOffset), Value: sdk.Uint64(m.Offset)})
	var id sdk.MessageID
	binary.LittleEndian.PutUint64(id[:8], m.ID.Lo)
	binary.LittleEndian.PutUint64(id[8:], m.ID.Hi)
	return sdk.ProducedMessage{ID: id, Headers: hs, Payload: m.Payload, OriginTimestamp: m.OriginTimestamp}, nil
}

func uint32Field(v uint32) sdk.HeaderField {
	return sdk.HeaderField{Kind: sdk.HeaderUint32, Value: binary.LittleEndian.AppendUint32(nil, v)}
}

// laneOf names one remote partition of one incarnation of the remote topic.
func laneOf(stream, topic string, partition uint32, createdAt uint64) string {
	return stream + "/" + topic + "/" + strconv.FormatUint(uint64(partition), 10) + "@" + strconv.FormatUint(createdAt, 10)
}

// Gauges reports the messages replicated (acknowledged by the local server), the remote
// messages skipped because the local topic held them already (a replay after a crash),
// and how often the remote topic was found recreated.
func (s *Source) Gauges() []sdk.Gauge {
	return []sdk.Gauge{
		{Name: "replicated", Help: "remote messages appended to the local topic", Value: s.replicated.Load()},
		{Name: "skipped_held", Help: "remote messages skipped because the local topic held them (read back at open)", Value: s.skipped.Load()},
		{Name: "remote_topic_replaced", Help: "times the remote topic was found deleted and created again", Value: s.replaced.Load()},
	}
}

// Close leaves the remote group and disconnects. ctx bounds the goodbye.
func (s *Source) Close(ctx context.Context) error {
	var err error
	if s.cn != nil {
		err = s.cn.Close(ctx)
	}
	s.closeClient()
	return err
}

func (s *Source) closeClient() {
	s.closeOnce.Do(func() {
		if s.client != nil {
			_ = s.client.Close()
		}
	})
}
