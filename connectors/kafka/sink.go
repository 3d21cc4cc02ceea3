package kafka

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/connectors/kafka/internal/kclient"
	"github.com/ferryio/ferry/sdk"
)

// Sink writes Iggy messages to Kafka, exactly once: see the package comment. Consume is
// safe for concurrent calls on different partitions (each has its own producer); Assigned,
// Positions and Rewound run on the topics' poll goroutines.
type Sink struct {
	cfg       config
	key       string
	log       *slog.Logger
	committer sdk.Committer
	pos       *sdk.Positions
	base      []kgo.Opt // the connection's options
	tpl       []segment
	keyHeader string // key_from = header:NAME
	drop      map[string]bool
	adm       *kadm.Client
	admCl     *kgo.Client

	mu    sync.Mutex
	parts map[sdk.Partition]*part
	ts    map[sdk.Partition]uint64 // the last load's timestamps, for Positions
}

// part is one Iggy partition's transactional producer. mu is held across a transaction,
// so a partition's transactions run one at a time, in offset order.
type part struct {
	mu    sync.Mutex
	topic sdk.TopicMetadata
	id    sdk.Partition
	txnID string
	cl    *kgo.Client
	dirty bool // a transaction failed: fence and read the offsets topic before the next
}

var (
	_ sdk.Sink           = (*Sink)(nil)
	_ sdk.PositionKeeper = (*Sink)(nil)
	_ sdk.RewindSeeker   = (*Sink)(nil)
	_ sdk.ConcurrentSink = (*Sink)(nil)
)

// New returns an unopened Kafka sink.
func New() *Sink { return &Sink{parts: map[sdk.Partition]*part{}, ts: map[sdk.Partition]uint64{}} }

// Open reads plugin_config, reaches the cluster (a broker that does not answer is retried
// a few times, then an error the restart policy retries; refused credentials are
// permanent) and creates the offsets topic when missing. It refuses any offset_commit but
// sink_controlled: the sink alone knows when a transaction committed.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("kafka sink %s: %w", env.Key, err))
	}
	if env.Committer == nil {
		return sdk.Permanent(fmt.Errorf(`kafka sink %s: offset_commit = "sink_controlled" is required (the sink commits an offset once its transaction committed in Kafka, and resumes from the offsets topic)`, env.Key))
	}
	s.cfg, s.key, s.log, s.committer = cfg, env.Key, env.Logger, env.Committer
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.tpl, _ = parseTemplate(cfg.Topic) // Config checked it
	if h, ok := strings.CutPrefix(cfg.KeyFrom, "header:"); ok {
		s.keyHeader = h
	}
	s.drop = map[string]bool{}
	for _, h := range cfg.DropHeaders {
		s.drop[h] = true
	}
	if s.base, err = cfg.Options(); err != nil {
		return sdk.Permanent(fmt.Errorf("kafka sink %s: %w", env.Key, err))
	}
	if s.admCl, err = kgo.NewClient(s.base...); err != nil {
		return sdk.Permanent(fmt.Errorf("kafka sink %s: %w", env.Key, err))
	}
	s.adm = kadm.NewClient(s.admCl)
	retry := sdk.Retry{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Attempts: 3, Jitter: 0.2, Log: s.log}
	if err := kclient.Contact(ctx, s.admCl, &cfg.Conn, retry); err != nil {
		s.admCl.Close()
		return fmt.Errorf("kafka sink %s: %w", env.Key, err)
	}
	if err := ensureOffsetsTopic(ctx, s.adm, cfg.OffsetsTopic, &cfg.Conn, s.log); err != nil {
		s.admCl.Close()
		return fmt.Errorf("kafka sink %s: %w", env.Key, err)
	}
	s.pos = sdk.NewPositions(env, s.load)
	s.log.Info("kafka sink open", "cluster", cfg.Where(), "topic", cfg.Topic, "offsets_topic", cfg.OffsetsTopic,
		"partitioning", cfg.Partitioning, "compression", cfg.Compression)
	return nil
}

// MaxInFlight implements sdk.ConcurrentSink: partitions are written independently.
func (s *Sink) MaxInFlight() int { return sdk.MaxConcurrentUnlimited }

