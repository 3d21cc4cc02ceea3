package connect

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a Runtime.
type Options struct {
	// Connectors is the active connector configuration (config.LoadConnectors). Required.
	Connectors *config.Connectors
	// Runtime is the runtime config.toml; kept for the connectors that need it (state
	// directory for sources). Optional.
	Runtime *config.Runtime
	// Client is a connected Iggy client. Each sink topic opens its own consumer-group
	// member connection through it. Required; the Runtime does not close it.
	Client *iggy.Client
	// Builtins lists the built-in Go connectors ("builtin:NAME"). nil = none.
	Builtins *sdk.Registry
	// LoadSinkPlugin opens native plugins; nil refuses native sinks (status error).
	LoadSinkPlugin SinkPluginLoader
	// LoadSourcePlugin opens native source plugins; nil refuses native sources (status
	// error). Source state files live in Runtime.State.Path (default "local_state").
	LoadSourcePlugin SourcePluginLoader
	// Logger receives the runtime's logs; nil = slog.Default().
	Logger *slog.Logger
	// Configs re-reads a connector's active configuration when it is restarted on
	// request (connect/provider's Local or HTTP); nil = restart with the configuration it had.
	Configs ConfigSource
	// Tracer opens a trace per polled sink batch (docs/telemetry.md); nil = no traces,
	// and nothing is spent on them.
	Tracer trace.Tracer
	// CreateRoutedTopics, when > 0, creates with that many partitions a stream or topic a
	// source routes a message to (sdk.ProducedMessage.Stream, Topic) and that does not
	// exist, when the first message for it comes (`ferry run --create-topics` creates the
	// topics files name before the start; a routed one may be known only then). 0: a
	// missing one refuses the batch.
	CreateRoutedTopics uint32
}

// New checks opts and returns a Runtime that is not started yet. Errors: a missing
// required option, or an enabled connector whose configuration does not validate (the
// error names its file and field).
func New(opts Options) (*Runtime, error) {
	if opts.Connectors == nil {
		return nil, errors.New("connect: Options.Connectors is required")
	}
	if opts.Client == nil {
		return nil, errors.New("connect: Options.Client is required")
	}
	for _, s := range opts.Connectors.Sinks {
		if s.Enabled {
			if err := s.Validate(); err != nil {
				return nil, fmt.Errorf("connect: %w", err)
			}
		}
	}
	for _, s := range opts.Connectors.Sources {
		if s.Enabled {
			if err := s.Validate(); err != nil {
				return nil, fmt.Errorf("connect: %w", err)
			}
		}
	}
	stateDir := DefaultStateDir
	if opts.Runtime != nil && opts.Runtime.State.Path != "" {
		stateDir = opts.Runtime.State.Path
	}
	return newRuntime(opts, &iggyBackend{c: opts.Client, createRouted: opts.CreateRoutedTopics}, stateDir), nil
}

// iggyBackend implements backend over *iggy.Client.
type iggyBackend struct {
	c            *iggy.Client
	createRouted uint32 // Options.CreateRoutedTopics
}

// createTopic creates a source's routed target when Options.CreateRoutedTopics allows it
// (routeCreator); ok is false when it does not.
func (b *iggyBackend) createTopic(ctx context.Context, stream, topic string) (made iggy.Created, partitions uint32, ok bool, err error) {
	if b.createRouted == 0 {
		return made, 0, false, nil
	}
	made, err = b.c.EnsureTopicCreated(ctx, stream, topic, b.createRouted)
	return made, b.createRouted, true, err
}

func (b *iggyBackend) topicMetadata(ctx context.Context, stream, topic string) (sdk.TopicMetadata, error) {
	s, err := b.c.GetStream(ctx, iggy.Name(stream))
	if errors.Is(err, wire.ErrNotFound) {
		return sdk.TopicMetadata{}, &missingTopicError{stream: stream, topic: topic, streamMissing: true, err: err}
	}
	if err != nil {
		return sdk.TopicMetadata{}, fmt.Errorf("get stream %s: %w", stream, err)
	}
	t, err := b.c.GetTopic(ctx, iggy.Name(stream), iggy.Name(topic))
	if errors.Is(err, wire.ErrNotFound) {
		return sdk.TopicMetadata{}, &missingTopicError{stream: stream, topic: topic, err: err}
	}
	if err != nil {
		return sdk.TopicMetadata{}, fmt.Errorf("get topic %s/%s: %w", stream, topic, err)
	}
	return sdk.TopicMetadata{Stream: s.Name, Topic: t.Name, StreamID: s.ID, TopicID: t.ID}, nil
}

