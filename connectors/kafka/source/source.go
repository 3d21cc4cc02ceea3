// Package source is the built-in Kafka source, path = "builtin:kafka" in a [type = source]
// connector file: it reads Kafka topics as a member of a consumer group (franz-go) and
// sends each record to Iggy, exactly once with partitioning = "same" (the default).
//
// A record becomes one Iggy message: its value the payload, its key the header kafka_key,
// its headers Iggy user headers, plus kafka_topic, kafka_partition and kafka_offset, and a
// message id made of its topic, partition and offset. Kafka partition n goes to Iggy
// partition n (modulo the Iggy topic's partitions).
//
// Exactly once rests on three rules. The group's offsets are committed to Kafka only for
// records Iggy acknowledged (the batch's AckFunc, which the runtime calls after the append).
// When partitions are assigned (at start, after a crash, on every rebalance) the source reads
// back the last messages of the Iggy topic and, for each assigned Kafka partition whose
// records Iggy holds past the group's committed offset (appended, but the commit never made
// it), commits the offset after them before anything is fetched: the window between Iggy's
// append and the Kafka commit yields no duplicate. When partitions are revoked, the source
// waits for Iggy to acknowledge what it sent of them and commits that, in the revoke callback
// (franz-go's OnPartitionsRevoked), so nothing is committed for records Iggy has not
// acknowledged and the next owner starts after what Iggy holds.
//
// It imports sdk, franz-go and the Kafka connectors' internal client package only.
package source

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/connectors/kafka/internal/kclient"
	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:kafka".
const Name = "kafka"

// StartFrom is where a partition without a committed offset in the group begins.
type StartFrom string

// The starting points.
const (
	StartCommitted StartFrom = "committed" // the group's offsets; the earliest record when it has none
	StartEarliest  StartFrom = "earliest"
	StartLatest    StartFrom = "latest"
)

// Partitioning is how records are spread over the Iggy topic's partitions.
type Partitioning string

// The partitionings.
const (
	PartitionSame     Partitioning = "same"     // Kafka partition n → Iggy partition n (modulo)
	PartitionKey      Partitioning = "key"      // by the record's key (records without one: as same)
	PartitionBalanced Partitioning = "balanced" // the runtime's round robin
)

// The headers every message carries.
const (
	HeaderTopic     = "kafka_topic"
	HeaderPartition = "kafka_partition"
	HeaderOffset    = "kafka_offset"
	HeaderKey       = "kafka_key"
)

type config struct {
	kclient.Conn
	Topics              []string
	Pattern             string
	Group               string
	StartFrom           StartFrom
	Partitioning        Partitioning
	BatchSize           int
	MaxUnacked          int
	FetchMaxBytes       sdk.ByteSize
	MaxFetches          int
	FetchMaxWait        time.Duration
	RevokeTimeout       time.Duration
	SessionTimeout      time.Duration
	SkipUnrepresentable bool
}

