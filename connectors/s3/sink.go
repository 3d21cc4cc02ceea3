package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Sink writes each partition's messages to objects in one bucket, exactly once: see the
// package comment. Consume, Assigned and Close are safe for concurrent use.
type Sink struct {
	cfg       config
	tpl       template
	st        *store
	pos       *sdk.Positions // per partition: what is accepted, in the bucket, committed
	onFailure sdk.OnFailure
	log       *slog.Logger

	mu    sync.Mutex // guards parts
	parts map[sdk.Partition]*partState

	buffered atomic.Int64 // bytes in every partition's buffer
	// encoders bounds the Parquet objects encoded at once in the background to the CPUs:
	// more would only hold more memory for the same throughput.
	encoders chan struct{}
	// encodeFault, set by tests before Open, fails the encoding of an object (by its key)
	// when it returns an error.
	encodeFault func(key string) error

	bg     context.Context // cancelled by Close: ends the flusher's uploads
	cancel context.CancelFunc
	// puts is the context of the uploads running in the background, cancelled when Close
	// has waited for them (as ctx allowed); uploads counts them, so that Close returns
	// once the cancelled ones ended too, and none uses a connection after it.
	puts       context.Context
	cancelPuts context.CancelFunc
	uploads    sync.WaitGroup
	done       chan struct{} // closed when the flusher returns
	closed     atomic.Bool
}

// partState is one assigned partition's objects: the one being filled, streamed or
// uploaded. Its lock is held across an upload, so a partition's objects are written one at
// a time, in offset order. Its positions (what is accepted, in the bucket, committed) are
// the sink's sdk.Positions.
type partState struct {
	mu      sync.Mutex
	topic   sdk.TopicMetadata
	part    sdk.Partition
	buf     buffer
	size    atomic.Int64 // buf.size, readable without mu
	lastAdd time.Time
	// gone: the partition was released (revoked, assigned again, its streamed object
	// removed by another owner, or lost in memory): this assignment writes and accepts
	// nothing more of it, up to the next Assigned.
	gone bool
	gen  uint64 // the generation its objects are written under (key.go)
	// rejected holds the messages a typed column refused until Consume reports them (a
	// failed upload may end the call first; the runtime's retry of the batch reports them).
	rejected *sdk.RejectedMessages
	up       *stream   // the object being streamed through a multipart upload, if any
	inflight *inflight // the object being PUT while the next one fills, if any
	spare    []byte    // the JSON and raw formats: the memory of the last object uploaded
	// pq encodes the partition's Parquet objects; nil while lent to the object in flight.
	pq *fileEncoder
}

// inflight is an object PUT in the background while its partition's next object fills
// (encoding and uploading overlap). Its partition's next object is not uploaded before it
// is done and committed, so a partition's objects are committed in offset order. A Parquet
// object is also encoded in the background, so the partitions' encoders run in parallel
// with each other and with the uploads.
type inflight struct {
	key  string
	id   identity // written into the object's metadata
	body []byte   // set before the upload starts (by the encoder, for Parquet)
	// Parquet: the object's rows until they are encoded (kept so that a failed encoding is
	// tried again), their schema and first offset, and the partition's encoder, lent until
	// the upload is settled.
	rows   []row
	schema sdk.Schema
	first  uint64
	pq     *fileEncoder
	last   uint64
	held   int64 // bytes counted in the sink's buffered total until it is uploaded
	freed  atomic.Bool
	done   chan struct{}
	// Set before done is closed: the upload's outcome and, when it landed, the commit's.
	err, commitErr error
}

// identity is what ps's buffered object holds (the buffer's first and last offsets).
func (ps *partState) identity() identity {
	return identity{stream: ps.topic.Stream, topic: ps.topic.Topic, partition: ps.part.PartitionID, first: ps.buf.first, last: ps.buf.last, lastTS: ps.buf.lastTS}
}

// free takes f's bytes off the sink's buffered total, once.
func (s *Sink) free(f *inflight) {
	if f.freed.CompareAndSwap(false, true) {
		s.buffered.Add(-f.held)
	}
}

var (
	_ sdk.Sink           = (*Sink)(nil)
	_ sdk.PositionKeeper = (*Sink)(nil)
)