// KeepsPositions implements sdk.PositionKeeper: the offsets topic says where each
// partition resumes.
func (s *Sink) KeepsPositions() bool { return true }

// Assigned implements sdk.PartitionSeeker: Positions without the timestamps.
func (s *Sink) Assigned(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	pos, err := s.Positions(ctx, topic, parts)
	out := make(map[sdk.Partition]uint64, len(pos))
	for p, v := range pos {
		out[p] = v.Next
	}
	return out, err
}

// Positions implements sdk.RewindSeeker: each partition's producer is started anew
// (InitProducerID with its transactional id, which fences an earlier owner and ends its
// open transaction), then the offsets topic is read read_committed: each partition
// resumes after the last offset written, whose timestamp the runtime checks.
func (s *Sink) Positions(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
	next, err := s.pos.Assigned(ctx, topic, parts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[sdk.Partition]sdk.Position, len(next))
	for p, n := range next {
		out[p] = sdk.Position{Next: n, Timestamp: s.ts[p]}
	}
	return out, nil
}

// load is the sdk.LoadPositions of the sink: fence, then read.
func (s *Sink) load(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	ps := make([]*part, 0, len(parts))
	for _, p := range parts {
		pt := s.part(topic, p)
		pt.mu.Lock()
		err := s.fence(ctx, pt)
		pt.mu.Unlock()
		if err != nil {
			return nil, err
		}
		ps = append(ps, pt)
	}
	return s.read(ctx, topic, ps)
}

// read reads ps's records of the offsets topic (their producers fenced every earlier one).
func (s *Sink) read(ctx context.Context, topic sdk.TopicMetadata, ps []*part) (map[sdk.Partition]uint64, error) {
	keys := map[string]bool{}
	for _, pt := range ps {
		keys[offsetsKey(s.key, topic, pt.id)] = true
	}
	upTo, err := s.probe(ctx, topic, ps[0])
	if err != nil {
		return nil, err
	}
	found, err := readOffsets(ctx, s.base, s.cfg.OffsetsTopic, upTo, keys)
	if err != nil {
		return nil, kclient.Classify(fmt.Errorf("kafka sink %s: %w", s.key, err))
	}
	out := map[sdk.Partition]uint64{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pt := range ps {
		v, ok := found[offsetsKey(s.key, topic, pt.id)]
		delete(s.ts, pt.id)
		if ok && v.Offset != nil {
			out[pt.id] = *v.Offset + 1
			s.ts[pt.id] = v.Timestamp
		}
	}
	return out, nil
}

// probe commits, with pt's producer (fenced, idle: its mu held by the caller or the
// partition not in use yet), a transaction of one record on each partition of the offsets
// topic and returns their offsets: the read of the topic ends there.
func (s *Sink) probe(ctx context.Context, topic sdk.TopicMetadata, pt *part) (map[int32]int64, error) {
	ends, err := s.adm.ListEndOffsets(ctx, s.cfg.OffsetsTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, kclient.Classify(fmt.Errorf("kafka sink %s: list the partitions of the offsets topic %q: %w", s.key, s.cfg.OffsetsTopic, err))
	}
	var recs []*kgo.Record
	ends.Each(func(o kadm.ListedOffset) {
		recs = append(recs, &kgo.Record{Topic: s.cfg.OffsetsTopic, Partition: o.Partition, Key: []byte(probeKey(s.key, topic)), Value: []byte("{}")})
	})
	if err := s.transact(ctx, pt, recs); err != nil {
		pt.dirty = true
		return nil, kclient.Classify(fmt.Errorf("kafka sink %s: write to the offsets topic %q: %w", s.key, s.cfg.OffsetsTopic, err))
	}
	out := make(map[int32]int64, len(recs))
	for _, r := range recs {
		out[r.Partition] = r.Offset
	}
	return out, nil
}

func probeKey(connector string, t sdk.TopicMetadata) string {
	return connector + "/" + t.Stream + "/" + t.Topic + "/probe"
}

// part returns p's producer state, creating it.
func (s *Sink) part(topic sdk.TopicMetadata, p sdk.Partition) *part {
	s.mu.Lock()
	defer s.mu.Unlock()
	pt := s.parts[p]
	if pt == nil {
		// One transactional id per Iggy partition: the next owner of the partition (after a
		// rebalance or a crash) starts a producer of the same id, which fences this one.
		pt = &part{id: p, topic: topic, dirty: true,
			txnID: fmt.Sprintf("ferry-%s-%s-%s-%d", s.key, topic.Stream, topic.Topic, p.PartitionID)}
		s.parts[p] = pt
	}
	return pt
}

// fence closes pt's producer and starts a new one of the same transactional id, which
// fences every earlier producer of that id (a zombie's) and settles its open transaction:
// committed or aborted before InitProducerID answers. pt.mu must be held.
func (s *Sink) fence(ctx context.Context, pt *part) error {
	if pt.cl != nil {
		pt.cl.Close()
		pt.cl = nil
	}
	opts := append(append([]kgo.Opt{}, s.base...),
		kgo.TransactionalID(pt.txnID),
		kgo.TransactionTimeout(s.cfg.TxnTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codec(s.cfg.Compression)),
		kgo.MaxBufferedBytes(int(s.cfg.MaxBufferedBytes)),
		kgo.ProducerLinger(s.cfg.Linger),
		kgo.RecordPartitioner(s.partitioner()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("kafka sink %s: %w", s.key, err))
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return kclient.Classify(fmt.Errorf("kafka sink %s: start the transactional producer %q on %s: %w", s.key, pt.txnID, s.cfg.Where(), err))
	}
	pt.cl, pt.dirty = cl, false
	return nil
}

func codec(c Compression) kgo.CompressionCodec {
	switch c {
	case CompressLZ4:
		return kgo.Lz4Compression()
	case CompressSnappy:
		return kgo.SnappyCompression()
	case CompressGzip:
		return kgo.GzipCompression()
	case CompressNone:
		return kgo.NoCompression()
	}
	return kgo.ZstdCompression()
}

// partitioner places each record by the sink's partitioning. A data record carries, in
// its Partition field when produced, its Iggy partition id (same, and key for a record
// without a key) or a hash of its message id (hash); the offsets record its key's hash.
func (s *Sink) partitioner() kgo.Partitioner {
	keyed := kgo.StickyKeyPartitioner(nil)
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		byKey := keyed.ForTopic(topic)
		if topic == s.cfg.OffsetsTopic {
			return func(r *kgo.Record, n int) int {
				if strings.HasSuffix(string(r.Key), "/probe") {
					return int(r.Partition) % n
				}
				return byKey.Partition(r, n)
			}
		}
		return func(r *kgo.Record, n int) int {
			if s.cfg.Partitioning == PartitionKey && r.Key != nil {
				return byKey.Partition(r, n)
			}
			return int(uint32(r.Partition) % uint32(n))
		}
	})
}