// missingTopicError is a connector's start failure when a stream or topic it names does
// not exist. The runtime creates none, as Iggy's own does not: only `ferry run
// --create-topics` (on with --embedded) creates them, before any connector starts, with
// the partition count it is given; so the error names the stream, the topic and that flag.
// The start is retried by the connector's [restart] policy, so a topic created meanwhile is
// picked up.
type missingTopicError struct {
	stream, topic string
	streamMissing bool
	err           error // the server's not-found answer
}

func (e *missingTopicError) Error() string {
	what := fmt.Sprintf("topic %q of stream %q does not exist", e.topic, e.stream)
	if e.streamMissing {
		what = fmt.Sprintf("stream %q does not exist (nor its topic %q)", e.stream, e.topic)
	}
	return what + "; create it, or start ferry run with --create-topics (on with --embedded): it creates every stream and topic the enabled connectors name"
}

func (e *missingTopicError) Unwrap() error { return e.err }

func (b *iggyBackend) newConsumer(ctx context.Context, cfg consumerConfig) (memberConsumer, error) {
	ic := iggy.ConsumerConfig{
		Stream: iggy.Name(cfg.Stream), Topic: iggy.Name(cfg.Topic), Group: cfg.Group,
		BatchSize: cfg.BatchSize, PollInterval: cfg.PollInterval, AutoCommit: cfg.AutoCommit,
	}
	if cfg.OnChange != nil {
		ic.OnAssignmentChange = func(ch iggy.AssignmentChange) {
			c := assignmentChange{revoked: ch.Revoked, assigned: ch.Assigned, life: ch.Incarnation}
			if r := ch.Replaced; r != nil {
				c.replaced = &topicReplacement{oldID: r.Old.ID, oldCreatedAt: r.Old.CreatedAt, newID: r.New.ID, newCreatedAt: r.New.CreatedAt}
			}
			for _, r := range ch.Rewound {
				c.rewound = append(c.rewound, partitionRewind{partition: r.Partition, position: r.Position, current: r.Current, reason: r.Reason})
			}
			cfg.OnChange(c)
		}
	}
	cn, err := b.c.NewConsumer(ctx, ic)
	if err != nil {
		return nil, err
	}
	return iggyConsumer{cn}, nil
}

func (b *iggyBackend) newProducer(ctx context.Context, cfg producerConfig) (producer, error) {
	if _, err := b.topicMetadata(ctx, cfg.Stream, cfg.Topic); err != nil {
		return nil, err
	}
	p, err := b.c.NewProducer(ctx, iggy.ProducerConfig{Stream: iggy.Name(cfg.Stream), Topic: iggy.Name(cfg.Topic),
		BatchCount: int(cfg.BatchLength), Linger: cfg.Linger})
	if err != nil {
		return nil, err
	}
	return iggyProducer{p: p, c: b.c, stream: cfg.Stream, topic: cfg.Topic}, nil
}

// storeRefused reports whether a store error is final for its partition: the member
// does not own it any more (ResourceNotFound, or the topic is gone), the store would
// move the group's offset back (iggy.ErrOffsetBehind), or the offset belongs to a topic
// since deleted and created again (iggy.ErrTopicReplaced), or to a partition since
// found rewound (iggy.ErrPartitionRewound).
func storeRefused(err error) bool {
	return errors.Is(err, wire.ErrNotFound) || errors.Is(err, iggy.ErrOffsetBehind) || errors.Is(err, iggy.ErrTopicReplaced) ||
		errors.Is(err, iggy.ErrPartitionRewound)
}

// iggyConsumer adapts *iggy.Consumer.
type iggyConsumer struct{ cn *iggy.Consumer }

func (a iggyConsumer) Poll(ctx context.Context) (consumerBatch, error) {
	b, err := a.cn.Poll(ctx)
	if err != nil {
		return consumerBatch{}, err
	}
	return consumerBatch{Partition: b.Partition, CurrentOffset: b.CurrentOffset, Sent: b.Sent, Messages: b.Messages, Release: b.Release}, nil
}

func (a iggyConsumer) Store(ctx context.Context, life uint64, partition uint32, offset uint64) error {
	return a.cn.StoreOffsetIn(ctx, life, partition, offset)
}
func (a iggyConsumer) Pause(p uint32)                  { a.cn.Pause(p) }
func (a iggyConsumer) Resume(p uint32)                 { a.cn.Resume(p) }
func (a iggyConsumer) Seek(p uint32, next, ts uint64)  { a.cn.SeekChecked(p, next, ts) }
func (a iggyConsumer) Close(ctx context.Context) error { return a.cn.Close(ctx) }