// New returns an unopened S3 sink.
func New() *Sink {
	return &Sink{parts: map[sdk.Partition]*partState{}, encoders: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// Open reads plugin_config, checks that the bucket exists and may be listed, and starts the
// goroutine that uploads idle partitions. It refuses any offset_commit but sink_controlled:
// the sink alone knows when an object is durable.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("s3 sink: %w", err))
	}
	if env.Committer == nil {
		return sdk.Permanent(errors.New(`s3 sink: offset_commit = "sink_controlled" is required (the sink commits a partition's offsets once their object is in the bucket, and resumes from the bucket)`))
	}
	s.cfg, s.tpl, s.onFailure, s.log = cfg, cfg.tpl, env.OnFailure, env.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.pos = sdk.NewPositionsAt(sdk.SinkEnv{Committer: env.Committer, Logger: s.log}, s.load)
	if s.st, err = newStore(ctx, cfg); err != nil {
		return fmt.Errorf("s3 sink: %w", err)
	}
	s.st.log = s.log
	if err := s.st.check(ctx); err != nil {
		s.st.close()
		return fmt.Errorf("s3 sink: %w", err)
	}
	s.bg, s.cancel = context.WithCancel(context.Background())
	s.puts, s.cancelPuts = context.WithCancel(context.Background())
	s.done = make(chan struct{})
	go s.flusher()
	s.log.Info("s3 sink open", "bucket", cfg.Bucket, "prefix", cfg.Prefix, "format", cfg.Format,
		"path_template", cfg.PathTemplate, "key_template", s.tpl.effective(), "endpoint", cfg.Endpoint)
	if len(s.tpl.added) > 0 {
		s.log.Info("s3 sink: path_template lacks a {stream} or {topic} path segment; it is appended, so each topic's objects have keys of their own",
			"path_template", cfg.PathTemplate, "key_template", s.tpl.effective())
	}
	return nil
}

// KeepsPositions implements sdk.PositionKeeper: a partition with an object resumes after
// its highest one, whatever Iggy's stored offset says.
func (s *Sink) KeepsPositions() bool { return true }

// Assigned implements sdk.PartitionSeeker: Positions without the timestamps.
func (s *Sink) Assigned(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	return s.pos.Assigned(ctx, topic, parts)
}

// Positions implements sdk.RewindSeeker: for each partition it lists the partition's
// objects and returns the offset after the highest one written in the highest
// generation, with the timestamp of that object's last message (its identity metadata;
// none for an object an older version wrote), which the runtime checks against the
// partition: one purged while the sink was stopped is found rewound. A partition with no
// object resumes from the group's stored offset. Whatever the sink buffered for an
// earlier assignment of the partition is dropped (it is polled again from there), once
// its upload under way, if any, is done; incomplete multipart uploads and partial objects
// of the partition are removed.
func (s *Sink) Positions(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
	return s.pos.Positions(ctx, topic, parts) // lists the bucket: load
}

// load is the sink's sdk.LoadPositionsAt: each partition is started afresh after its
// highest object (reassign).
func (s *Sink) load(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
	out := map[sdk.Partition]sdk.Position{}
	for _, p := range parts {
		next, gen, found, lastTS, err := s.reassign(ctx, topic, p, false)
		if err != nil {
			return nil, err
		}
		if found {
			out[p] = sdk.Position{Next: next, Timestamp: lastTS}
		}
		s.log.Debug("s3 sink: partition assigned", "stream", topic.Stream, "topic", topic.Topic,
			"partition", p.PartitionID, "resume_at", next, "generation", gen, "found", found)
	}
	return out, nil
}

var _ sdk.RewindSeeker = (*Sink)(nil)

// Rewound implements sdk.RewindSeeker: a partition that went back to offset 0 (purged)
// starts a new generation of objects at offset 0; the purged messages' objects stay in
// the bucket under their keys.
func (s *Sink) Rewound(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) error {
	for _, p := range parts {
		_, gen, _, _, err := s.reassign(ctx, topic, p, true)
		if err != nil {
			return err
		}
		s.pos.Forget(p) // its positions start again with its next message
		s.log.Warn("s3 sink: partition went back to offset 0 (purged); its new objects are written under a new generation, the purged messages' objects stay",
			"stream", topic.Stream, "topic", topic.Topic, "partition", p.PartitionID, "generation", gen)
	}
	return nil
}