// Consume writes the batch's messages not yet written in one transaction with the
// partition's offsets record, then commits the last offset to Iggy. A failed transaction
// is aborted; the partition's producer is then fenced anew and the offsets topic read, so
// a transaction whose outcome was unknown is known before anything is written again:
// committed, the batch is done; not, the error is returned and the runtime retries.
func (s *Sink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	p := meta.Partition
	pt := s.part(topic, p)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.dirty {
		if err := s.resync(ctx, pt); err != nil {
			return err
		}
	}
	fresh := s.pos.Fresh(p, msgs)
	if len(fresh) < len(msgs) {
		// A redelivery of what the offsets topic holds: done, whatever Iggy stored.
		s.commitDone(p, msgs[len(msgs)-len(fresh)-1].Offset)
	}
	if len(fresh) == 0 {
		return nil
	}
	recs, err := s.records(topic, p, fresh)
	if err != nil {
		s.pos.Rewind(p, fresh[0].Offset)
		return err
	}
	last := fresh[len(fresh)-1]
	recs = append(recs, &kgo.Record{Topic: s.cfg.OffsetsTopic, Key: []byte(offsetsKey(s.key, topic, p)), Value: offsetsValue(last.Offset, last.Timestamp)})
	if err := s.transact(ctx, pt, recs); err != nil {
		return s.failed(ctx, pt, fresh, err)
	}
	if err := s.pos.Durable(p, last.Offset); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		return err
	}
	return nil
}