// Config declares the source's plugin_config.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	kclient.Declare(f, &c.Conn)
	f.Strings("topics", &c.Topics).NonEmpty().Doc("the Kafka topics to read")
	f.String("topic_pattern", &c.Pattern).Check(func(p string) error {
		_, err := regexp.Compile(p)
		return err
	}).Doc("a regular expression: every topic whose whole name matches is read (instead of topics)")
	f.ExactlyOne("topics", "topic_pattern")
	f.String("consumer_group", &c.Group).Doc("the Kafka consumer group; default ferry-<connector key>")
	sdk.Enum(f, "start_from", &c.StartFrom, sdk.Choice(StartCommitted), sdk.Choice(StartEarliest), sdk.Choice(StartLatest)).
		Default(StartCommitted).Doc("where a partition without a committed offset begins: committed and earliest at its first record, latest after its last (committed offsets always win)")
	sdk.Enum(f, "partitioning", &c.Partitioning, sdk.Choice(PartitionSame), sdk.Choice(PartitionKey), sdk.Choice(PartitionBalanced)).
		Default(PartitionSame).Doc("same: Kafka partition n → Iggy partition n (exactly once); key: by the record key; balanced: round robin (both at least once)")
	f.Int("batch_size", &c.BatchSize).Default(1000).Min(1).Max(100_000).Doc("records per batch sent to Iggy")
	f.Int("max_unacked_batches", &c.MaxUnacked).Default(4).Min(1).Max(64).
		Doc("batches read ahead of Iggy's acknowledgement (the connector's max_in_flight chooses, at most this)")
	f.Size("fetch_max_bytes", &c.FetchMaxBytes).Default(16 * sdk.MiB).Min(64 * sdk.KiB).Max(1024 * sdk.MiB).
		Doc("bytes one fetch from the brokers may return")
	f.Int("max_concurrent_fetches", &c.MaxFetches).Default(2).Min(1).Max(64).
		Doc("fetches buffered at once: with fetch_max_bytes, the memory bound of what is read ahead")
	f.Duration("fetch_max_wait", &c.FetchMaxWait).Default(500 * time.Millisecond).Min(10 * time.Millisecond).Max(30 * time.Second).
		Doc("how long a broker holds a fetch that has nothing new (the latency of a quiet partition)")
	f.Duration("revoke_timeout", &c.RevokeTimeout).Default(30 * time.Second).Min(time.Second).
		Doc("how long a rebalance waits for Iggy to acknowledge the records sent of a revoked partition")
	f.Duration("session_timeout", &c.SessionTimeout).Default(45 * time.Second).Min(time.Second).Max(30 * time.Minute).
		Doc("how long the group waits for a member that stopped answering (a killed process) before its partitions move")
	f.Bool("skip_unrepresentable", &c.SkipUnrepresentable).Default(false).
		Doc("skip (and count) a record Iggy cannot hold (an empty value, a key or header over 255 bytes) instead of stopping")
})

// Spec is the source's plugin_config for the registry.
var Spec = Config.Spec()

type tp struct {
	topic     string
	partition int32
}

func (t tp) lane() string { return t.topic + "/" + strconv.Itoa(int(t.partition)) }

// pending is one batch read and not yet acknowledged: the next offset of each partition
// it holds records of.
type pending struct {
	next map[tp]int64
	done bool
}

// Source reads Kafka and produces batches for Iggy. Read and Close are called by the
// runtime's source goroutine, the AckFuncs by its acker (possibly while Read runs), the
// rebalance callbacks by franz-go's group goroutine; mu guards what they share.
type Source struct {
	cfg  config
	key  string
	log  *slog.Logger
	env  sdk.SourceEnv
	cl   *kgo.Client
	adm  *kadm.Client
	life context.Context
	stop context.CancelFunc

	commitMu  sync.Mutex // held across a commit to Kafka: see commitAcked
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every ack, nack and commit
	owned     map[tp]bool
	inflight  []*pending
	acked     map[tp]int64 // the next offset of each owned partition Iggy acknowledged
	committed map[tp]int64 // the offsets last committed
	ackedN    uint64       // batches acknowledged
	doneN     uint64       // batches acknowledged whose offsets are committed
	fatal     error        // a rebalance that could not keep the guarantee: Read stops the source

	dead      atomic.Bool // abandoned (tests: a crash): the callbacks do nothing
	nacked    atomic.Bool
	skipped   atomic.Uint64
	sent      atomic.Uint64
	kick      chan struct{}
	committer chan struct{} // closed when the committer returns
}

// maxUncommitted bounds the batches acknowledged by Iggy whose offsets are not committed
// to Kafka yet: Read waits past it (the read-back window counts on it).
const maxUncommitted = 2

var (
	_ sdk.Source           = (*Source)(nil)
	_ sdk.PipelinedSource  = (*Source)(nil)
	_ sdk.UniqueIDs        = (*Source)(nil)
	_ sdk.MessageDescriber = (*Source)(nil)
	_ sdk.Gauger           = (*Source)(nil)
)

// New returns an unopened source.
func New() *Source { return &Source{} }

// MaxUnacked implements sdk.PipelinedSource: max_unacked_batches.
func (s *Source) MaxUnacked() int { return s.cfg.MaxUnacked }

// UniqueIDs reports that each record has its own deterministic id (its topic, partition and
// offset), so the runtime drops what a failed send already stored before it retries.
func (s *Source) UniqueIDs() bool { return s.cfg.Partitioning != PartitionBalanced }