// checkOwner refuses to resume after key, the highest object the listing found for the
// partition, when its metadata says it is another partition's (another sink keying its
// objects alike): resuming there would skip this partition's messages. An object without
// identity metadata was written by an older version, keyed as now: it counts.
//
// It returns the timestamp of the object's last message (0 when it does not record one).
func (s *Sink) checkOwner(ctx context.Context, key string, topic sdk.TopicMetadata, partition uint32) (uint64, error) {
	got, known, found, err := s.st.identity(ctx, key)
	if err != nil || !found || !known {
		return 0, err // not found: deleted since the listing; the next assignment lists again
	}
	if got.stream != topic.Stream || got.topic != topic.Topic || got.partition != partition {
		return 0, fmt.Errorf("the highest object of the partition, s3://%s/%s, is the object of %s, not of this partition: "+
			"another sink writes the same keys (give each sink a bucket, prefix or path_template of its own)", s.cfg.Bucket, key, got)
	}
	return got.lastTS, nil
}

// reassign drops what the sink held of partition p, lists its objects and starts it
// afresh: after the highest object of the highest generation, or (rewound) at offset 0
// of the generation after it.
func (s *Sink) reassign(ctx context.Context, topic sdk.TopicMetadata, p sdk.Partition, rewound bool) (next, gen uint64, found bool, lastTS uint64, err error) {
	// An upload of an earlier assignment still under way would land after the listing.
	s.mu.Lock()
	old := s.parts[p]
	s.mu.Unlock()
	if old != nil {
		s.drop(ctx, old)
	}
	kc := keyCtx{stream: topic.Stream, topic: topic.Topic, partition: p.PartitionID}
	f := newFinder(s.cfg.Prefix, s.tpl, kc)
	var partials []string
	top := "" // the key of the highest object
	err = s.st.list(ctx, f.listPrefix, func(key string) {
		if _, last, g, ok := f.object(key); ok {
			if !found || g > gen || g == gen && last+1 > next {
				next, gen, found, top = last+1, g, true, key
			}
		} else if f.partial(key) {
			partials = append(partials, key)
		}
	})
	if err == nil && found {
		lastTS, err = s.checkOwner(ctx, top, topic, p.PartitionID)
	}
	if err == nil {
		err = s.legacy(ctx, kc)
	}
	if err != nil {
		return 0, 0, false, 0, fmt.Errorf("s3 sink: partition %d of %s/%s: %w", p.PartitionID, topic.Stream, topic.Topic, err)
	}
	if old != nil && old.gen > gen { // a generation begun, no object written in it yet
		next, gen, found, lastTS = 0, old.gen, false, 0
	}
	if rewound {
		next, found, lastTS = 0, false, 0
		gen++
	}
	fresh := &partState{topic: topic, part: p, gen: gen}
	s.mu.Lock()
	s.parts[p] = fresh
	s.mu.Unlock()
	if err := s.abandoned(ctx, f, partials); err != nil {
		return 0, 0, false, 0, fmt.Errorf("s3 sink: partition %d of %s/%s: %w", p.PartitionID, topic.Stream, topic.Topic, err)
	}
	return next, gen, found, lastTS, nil
}

// legacy warns when the partition has objects under the keys an older version gave them
// (the path_template as written, before the segments it lacks were appended or a hash
// followed a sanitized name): those keys could not tell the sink's topics apart, so they
// are not counted, and the partition resumes from the group's offset in Iggy (after a
// graceful stop of the older version, its last commit).
func (s *Sink) legacy(ctx context.Context, kc keyCtx) error {
	f, ok := newLegacyFinder(s.cfg.Prefix, s.tpl, kc)
	if !ok {
		return nil
	}
	n, highest, top := 0, uint64(0), ""
	err := s.st.list(ctx, f.listPrefix, func(key string) {
		if _, last, ok := f.offsets(key); ok {
			n++
			if top == "" || last > highest {
				highest, top = last, key
			}
		}
	})
	if err != nil || n == 0 {
		return err
	}
	s.log.Warn("s3 sink: objects under an older key layout not counted; the partition resumes from Iggy's stored offset "+
		"(those keys cannot tell the sink's topics apart: objects are now keyed by key_template)",
		"stream", kc.stream, "topic", kc.topic, "partition", kc.partition, "objects", n, "highest", top,
		"path_template", s.cfg.PathTemplate, "key_template", s.tpl.effective())
	return nil
}