// commitDone tells the runtime that p is written up to last (a redelivery cut off).
func (s *Sink) commitDone(p sdk.Partition, last uint64) {
	if err := s.committer.Commit(p, last); err != nil && !errors.Is(err, sdk.ErrCommitStale) && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		s.log.Debug("kafka sink: commit of a redelivery refused", "partition", p.PartitionID, "offset", last, "err", err)
	}
}

// transact produces recs in one transaction and commits it. pt.mu must be held.
func (s *Sink) transact(ctx context.Context, pt *part, recs []*kgo.Record) error {
	if err := pt.cl.BeginTransaction(); err != nil {
		return err
	}
	var (
		emu   sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	wg.Add(len(recs))
	for _, r := range recs {
		pt.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				emu.Lock()
				if first == nil {
					first = fmt.Errorf("produce to %s partition %d: %w", r.Topic, r.Partition, err)
				}
				emu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if first != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = pt.cl.AbortBufferedRecords(actx)
		_ = pt.cl.EndTransaction(actx, kgo.TryAbort)
		return first
	}
	if err := pt.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit the transaction: %w", err)
	}
	return nil
}

// failed settles a failed transaction of fresh: the producer is fenced anew and the
// offsets topic read; when it holds the batch (the commit landed though it reported an
// error), the batch is done; otherwise the positions go back to the batch's first message
// and err is returned for the runtime's retry. Either way nothing is written twice and
// nothing skipped.
func (s *Sink) failed(ctx context.Context, pt *part, fresh []sdk.ConsumedMessage, err error) error {
	p := pt.id
	last := fresh[len(fresh)-1].Offset
	werr := kclient.Classify(fmt.Errorf("kafka sink %s: Iggy partition %d offsets %d..%d to %s: %w", s.key, p.PartitionID, fresh[0].Offset, last, s.cfg.Where(), err))
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		s.log.Warn("kafka sink: producer fenced by another of its transactional id (a new owner of the partition); fencing back and reading the offsets topic",
			"partition", p.PartitionID, "transactional_id", pt.txnID)
	}
	pt.dirty = true
	if rerr := s.resync(ctx, pt); rerr != nil {
		return errors.Join(werr, rerr)
	}
	if n, ok := s.pos.Next(p); ok && n > last {
		s.log.Info("kafka sink: the failed transaction's batch is in Kafka", "partition", p.PartitionID, "last", last)
		s.commitDone(p, last)
		return nil
	}
	return werr
}

// resync fences pt's producer and sets the partition's position from the offsets topic.
// pt.mu must be held.
func (s *Sink) resync(ctx context.Context, pt *part) error {
	if err := s.fence(ctx, pt); err != nil {
		pt.dirty = true
		return err
	}
	found, err := s.read(ctx, pt.topic, []*part{pt})
	if err != nil {
		pt.dirty = true
		return err
	}
	s.pos.Seek(pt.id, found[pt.id]) // none found: nothing of the partition is in Kafka
	return nil
}

// records builds the Kafka records of msgs.
func (s *Sink) records(topic sdk.TopicMetadata, p sdk.Partition, msgs []sdk.ConsumedMessage) ([]*kgo.Record, error) {
	out := make([]*kgo.Record, 0, len(msgs)+1)
	for i := range msgs {
		m := &msgs[i]
		name, err := s.topicOf(topic, m)
		if err != nil {
			return nil, sdk.Permanent(fmt.Errorf("kafka sink %s: Iggy partition %d offset %d: %w", s.key, p.PartitionID, m.Offset, err))
		}
		r := &kgo.Record{Topic: name, Value: m.Payload, Partition: int32(p.PartitionID & 0x7fffffff)}
		switch {
		case s.keyHeader != "":
			if v, ok := sdk.Lookup(m.Headers, s.keyHeader); ok {
				r.Key = headerBytes(v)
			}
		case s.cfg.KeyFrom == "id":
			r.Key = []byte(m.ID.String())
		}
		if s.cfg.Partitioning == PartitionHash {
			h := fnv.New32a()
			_, _ = h.Write(m.ID[:])
			r.Partition = int32(h.Sum32() & 0x7fffffff)
		}
		if m.OriginTimestamp > 0 {
			r.Timestamp = time.UnixMicro(int64(m.OriginTimestamp))
		}
		for _, h := range m.Headers {
			k, err := h.Key.AsString()
			if err != nil || s.drop[k] {
				continue
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: headerBytes(h.Value)})
		}
		out = append(out, r)
	}
	return out, nil
}