// Open reads plugin_config, connects to the cluster (a broker that does not answer is
// retried a few times, then an error the restart policy retries; refused credentials are
// permanent), checks that the named topics exist and starts the committer. The group is
// joined by the first Read.
func (s *Source) Open(ctx context.Context, env sdk.SourceEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("kafka source %s: %w", env.Key, err))
	}
	if cfg.Group == "" {
		cfg.Group = "ferry-" + env.Key
	}
	s.cfg, s.key, s.env, s.log = cfg, env.Key, env, env.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.owned, s.acked, s.committed = map[tp]bool{}, map[tp]int64{}, map[tp]int64{}
	s.changed, s.kick, s.committer = make(chan struct{}), make(chan struct{}, 1), make(chan struct{})
	opts, err := cfg.Options()
	if err != nil {
		return sdk.Permanent(fmt.Errorf("kafka source %s: %w", env.Key, err))
	}
	reset := kgo.NewOffset().AtStart()
	if cfg.StartFrom == StartLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(reset),
		kgo.FetchMaxBytes(int32(cfg.FetchMaxBytes)),
		kgo.BrokerMaxReadBytes(max(int32(cfg.FetchMaxBytes)+(1<<20), 100<<20)),
		kgo.MaxConcurrentFetches(cfg.MaxFetches),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
	)
	if cfg.Pattern != "" {
		opts = append(opts, kgo.ConsumeRegex(), kgo.ConsumeTopics("^(?:"+cfg.Pattern+")$"))
	} else {
		opts = append(opts, kgo.ConsumeTopics(cfg.Topics...))
	}
	if s.cl, err = kgo.NewClient(opts...); err != nil {
		return sdk.Permanent(fmt.Errorf("kafka source %s: %w", env.Key, err))
	}
	s.adm = kadm.NewClient(s.cl)
	retry := sdk.Retry{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Attempts: 3, Jitter: 0.2, Log: s.log}
	if err := kclient.Contact(ctx, s.cl, &cfg.Conn, retry); err != nil {
		s.cl.Close()
		return fmt.Errorf("kafka source %s: %w", env.Key, err)
	}
	if err := s.checkTopics(ctx); err != nil {
		s.cl.Close()
		return fmt.Errorf("kafka source %s: %w", env.Key, err)
	}
	s.life, s.stop = context.WithCancel(context.Background())
	go s.commitLoop()
	s.log.Info("kafka source open", "cluster", cfg.Where(), "group", cfg.Group, "topics", cfg.Topics,
		"topic_pattern", cfg.Pattern, "partitioning", cfg.Partitioning)
	return nil
}

// checkTopics fails naming the topics of `topics` the cluster does not have (a pattern may
// match none yet: the group picks them up when they appear).
func (s *Source) checkTopics(ctx context.Context) error {
	if len(s.cfg.Topics) == 0 {
		return nil
	}
	md, err := s.adm.Metadata(ctx, s.cfg.Topics...)
	if err != nil {
		return kclient.Classify(fmt.Errorf("read the metadata of topics %v from %s: %w", s.cfg.Topics, s.cfg.Where(), err))
	}
	var missing []string
	for _, t := range s.cfg.Topics {
		d, ok := md.Topics[t]
		switch {
		case !ok:
			missing = append(missing, t)
		case d.Err != nil:
			if kclient.Fatal(d.Err) {
				return sdk.Permanent(fmt.Errorf("topic %q on %s: %w", t, s.cfg.Where(), d.Err))
			}
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("plugin_config.topics: the cluster at %s has no topic %q", s.cfg.Where(), missing)
	}
	return nil
}

// notify wakes every waiter on s.changed. s.mu must be held.
func (s *Source) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Read polls up to batch_size records and returns them as one batch. It first waits while
// more than two acknowledged batches wait for their Kafka commit (so a crash leaves little
// to read back). A batch Iggy did not take (nacked) stops the source at the next Read: a
// restart resumes from the committed offsets and reads back what Iggy holds.
func (s *Source) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	for {
		if err := s.wait(ctx); err != nil {
			return sdk.SourceBatch{}, nil, err
		}
		fetches := s.cl.PollRecords(ctx, s.cfg.BatchSize)
		batch, p, err := s.build(ctx, fetches)
		if p != nil {
			s.mu.Lock()
			s.inflight = append(s.inflight, p)
			s.mu.Unlock()
		}
		s.cl.AllowRebalance()
		if err != nil {
			return sdk.SourceBatch{}, nil, err
		}
		if p == nil {
			continue // every record was skipped
		}
		s.sent.Add(uint64(len(batch.Messages)))
		return batch, func(_ context.Context, err error) error { s.ack(p, err); return nil }, nil
	}
}