// drop waits for a partition's upload in the background (committing it when it landed),
// then forgets its buffer and aborts its streamed object (assigned again).
func (s *Sink) drop(ctx context.Context, ps *partState) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := s.settleLocked(ctx, ps, true); err != nil {
		s.log.Info("s3 sink: upload of an earlier assignment failed; its messages are polled again", "err", err)
	}
	s.releaseLocked(ctx, ps)
}

// Consume appends the batch to its partition's buffer and uploads the buffer whenever it
// reaches max_file_size or max_messages_per_file (in the background, while the next
// object fills; a buffer reaching part_size first streams instead); then, while the sink
// holds more than max_buffered_bytes, it waits for the uploads under way and uploads the
// largest buffer. An upload that fails max_attempts times fails the call (or, in the
// background, the partition's next call); the runtime retries the batch, whose messages
// already buffered are skipped.
func (s *Sink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	ps := s.partition(topic, meta.Partition)
	ps.mu.Lock()
	err := s.appendLocked(ctx, ps, topic, meta, msgs)
	ps.mu.Unlock()
	if err != nil {
		return err
	}
	for uint64(s.buffered.Load()) > uint64(s.cfg.MaxBuffered) {
		// Objects being uploaded count too: wait for them before cutting another early.
		if waited, err := s.settleAll(ctx); err != nil {
			return err
		} else if waited {
			continue
		}
		big := s.largest()
		if big == nil {
			break
		}
		big.mu.Lock()
		err := s.flushLocked(ctx, big)
		big.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Sink) appendLocked(ctx context.Context, ps *partState, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if ps.gone {
		return nil // a batch of an assignment that ended: its commits would be refused
	}
	if err := s.settleLocked(ctx, ps, false); err != nil || ps.gone {
		return err
	}
	if ps.up != nil && ps.up.sealed {
		// A streamed object whose copy failed: nothing may join it.
		if err := s.finishLocked(ctx, ps); err != nil || ps.gone {
			return err
		}
	}
	// A redelivery of what is buffered or in the bucket is cut off; the first message of
	// an assignment tells that everything before it is done in the runtime (it starts
	// there, or resolved a poison message before delivering this one).
	fresh := s.pos.Fresh(ps.part, msgs)
	if len(fresh) > 0 {
		ps.topic = topic
	}
	for i := range fresh {
		m := &fresh[i]
		grew, err := ps.buf.add(&s.cfg, topic, ps.part, meta.Schema, m)
		if err != nil {
			// A typed column refuses it: on_failure decides for it alone. Under stop nothing
			// at or past it may be buffered (it would be committed past).
			if ps.rejected == nil {
				ps.rejected = &sdk.RejectedMessages{Err: fmt.Errorf("s3 sink: offset %d: %w", m.Offset, err)}
			}
			ps.rejected.Offsets = append(ps.rejected.Offsets, m.Offset)
			if !s.onFailure.MayPassRejected() {
				s.pos.Rewind(ps.part, m.Offset)
				r := ps.rejected
				ps.rejected = nil
				return r
			}
			continue
		}
		s.buffered.Add(int64(grew))
		ps.size.Store(int64(ps.buf.size))
		ps.lastAdd = time.Now()
		if err := s.advanceLocked(ctx, ps); err != nil || ps.gone {
			if err != nil {
				s.pos.Rewind(ps.part, m.Offset+1) // the rest of the batch comes again
			}
			return err
		}
	}
	// A batch retried after a failed upload: all of it was buffered or sent.
	if err := s.advanceLocked(ctx, ps); err != nil {
		return err
	}
	if r := ps.rejected; r != nil && len(msgs) > 0 {
		ps.rejected = nil
		// Only this batch's: a batch the runtime gave up on meanwhile took its own with it.
		lo, hi := msgs[0].Offset, msgs[len(msgs)-1].Offset
		r.Offsets = slices.DeleteFunc(r.Offsets, func(o uint64) bool { return o < lo || o > hi })
		if len(r.Offsets) > 0 {
			return r
		}
	}
	return nil
}

// advanceLocked uploads ps's object when it is full, starts streaming it when it holds a
// part but is not full, and feeds it when it streams.
func (s *Sink) advanceLocked(ctx context.Context, ps *partState) error {
	switch {
	case ps.gone:
		return nil
	case s.full(ps):
		return s.flushLocked(ctx, ps)
	case ps.up != nil:
		return s.feedLocked(ctx, ps)
	case ps.buf.size >= uint64(s.cfg.PartSize):
		return s.startLocked(ctx, ps)
	}
	return nil
}

// full reports whether ps's buffer reached an object's limit.
func (s *Sink) full(ps *partState) bool {
	return !ps.buf.empty() && (ps.buf.count >= s.cfg.MaxMessages || ps.buf.total >= s.cfg.maxBytes)
}

// partition returns p's state, creating it when the runtime delivers before any
// assignment was announced (it always announces first to a PartitionSeeker).
func (s *Sink) partition(topic sdk.TopicMetadata, p sdk.Partition) *partState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.parts[p]
	if ps == nil {
		ps = &partState{topic: topic, part: p}
		s.parts[p] = ps
	}
	return ps
}