// headerBytes is a header value as Kafka bytes: raw and string values as they are,
// numbers and booleans as their text.
func headerBytes(f sdk.HeaderField) []byte {
	switch f.Kind {
	case sdk.HeaderRaw, sdk.HeaderString:
		return f.Value
	case sdk.HeaderBool:
		return []byte(strconv.FormatBool(len(f.Value) > 0 && f.Value[0] != 0))
	}
	if v, err := f.AsUint64(); err == nil {
		return []byte(strconv.FormatUint(v, 10))
	}
	if v, ok := signed(f); ok {
		return []byte(strconv.FormatInt(v, 10))
	}
	return f.Value
}

func signed(f sdk.HeaderField) (int64, bool) {
	var n int
	switch f.Kind {
	case sdk.HeaderInt8:
		n = 1
	case sdk.HeaderInt16:
		n = 2
	case sdk.HeaderInt32:
		n = 4
	case sdk.HeaderInt64:
		n = 8
	default:
		return 0, false
	}
	if len(f.Value) != n {
		return 0, false
	}
	var u uint64
	for i := n - 1; i >= 0; i-- {
		u = u<<8 | uint64(f.Value[i])
	}
	shift := 64 - 8*n
	return int64(u<<shift) >> shift, true
}

// topicOf renders the topic template for m.
func (s *Sink) topicOf(topic sdk.TopicMetadata, m *sdk.ConsumedMessage) (string, error) {
	if len(s.tpl) == 1 {
		switch s.tpl[0].kind {
		case 't':
			return topic.Topic, nil
		case 0:
			return s.tpl[0].text, nil
		}
	}
	var b strings.Builder
	for _, seg := range s.tpl {
		switch seg.kind {
		case 0:
			b.WriteString(seg.text)
		case 's':
			b.WriteString(topic.Stream)
		case 't':
			b.WriteString(topic.Topic)
		case 'h':
			v, ok := sdk.Lookup(m.Headers, seg.header)
			if !ok {
				return "", fmt.Errorf("plugin_config.topic %q: the message has no header %q", s.cfg.Topic, seg.header)
			}
			b.Write(headerBytes(v))
		}
	}
	return b.String(), nil
}

// Rewound implements sdk.RewindSeeker: a partition purged in Iggy writes {"offset":null}
// to its offsets record, so that its next messages, from offset 0, are written.
func (s *Sink) Rewound(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) error {
	for _, p := range parts {
		pt := s.part(topic, p)
		pt.mu.Lock()
		err := s.rewind(ctx, pt, topic)
		pt.mu.Unlock()
		if err != nil {
			return err
		}
		s.log.Warn("kafka sink: Iggy partition went back to offset 0 (purged); its records already in Kafka stay, the new messages are written after them",
			"stream", topic.Stream, "topic", topic.Topic, "partition", p.PartitionID)
	}
	return nil
}

func (s *Sink) rewind(ctx context.Context, pt *part, topic sdk.TopicMetadata) error {
	if pt.dirty || pt.cl == nil {
		if err := s.fence(ctx, pt); err != nil {
			return err
		}
	}
	rec := &kgo.Record{Topic: s.cfg.OffsetsTopic, Key: []byte(offsetsKey(s.key, topic, pt.id)), Value: []byte(`{"offset":null}`)}
	if err := s.transact(ctx, pt, []*kgo.Record{rec}); err != nil {
		pt.dirty = true
		return kclient.Classify(fmt.Errorf("kafka sink %s: reset the offsets record of partition %d: %w", s.key, pt.id.PartitionID, err))
	}
	s.pos.Seek(pt.id, 0)
	s.mu.Lock()
	delete(s.ts, pt.id)
	s.mu.Unlock()
	return nil
}

// Close closes every producer (no transaction is open between Consume calls).
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	parts := s.parts
	s.parts = map[sdk.Partition]*part{}
	s.mu.Unlock()
	for _, pt := range parts {
		pt.mu.Lock()
		if pt.cl != nil {
			pt.cl.Close()
			pt.cl = nil
		}
		pt.mu.Unlock()
	}
	if s.admCl != nil {
		s.admCl.Close()
	}
	return nil
}