// iggyProducer adapts *iggy.Producer.
type iggyProducer struct {
	p             *iggy.Producer
	c             *iggy.Client
	stream, topic string
}

// tail reads the last message of each of the producer's partitions with a standalone
// consumer that stores nothing.
func (s iggyProducer) tail(ctx context.Context) (sdk.Tail, error) { return s.tailN(ctx, 1) }

// tailN reads the last n messages of each of the producer's partitions (sdk.SourceEnv.TailN);
// with n > 1 they are in Tail.Recent, oldest first.
func (s iggyProducer) tailN(ctx context.Context, n int) (sdk.Tail, error) {
	n = max(n, 1)
	parts := s.p.Partitions()
	t, err := s.c.GetTopic(ctx, iggy.Name(s.stream), iggy.Name(s.topic))
	if err != nil {
		return sdk.Tail{}, fmt.Errorf("get topic %s/%s: %w", s.stream, s.topic, err)
	}
	details := make(map[uint32]wire.PartitionResponse, len(t.Partitions))
	for _, p := range t.Partitions {
		details[p.ID] = p
	}
	out := sdk.Tail{Last: make([]*sdk.SentMessage, len(parts)),
		PartitionOf: func(key []byte) int { return int(wire.PartitionForKey(key, uint32(len(parts)))) }}
	if n > 1 {
		out.Recent = make([][]*sdk.SentMessage, len(parts))
	}
	for i, id := range parts {
		d, ok := details[id]
		if !ok || d.MessagesCount == 0 {
			continue
		}
		from := uint64(0)
		if d.CurrentOffset+1 > uint64(n) {
			from = d.CurrentOffset + 1 - uint64(n)
		}
		var got []*sdk.SentMessage
		for from <= d.CurrentOffset {
			pid := id
			r, err := s.c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(0)},
				Stream: iggy.Name(s.stream), Topic: iggy.Name(s.topic), Partition: &pid, Strategy: wire.PollOffset(from),
				Count: uint32(min(d.CurrentOffset-from+1, 1<<20))})
			if err != nil {
				return sdk.Tail{}, fmt.Errorf("read the last messages of %s/%s partition %d: %w", s.stream, s.topic, id, err)
			}
			if len(r.Messages) == 0 {
				r.Release()
				break // expired or purged meanwhile: what is left was read
			}
			for j := range r.Messages {
				m := &r.Messages[j]
				sm, err := sentMessage(id, m)
				if err != nil {
					r.Release()
					return sdk.Tail{}, fmt.Errorf("%s/%s partition %d offset %d: headers: %w", s.stream, s.topic, id, m.Offset, err)
				}
				got = append(got, sm)
				from = m.Offset + 1
			}
			r.Release()
		}
		if len(got) > 0 {
			out.Last[i] = got[len(got)-1]
			if n > 1 {
				out.Recent[i] = got
			}
		}
	}
	return out, nil
}

// sentMessage copies what a source may read back of m (its slices are the caller's).
func sentMessage(partition uint32, m *wire.Message) (*sdk.SentMessage, error) {
	sm := &sdk.SentMessage{Partition: partition, Offset: m.Offset}
	binary.LittleEndian.PutUint64(sm.ID[:8], m.ID.Lo)
	binary.LittleEndian.PutUint64(sm.ID[8:], m.ID.Hi)
	kvs, err := m.Headers(nil)
	if err != nil {
		return nil, err
	}
	for _, kv := range kvs {
		sm.Headers = append(sm.Headers, sdk.Header{
			Key:   sdk.HeaderField{Kind: sdk.HeaderKind(kv.Key.Kind), Value: append([]byte(nil), kv.Key.Raw...)},
			Value: sdk.HeaderField{Kind: sdk.HeaderKind(kv.Value.Kind), Value: append([]byte(nil), kv.Value.Raw...)}})
	}
	return sm, nil
}

func (s iggyProducer) send(ctx context.Context, msgs []sdk.ProducedMessage) error {
	return s.p.Send(ctx, iggyMessages(msgs))
}

func (s iggyProducer) close(ctx context.Context) error { return s.p.Close(ctx) }