// settleAll waits for every upload running in the background and reports whether there
// was one.
func (s *Sink) settleAll(ctx context.Context) (bool, error) {
	waited := false
	for _, ps := range s.snapshot() {
		ps.mu.Lock()
		if ps.inflight != nil && !ps.gone {
			waited = true
			if err := s.settleLocked(ctx, ps, true); err != nil {
				ps.mu.Unlock()
				return waited, err
			}
		}
		ps.mu.Unlock()
	}
	return waited, nil
}

// largest returns the partition with the most bytes buffered, nil when all are empty.
func (s *Sink) largest() *partState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var big *partState
	for _, ps := range s.parts {
		if ps.size.Load() > 0 && (big == nil || ps.size.Load() > big.size.Load()) {
			big = ps
		}
	}
	return big
}

// flushLocked uploads ps's buffer as one object and then commits its last offset. The key
// names the offsets, so a second upload of the same messages (a retry whose first attempt
// landed, another owner) is refused by the conditional PUT and counts as written.
func (s *Sink) flushLocked(ctx context.Context, ps *partState) error {
	b := &ps.buf
	if ps.gone || b.empty() && ps.up == nil {
		return nil
	}
	if ps.up != nil {
		return s.finishLocked(ctx, ps)
	}
	// The previous object first: committed before this one is uploaded, and "still ours?"
	// below asks with its offset.
	if err := s.settleLocked(ctx, ps, true); err != nil {
		return err // the buffer is kept
	}
	if s.revokedLocked(ps) {
		return nil
	}
	kc := keyCtx{stream: ps.topic.Stream, topic: ps.topic.Topic, partition: ps.part.PartitionID, firstTS: b.firstTS, gen: ps.gen}
	key := objectKey(s.cfg.Prefix, s.tpl, kc, b.first, b.last, s.cfg.Format)
	f := &inflight{key: key, id: ps.identity(), last: b.last, held: int64(b.size), done: make(chan struct{})}
	if s.cfg.Format == formatParquet {
		// The rows go with the object; the buffer fills the rows slice of the object before.
		pq := ps.pq
		if pq == nil {
			pq = &fileEncoder{}
		}
		f.rows, f.schema, f.first, f.pq = b.rows, b.schema, b.first, pq
		b.rows, pq.spare, ps.pq = pq.spare, nil, nil
	} else {
		f.body = b.finish(&s.cfg)
	}
	ps.buf.reset() // its bytes stay counted in buffered as f.held
	if s.cfg.Format != formatParquet {
		// body is the buffer's memory: the next object fills the one uploaded before.
		ps.buf.data, ps.spare = ps.spare, nil
	}
	ps.size.Store(0)
	ps.inflight = f
	ctype := contentType(s.cfg.Format)
	part := ps.part
	s.uploads.Go(func() {
		defer close(f.done)
		if f.rows != nil {
			s.encoders <- struct{}{}
			f.err = s.encode(f)
			<-s.encoders
			if f.err != nil {
				return // settleLocked encodes it again
			}
		}
		f.err = s.attempt(s.puts, key, func() error { return s.st.put(s.puts, key, f.body, ctype, f.id) })
		if f.err == nil || errors.Is(f.err, errExists) {
			s.free(f)
			f.commitErr = s.pos.Durable(part, f.last) // at once: the runtime may be waiting for it
		}
	})
	return nil
}