// wait returns once Read may poll: nothing nacked, no rebalance failed, the committed
// backlog small.
func (s *Source) wait(ctx context.Context) error {
	for {
		if s.nacked.Load() {
			return sdk.Permanent(errors.New("kafka source: a batch was not delivered to Iggy; restart to resume from the committed offsets"))
		}
		s.mu.Lock()
		fatal, backlog, ch := s.fatal, s.ackedN-s.doneN, s.changed
		s.mu.Unlock()
		if fatal != nil {
			return sdk.Permanent(fatal)
		}
		if backlog <= maxUncommitted {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// build turns a poll into a batch; p is nil when nothing is to be sent.
func (s *Source) build(ctx context.Context, fetches kgo.Fetches) (sdk.SourceBatch, *pending, error) {
	if fetches.IsClientClosed() {
		return sdk.SourceBatch{}, nil, errors.New("kafka source: the client is closed")
	}
	var errs []error
	fetches.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		errs = append(errs, fmt.Errorf("topic %q partition %d on %s: %w", t, p, s.cfg.Where(), err))
	})
	if ctx.Err() != nil && fetches.NumRecords() == 0 {
		return sdk.SourceBatch{}, nil, ctx.Err()
	}
	batch := sdk.SourceBatch{Schema: sdk.SchemaRaw, Messages: make([]sdk.ProducedMessage, 0, fetches.NumRecords())}
	p := &pending{next: map[tp]int64{}}
	var bad error
	fetches.EachRecord(func(r *kgo.Record) {
		if bad != nil {
			return
		}
		at := tp{r.Topic, r.Partition}
		p.next[at] = r.Offset + 1
		m, err := message(r, s.cfg.Partitioning)
		if err != nil {
			if !s.cfg.SkipUnrepresentable {
				bad = sdk.Permanent(fmt.Errorf("kafka source: topic %q partition %d offset %d: %w (skip_unrepresentable = true skips such records)", r.Topic, r.Partition, r.Offset, err))
				return
			}
			s.skipped.Add(1)
			s.log.Warn("kafka source: a record Iggy cannot hold is skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			return
		}
		batch.Messages = append(batch.Messages, m)
	})
	if bad != nil {
		return sdk.SourceBatch{}, nil, bad
	}
	if len(p.next) == 0 {
		if len(errs) > 0 {
			return sdk.SourceBatch{}, nil, kclient.Classify(errors.Join(errs...))
		}
		return sdk.SourceBatch{}, nil, nil
	}
	for _, err := range errs {
		s.log.Warn("kafka source: fetch error", "err", err)
	}
	if len(batch.Messages) == 0 {
		// Only skipped records: they count as delivered, in order with the rest.
		s.ack(p, nil)
		return sdk.SourceBatch{}, nil, nil
	}
	return batch, p, nil
}

// idOf is a record's message id: its offset in the low half, a hash of its topic and
// partition in the high half.
func idOf(r *kgo.Record) sdk.MessageID {
	h := fnv.New64a()
	_, _ = h.Write([]byte(r.Topic))
	_, _ = h.Write([]byte{0, byte(r.Partition >> 24), byte(r.Partition >> 16), byte(r.Partition >> 8), byte(r.Partition)})
	var id sdk.MessageID
	lo := uint64(r.Offset)
	hi := h.Sum64()
	for i := range 8 {
		id[i] = byte(lo >> (8 * i))
		id[8+i] = byte(hi >> (8 * i))
	}
	return id
}

// message converts one record; an error names what Iggy cannot hold.
func message(r *kgo.Record, how Partitioning) (sdk.ProducedMessage, error) {
	if len(r.Value) == 0 {
		return sdk.ProducedMessage{}, errors.New("an empty or null value (Iggy holds no empty message)")
	}
	if len(r.Key) > 255 {
		return sdk.ProducedMessage{}, fmt.Errorf("a key of %d bytes (Iggy header values hold 1 to 255)", len(r.Key))
	}
	if r.Key != nil && len(r.Key) == 0 {
		return sdk.ProducedMessage{}, errors.New("an empty key (Iggy header values hold 1 to 255 bytes)")
	}
	hs := make([]sdk.Header, 0, 4+len(r.Headers))
	part := uint32(r.Partition)
	hs = append(hs,
		sdk.Header{Key: sdk.String(HeaderTopic), Value: sdk.String(r.Topic)},
		sdk.Header{Key: sdk.String(HeaderPartition), Value: sdk.HeaderField{Kind: sdk.HeaderUint32, Value: []byte{byte(part), byte(part >> 8), byte(part >> 16), byte(part >> 24)}}},
		sdk.Header{Key: sdk.String(HeaderOffset), Value: sdk.Uint64(uint64(r.Offset))})
	if r.Key != nil {
		hs = append(hs, sdk.Header{Key: sdk.String(HeaderKey), Value: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: r.Key}})
	}
	for _, h := range r.Headers {
		switch {
		case len(h.Key) == 0 || len(h.Key) > 255:
			return sdk.ProducedMessage{}, fmt.Errorf("a header name of %d bytes (Iggy header keys hold 1 to 255)", len(h.Key))
		case len(h.Value) == 0 || len(h.Value) > 255:
			return sdk.ProducedMessage{}, fmt.Errorf("header %q with a value of %d bytes (Iggy header values hold 1 to 255)", h.Key, len(h.Value))
		}
		hs = append(hs, sdk.Header{Key: sdk.String(h.Key), Value: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: h.Value}})
	}
	m := sdk.ProducedMessage{ID: idOf(r), Headers: hs, Payload: r.Value}
	switch {
	case how == PartitionKey && len(r.Key) > 0:
		m.PartitionKey = r.Key
	case how != PartitionBalanced:
		m.Partition = &part
	}
	return m, nil
}