// iggyMessages converts messages a connector produced (a source's batch, dead letters)
// to the client's. A zero ID lets the producer assign one.
func iggyMessages(msgs []sdk.ProducedMessage) []iggy.Message {
	out := make([]iggy.Message, len(msgs))
	total := 0
	for i := range msgs {
		total += len(msgs[i].Headers)
	}
	kvs := make([]wire.KV, total) // every message's headers, in one allocation
	for i, m := range msgs {
		var hs []wire.KV
		if len(m.Headers) > 0 {
			hs, kvs = kvs[:len(m.Headers):len(m.Headers)], kvs[len(m.Headers):]
			for j, h := range m.Headers {
				hs[j] = wire.KV{
					Key:   wire.HeaderValue{Kind: wire.HeaderKind(h.Key.Kind), Raw: h.Key.Value},
					Value: wire.HeaderValue{Kind: wire.HeaderKind(h.Value.Kind), Raw: h.Value.Value},
				}
			}
		}
		out[i] = iggy.Message{ID: m.ID, Headers: hs, Payload: m.Payload, Key: m.PartitionKey, Partition: m.Partition,
			OriginTimestamp: m.OriginTimestamp}
	}
	return out
}

// groupPartition is one partition's offsets as offsetAdmin reads them (-1: none).
type groupPartition struct {
	id              uint32
	current, stored int64
}

// offsetAdmin reads and writes a group's stored offsets outside a running member, for
// Runtime.Offsets and Runtime.SetOffsets. iggyBackend implements it.
type offsetAdmin interface {
	groupOffsets(ctx context.Context, group, stream, topic string) ([]groupPartition, error)
	setGroupOffsets(ctx context.Context, group, stream, topic string, offsets map[uint32]uint64) error
}

// offsetReaders is how many GetConsumerOffset requests one groupOffsets keeps in flight:
// the client's pool connections answer one request at a time each (two by default), so
// two per connection keep them busy, and the runtime's other requests on the pool (sends,
// metadata) wait behind two at most.
const offsetReaders = 4

// groupOffsets reads a topic's partitions (GetTopic: each one's current offset) and the
// group's stored offset of each (one GetConsumerOffset per partition, offsetReaders at a
// time). The first failure ends the read.
func (b *iggyBackend) groupOffsets(ctx context.Context, group, stream, topic string) ([]groupPartition, error) {
	s, tn := iggy.Name(stream), iggy.Name(topic)
	t, err := b.c.GetTopic(ctx, s, tn)
	if err != nil {
		return nil, fmt.Errorf("get topic %s/%s: %w", stream, topic, err)
	}
	consumer := wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(group)}
	out := make([]groupPartition, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = groupPartition{id: p.ID, current: -1, stored: -1}
		if p.MessagesCount > 0 {
			out[i].current = int64(p.CurrentOffset)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next    atomic.Int64
		read    atomic.Int64 // partitions answered
		wg      sync.WaitGroup
		failed  sync.Once
		failure error
	)
	for range min(offsetReaders, len(out)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(out) {
					return
				}
				o, found, err := b.c.GetOffset(ctx, consumer, s, tn, out[i].id)
				if err != nil {
					failed.Do(func() { failure = fmt.Errorf("group %s: %w", group, err) })
					cancel() // the first failure ends the read
					return
				}
				if found {
					out[i].stored = int64(o.StoredOffset)
				}
				read.Add(1)
			}
		})
	}
	wg.Wait()
	switch {
	case failure != nil:
		return nil, failure
	case int(read.Load()) < len(out): // ctx ended between two requests
		return nil, fmt.Errorf("group %s: %w", group, ctx.Err())
	}
	return out, nil
}

// setGroupOffsets joins the group on the client's connection (Iggy stores a group's
// offset only for a partition the storing member owns), stores each offset and leaves.
// A partition another member owns is refused by the server: the error names it.
func (b *iggyBackend) setGroupOffsets(ctx context.Context, group, stream, topic string, offsets map[uint32]uint64) (err error) {
	s, t, g := iggy.Name(stream), iggy.Name(topic), iggy.Name(group)
	if err := b.c.JoinConsumerGroup(ctx, s, t, g); err != nil {
		return fmt.Errorf("join group %s on %s/%s: %w", group, stream, topic, err)
	}
	defer func() {
		if lerr := b.c.LeaveConsumerGroup(context.WithoutCancel(ctx), s, t, g); lerr != nil {
			err = errors.Join(err, fmt.Errorf("leave group %s: %w", group, lerr))
		}
	}()
	consumer := wire.Consumer{Kind: wire.ConsumerGroup, ID: g}
	ids := make([]uint32, 0, len(offsets))
	for id := range offsets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := b.c.StoreOffset(ctx, consumer, s, t, id, offsets[id]); err != nil {
			return fmt.Errorf("group %s partition %d offset %d: %w", group, id, offsets[id], err)
		}
	}
	return nil
}