// settleLocked finishes ps's upload in the background, if any: when it is done (block:
// once it is done) it commits the object's last offset, or, when the upload failed, tries
// it again here and returns the error if that fails too (the object stays in flight: the
// next call tries again, and nothing after it is committed meanwhile).
func (s *Sink) settleLocked(ctx context.Context, ps *partState, block bool) error {
	f := ps.inflight
	if f == nil {
		return nil
	}
	if block {
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("s3 sink: waiting for the upload of %s: %w", f.key, ctx.Err())
		}
	} else {
		select {
		case <-f.done:
		default:
			return nil
		}
	}
	ps.inflight = nil
	err := f.err
	if err == nil || errors.Is(err, errExists) { // uploaded and committed in the background
		s.reuse(ps, f)
		s.uploaded(f.key, len(f.body), err)
		s.committedLocked(ps, f.key, f.commitErr)
		return nil
	}
	if f.rows != nil { // its encoding failed: once more here
		if err := s.encode(f); err != nil {
			f.err = err
			ps.inflight = f
			return err
		}
	}
	err = s.attempt(ctx, f.key, func() error { return s.st.put(ctx, f.key, f.body, contentType(s.cfg.Format), f.id) })
	if err != nil && !errors.Is(err, errExists) {
		f.err = err
		ps.inflight = f
		return err
	}
	s.reuse(ps, f)
	s.uploaded(f.key, len(f.body), err)
	s.free(f)
	s.commitLocked(ps, f.last, f.key)
	return nil
}

// encode encodes f's rows into its body, then hands the rows slice, cleared, to its
// encoder for a later object.
func (s *Sink) encode(f *inflight) error {
	var body []byte
	var err error
	if s.encodeFault != nil {
		err = s.encodeFault(f.key)
	}
	if err == nil {
		body, err = f.pq.encode(&s.cfg, f.schema, f.rows, f.first, f.last)
	}
	if err != nil {
		return fmt.Errorf("s3 sink: %w", err)
	}
	clear(f.rows)
	f.body, f.pq.spare, f.rows = body, f.rows[:0], nil
	return nil
}

// reuse keeps the memory of an uploaded JSON or raw object for the partition's next one,
// and takes back the Parquet encoder lent to it.
func (s *Sink) reuse(ps *partState, f *inflight) {
	if s.cfg.Format != formatParquet {
		ps.spare = f.body[:0]
	} else {
		ps.pq = f.pq
	}
}

// uploaded logs an object's upload: err is nil or errExists.
func (s *Sink) uploaded(key string, size int, err error) {
	if errors.Is(err, errExists) {
		s.log.Info("s3 sink: object already in the bucket (its metadata names this range); counted as written", "key", key)
		return
	}
	s.log.Debug("s3 sink: uploaded", "key", key, "bytes", size)
}

// contentType is the Content-Type of an object of the given format.
func contentType(f format) string {
	switch f {
	case formatParquet:
		return "application/vnd.apache.parquet"
	case formatJSONLines:
		return "application/x-ndjson"
	case formatJSONArray:
		return "application/json"
	}
	return "application/octet-stream"
}

// revokedLocked answers whether ps was revoked, and then releases it: the runtime is
// asked whether the partition is still the sink's (sdk.Positions.Owned); when it is not,
// another member may write these offsets.
func (s *Sink) revokedLocked(ps *partState) bool {
	if s.pos.Owned(ps.part) {
		return false
	}
	s.log.Info("s3 sink: partition revoked; its buffer is dropped", "partition", ps.part.PartitionID,
		"first", ps.buf.first, "last", ps.buf.last)
	s.releaseLocked(s.bg, ps)
	return true
}