// DescribeMessage names a message's record (sdk.MessageDescriber).
func (s *Source) DescribeMessage(m *sdk.ProducedMessage) string {
	t, _ := sdk.Lookup(m.Headers, HeaderTopic)
	p, _ := sdk.Lookup(m.Headers, HeaderPartition)
	o, _ := sdk.Lookup(m.Headers, HeaderOffset)
	pn, _ := p.AsUint64()
	on, _ := o.AsUint64()
	return fmt.Sprintf("kafka topic %s partition %d offset %d", t.Value, pn, on)
}

// ack records what Iggy did with p: acknowledged, its offsets are due for commit; not
// delivered, the source stops at the next Read.
func (s *Source) ack(p *pending, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.done = true
	for i, q := range s.inflight {
		if q == p {
			s.inflight = append(s.inflight[:i], s.inflight[i+1:]...)
			break
		}
	}
	if err != nil {
		s.nacked.Store(true)
		s.notify()
		return
	}
	for at, next := range p.next {
		if s.owned[at] && next > s.acked[at] {
			s.acked[at] = next
		}
	}
	s.ackedN++
	s.notify()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Gauges reports the records sent and skipped.
func (s *Source) Gauges() []sdk.Gauge {
	return []sdk.Gauge{
		{Name: "records_sent", Help: "Kafka records handed to Iggy", Value: s.sent.Load()},
		{Name: "records_skipped", Help: "Kafka records Iggy cannot hold, skipped (skip_unrepresentable)", Value: s.skipped.Load()},
	}
}

// abandon drops the source as a crash would (tests): nothing more is committed, the
// client leaves the group without running the callbacks.
func (s *Source) abandon() {
	s.dead.Store(true)
	if s.stop != nil {
		s.stop()
		<-s.committer
	}
	if s.cl != nil {
		s.cl.CloseAllowingRebalance()
	}
}

// Close commits what Iggy acknowledged and leaves the group (the revoke callback commits
// the rest). ctx bounds the final commit.
func (s *Source) Close(ctx context.Context) error {
	if s.cl == nil || s.dead.Load() {
		return nil
	}
	if s.stop != nil {
		s.stop()
		<-s.committer
	}
	if err := s.commitAcked(ctx, nil); err != nil {
		s.log.Warn("kafka source: final commit failed; the next owner reads back what Iggy holds", "err", err)
	}
	done := make(chan struct{})
	go func() { s.cl.CloseAllowingRebalance(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}