// commitLocked records that last, the last offset of an object now in the bucket under
// key, is durable: the Positions commit it.
func (s *Sink) commitLocked(ps *partState, last uint64, key string) {
	s.committedLocked(ps, key, s.pos.Durable(ps.part, last))
}

// committedLocked records the outcome err of the commit of an object's last offset.
func (s *Sink) committedLocked(ps *partState, key string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, sdk.ErrCommitUnknownPartition):
		ps.gone = true
		s.log.Info("s3 sink: partition revoked after an upload", "key", key, "err", err)
	default:
		s.log.Warn("s3 sink: commit refused", "key", key, "err", err)
	}
}

// maxRetryDelay caps the wait between the attempts of a request.
const maxRetryDelay = 60 * time.Second

// attempt runs one request on key up to max_attempts times, waiting retry_delay, doubled
// after each failure up to a minute, in between. errExists, errForeign and errNoUpload
// are answers, not failures: they end it at once.
func (s *Sink) attempt(ctx context.Context, key string, req func() error) error {
	n := 0
	retry := sdk.Retry{Initial: s.cfg.RetryDelay, Max: maxRetryDelay, Attempts: s.cfg.MaxAttempts,
		What: "s3 sink: upload", Log: s.log, LogAttrs: []any{"key", key}, Transient: isTransient}
	err := retry.Do(ctx, func(context.Context, int) error { n++; return req() })
	switch {
	case err == nil, errors.Is(err, errExists), errors.Is(err, errNoUpload):
		return err
	case errors.Is(err, errForeign):
		return fmt.Errorf("s3 sink: %w", err)
	case ctx.Err() != nil:
		return fmt.Errorf("s3 sink: upload of %s abandoned: %w", key, err)
	}
	return fmt.Errorf("s3 sink: upload failed after %d attempts: %w", n, err)
}

// isTransient says which failures of a request are worth another attempt: not the
// answers about the key (taken by this object or another, an upload gone).
func isTransient(err error) bool {
	return !errors.Is(err, errExists) && !errors.Is(err, errNoUpload) && !errors.Is(err, errForeign)
}

// flusher uploads every partition that got nothing for flush_interval, until Close.
func (s *Sink) flusher() {
	defer close(s.done)
	tick := max(s.cfg.FlushInterval/4, 5*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.bg.Done():
			return
		case <-t.C:
		}
		for _, ps := range s.snapshot() {
			ps.mu.Lock()
			if !ps.gone {
				if err := s.settleLocked(s.bg, ps, false); err != nil && s.bg.Err() == nil {
					s.log.Warn("s3 sink: upload failed; retrying", "partition", ps.part.PartitionID, "err", err)
				}
			}
			if (!ps.buf.empty() || ps.up != nil) && time.Since(ps.lastAdd) >= s.cfg.FlushInterval {
				if err := s.flushLocked(s.bg, ps); err != nil && s.bg.Err() == nil {
					s.log.Warn("s3 sink: flush of an idle partition failed; retrying", "partition", ps.part.PartitionID, "err", err)
				}
			}
			ps.mu.Unlock()
		}
	}
}

func (s *Sink) snapshot() []*partState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*partState, 0, len(s.parts))
	for _, ps := range s.parts {
		out = append(out, ps)
	}
	return out
}

// Close stops the flusher and uploads and commits every buffer; ctx bounds the uploads
// (those it cuts short are cancelled: their messages were not committed). It returns once
// no upload runs any more. It is idempotent.
func (s *Sink) Close(ctx context.Context) error {
	if s.cancel == nil || !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.cancel()
	<-s.done
	var errs []error
	for _, ps := range s.snapshot() {
		ps.mu.Lock()
		err := s.flushLocked(ctx, ps)
		if err == nil && !ps.gone {
			err = s.settleLocked(ctx, ps, true)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", ps.part.PartitionID, err))
		}
		ps.mu.Unlock()
	}
	s.cancelPuts()
	s.uploads.Wait()
	s.st.close()
	return errors.Join(errs...)
}
