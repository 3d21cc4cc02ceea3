package iceberg

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/sdk"
)

// Sink appends each message's row to its tables exactly once: see the package comment.
// Its calls are safe for concurrent use; a flush holds the sink's lock.
type Sink struct {
	cfg       config
	key       string
	log       *slog.Logger
	onFailure sdk.OnFailure
	pos       *sdk.Positions
	cat       catalog.Catalog
	closeCat  func() error

	mu       sync.Mutex
	tables   map[string]*tableState // by namespace.table, every table of plugin_config.tables
	topics   map[sdk.Partition]sdk.TopicMetadata
	consumed map[sdk.Partition]uint64 // the last offset taken in (buffered, skipped, rejected) not yet committed
	buffered int                      // rows in every buffer
	parser   fastjson.Parser
	row      []value
	closed   bool
	stats    stats

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// stats count the flushes that committed something (the benchmark reports them).
type stats struct {
	commits int           // table commits
	files   int           // data files they added
	took    time.Duration // the flushes' time
}

// tableState is one table the sink writes.
type tableState struct {
	name   string
	ident  table.Identifier
	tbl    *table.Table
	schema *arrow.Schema
	fill   []filler
	// next is, per partition, the offset after the last one the table holds: rows below
	// it are not written again.
	next map[sdk.Partition]uint64
	// gen is, per partition, the generation its rows are written in: the table's, one
	// more once the partition went back to offset 0 (Rewound).
	gen   map[sdk.Partition]uint64
	parts map[sdk.Partition]*partBuf
}

// partBuf is one partition's rows for one table since the last commit.
type partBuf struct {
	b           *array.RecordBuilder
	rows        int
	first, last uint64
	lastTS      uint64             // the server timestamp of the message at last
	files       []iceberg.DataFile // written, not committed yet
}

var (
	_ sdk.Sink           = (*Sink)(nil)
	_ sdk.PositionKeeper = (*Sink)(nil)
	_ sdk.RewindSeeker   = (*Sink)(nil)
)

// New returns an unopened Iceberg sink.
func New() *Sink { return &Sink{} }

// Open reads plugin_config, connects to the catalog and loads (or creates) every table.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("iceberg sink: %w", err))
	}
	if env.Committer == nil {
		return sdk.Permanent(errors.New(`iceberg sink: offset_commit = "sink_controlled" is required (the sink commits a partition's offsets once its rows are in the table's snapshot, and resumes from the snapshots)`))
	}
	s.cfg, s.key, s.log, s.onFailure = cfg, env.Key, env.Logger, env.OnFailure
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.key == "" {
		s.key = "sink"
	}
	warehouse, err := warehouseLocation(&cfg)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("iceberg sink: %w", err))
	}
	open := sdk.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Attempts: 5, Jitter: 0.2, What: "open the catalog", Log: s.log}
	err = open.Do(ctx, func(ctx context.Context, _ int) error {
		var err error
		s.cat, s.closeCat, err = openCatalog(ctx, &cfg, warehouse)
		return err
	})
	if err != nil {
		return fmt.Errorf("iceberg sink: %w", err)
	}
	s.tables = map[string]*tableState{}
	for _, name := range cfg.Tables {
		ident, _ := parseIdent(name) // the config's check parsed it
		var tbl *table.Table
		err := open.Do(ctx, func(ctx context.Context, _ int) error {
			var err error
			tbl, err = loadOrCreate(ctx, s.cat, &cfg, ident, s.log)
			return err
		})
		if err != nil {
			_ = s.closeCat()
			return fmt.Errorf("iceberg sink: %w", err)
		}
		ts, err := s.newTable(name, ident, tbl)
		if err != nil {
			_ = s.closeCat()
			return sdk.Permanent(fmt.Errorf("iceberg sink: table %s: %w", name, err))
		}
		s.tables[name] = ts
	}
	s.topics = map[sdk.Partition]sdk.TopicMetadata{}
	s.consumed = map[sdk.Partition]uint64{}
	s.pos = sdk.NewPositionsAt(env, s.load)
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.flusher()
	s.log.Info("iceberg sink open", "catalog_type", cfg.CatalogType, "uri", redactURL(cfg.URI), "warehouse", warehouse,
		"tables", cfg.Tables, "flush_interval", cfg.FlushInterval)
	return nil
}

func (s *Sink) newTable(name string, ident table.Identifier, tbl *table.Table) (*tableState, error) {
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return nil, err
	}
	if s.cfg.IncludeMetadata {
		for _, m := range metadataColumns {
			if _, ok := tbl.Schema().FindFieldByName(m.Name); !ok {
				return nil, fmt.Errorf("include_metadata is on but the table has no column %q", m.Name)
			}
		}
	}
	fill, err := fillers(sc, s.cfg.IncludeMetadata)
	if err != nil {
		return nil, err
	}
	if len(fill) > len(s.row) {
		s.row = make([]value, len(fill))
	}
	return &tableState{name: name, ident: ident, tbl: tbl, schema: sc, fill: fill,
		next: map[sdk.Partition]uint64{}, gen: map[sdk.Partition]uint64{}, parts: map[sdk.Partition]*partBuf{}}, nil
}

// KeepsPositions implements sdk.PositionKeeper.
func (s *Sink) KeepsPositions() bool { return true }

// Assigned implements sdk.PartitionSeeker: Positions without the timestamps.
func (s *Sink) Assigned(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	at, err := s.Positions(ctx, topic, parts)
	if err != nil {
		return nil, err
	}
	out := make(map[sdk.Partition]uint64, len(at))
	for p, v := range at {
		out[p] = v.Next
	}
	return out, nil
}

// Positions implements sdk.RewindSeeker: what is buffered is written and committed
// first, then each table's snapshots say where each partition resumes, with the
// timestamp of the last message the table holds (the runtime checks it: a partition
// purged while the sink was away is found rewound).
func (s *Sink) Positions(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(ctx); err != nil {
		return nil, err
	}
	for _, p := range parts {
		s.topics[p] = topic
		delete(s.consumed, p)
	}
	return s.pos.Positions(ctx, topic, parts)
}

// Rewound implements sdk.RewindSeeker: a partition that went back to offset 0 (purged)
// is written in the next generation of each table, so the offsets its snapshots hold
// (the purged messages') no longer drop the new messages as written already. The rows of
// the purged messages stay in the tables.
func (s *Sink) Rewound(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, len(parts))
	for i, p := range parts {
		keys[i] = offsetKey(s.key, topic.Stream, topic.Topic, p.PartitionID)
	}
	for _, ts := range s.tables {
		tbl, err := s.cat.LoadTable(ctx, ts.ident)
		if err != nil {
			return fmt.Errorf("iceberg sink: load table %s: %w", ts.name, err)
		}
		ts.tbl = tbl
		found, err := tableMarks(tbl, keys)
		if err != nil {
			return fmt.Errorf("iceberg sink: %w", err)
		}
		for i, p := range parts {
			if pb := ts.parts[p]; pb != nil {
				if pb.b != nil {
					pb.b.Release()
				}
				s.buffered -= pb.rows
				delete(ts.parts, p)
			}
			delete(ts.next, p)
			if m, ok := found[keys[i]]; ok {
				ts.gen[p] = m.generation + 1
			}
		}
	}
	for _, p := range parts {
		s.topics[p] = topic
		delete(s.consumed, p)
		s.pos.Forget(p)
		s.log.Warn("iceberg sink: partition went back to offset 0 (purged); its rows are written in a new generation, the purged messages' rows stay in the tables",
			"stream", topic.Stream, "topic", topic.Topic, "partition", p.PartitionID)
	}
	return nil
}

// load reads each table's offsets of parts (s.mu held). A partition resumes after the
// lowest offset among the tables that hold it (with that table's timestamp of it); with
// static routing every table gets every message, so a table that holds nothing of it
// (new in plugin_config.tables) leaves it to the group's offset in Iggy. Rows a table
// already holds are skipped for that table alone.
func (s *Sink) load(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
	out := map[sdk.Partition]sdk.Position{}
	holders := map[sdk.Partition]int{}
	for _, ts := range s.tables {
		tbl, err := s.cat.LoadTable(ctx, ts.ident)
		if err != nil {
			return nil, fmt.Errorf("iceberg sink: load table %s: %w", ts.name, err)
		}
		ts.tbl = tbl
		keys := make([]string, len(parts))
		for i, p := range parts {
			keys[i] = offsetKey(s.key, topic.Stream, topic.Topic, p.PartitionID)
		}
		found, err := tableMarks(tbl, keys)
		if err != nil {
			return nil, fmt.Errorf("iceberg sink: %w", err)
		}
		for i, p := range parts {
			m, ok := found[keys[i]]
			if !ok {
				delete(ts.next, p)
				delete(ts.gen, p)
				continue
			}
			ts.next[p] = m.last + 1
			ts.gen[p] = m.generation
			holders[p]++
			if cur, seen := out[p]; !seen || m.last+1 < cur.Next {
				out[p] = sdk.Position{Next: m.last + 1, Timestamp: m.timestamp}
			}
		}
	}
	if !s.cfg.DynamicRouting {
		for p := range out {
			if holders[p] < len(s.tables) {
				delete(out, p)
			}
		}
	}
	for _, p := range parts {
		s.log.Debug("iceberg sink: partition assigned", "stream", topic.Stream, "topic", topic.Topic,
			"partition", p.PartitionID, "resume_at", out[p].Next)
	}
	return out, nil
}

// Consume converts each new message to a row of each of its tables and buffers it; the
// flush writes and commits. A message that does not convert is rejected (on_failure).
func (s *Sink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("iceberg sink: closed")
	}
	p := meta.Partition
	s.topics[p] = topic
	fresh := s.pos.Fresh(p, msgs)
	var rejected *sdk.RejectedMessages
	targets := make([]*tableState, 0, len(s.tables))
	for i := range fresh {
		m := &fresh[i]
		err := s.take(topic, p, m, &targets)
		if err != nil {
			if rejected == nil {
				rejected = &sdk.RejectedMessages{Err: fmt.Errorf("iceberg sink: partition %d offset %d: %w", p.PartitionID, m.Offset, err)}
			}
			rejected.Offsets = append(rejected.Offsets, m.Offset)
			if !s.onFailure.MayPassRejected() {
				break // nothing at or past it may be committed
			}
		}
		s.consumed[p] = m.Offset
	}
	if s.buffered >= s.cfg.MaxBufferedRows {
		if err := s.flushLocked(ctx); err != nil {
			return err
		}
	}
	if rejected != nil {
		return rejected
	}
	return nil
}

// take converts m for each of its tables and appends the rows; an error leaves every
// buffer as it was.
func (s *Sink) take(topic sdk.TopicMetadata, p sdk.Partition, m *sdk.ConsumedMessage, targets *[]*tableState) error {
	doc, err := s.parser.ParseBytes(m.Payload)
	if err != nil {
		return fmt.Errorf("the payload is not JSON: %w", err)
	}
	*targets = (*targets)[:0]
	if s.cfg.DynamicRouting {
		v := doc.Get(s.cfg.DynamicRouteField)
		name, err := v.StringBytes()
		if v == nil || err != nil {
			return fmt.Errorf("dynamic_route_field %q: the payload has no such string field", s.cfg.DynamicRouteField)
		}
		ts := s.tables[string(name)]
		if ts == nil {
			return fmt.Errorf("dynamic_route_field %q names table %q, which plugin_config.tables does not list", s.cfg.DynamicRouteField, name)
		}
		*targets = append(*targets, ts)
	} else {
		for _, name := range s.cfg.Tables {
			*targets = append(*targets, s.tables[name])
		}
	}
	mm := msgMeta{stream: topic.Stream, topic: topic.Topic, partition: p.PartitionID, offset: m.Offset, timestamp: m.Timestamp}
	// Convert for every table first: a refusal by one must not leave the row in another.
	var rows [][]value
	for _, ts := range *targets {
		if next, ok := ts.next[p]; ok && m.Offset < next {
			rows = append(rows, nil) // the table holds it
			continue
		}
		row := make([]value, len(ts.fill))
		if err := convert(ts.fill, doc, &mm, row); err != nil {
			if len(*targets) > 1 {
				return fmt.Errorf("table %s: %w", ts.name, err)
			}
			return err
		}
		rows = append(rows, row)
	}
	for i, ts := range *targets {
		if rows[i] == nil {
			continue
		}
		pb := ts.parts[p]
		if pb == nil {
			pb = &partBuf{first: m.Offset}
			ts.parts[p] = pb
		}
		if pb.b == nil {
			pb.b = array.NewRecordBuilder(memory.DefaultAllocator, ts.schema)
		}
		appendRow(pb.b, ts.fill, rows[i])
		pb.rows++
		pb.last = m.Offset
		pb.lastTS = m.Timestamp
		s.buffered++
	}
	return nil
}

// flusher flushes every flush_interval until Close or a crash.
func (s *Sink) flusher() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		s.mu.Lock()
		var err error
		if !s.closed {
			err = s.flushLocked(ctx)
		}
		s.mu.Unlock()
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("iceberg sink: flush failed; the rows stay buffered for the next", "err", err)
		}
	}
}

// flushLocked writes every buffered row as data files, commits each table once, and
// then commits to Iggy each partition none of whose rows is still buffered.
func (s *Sink) flushLocked(ctx context.Context) error {
	start := time.Now()
	defer func() {
		if s.stats.commits > 0 {
			s.stats.took += time.Since(start)
		}
	}()
	var errs []error
	for _, name := range s.cfg.Tables {
		ts := s.tables[name]
		if len(ts.parts) == 0 {
			continue
		}
		if err := s.flushTable(ctx, ts); err != nil {
			errs = append(errs, fmt.Errorf("iceberg sink: table %s: %w", ts.name, err))
		}
	}
	for _, p := range slices.Collect(maps.Keys(s.consumed)) {
		held := false
		for _, ts := range s.tables {
			if ts.parts[p] != nil {
				held = true
			}
		}
		if held {
			continue
		}
		last := s.consumed[p]
		delete(s.consumed, p)
		if err := s.pos.Durable(p, last); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
			s.log.Warn("iceberg sink: commit to Iggy failed", "partition", p.PartitionID, "offset", last, "err", err)
		}
	}
	return errors.Join(errs...)
}

// flushTable writes ts's buffered rows (a data file set per partition) and commits them
// in one append, retried on fresh metadata.
func (s *Sink) flushTable(ctx context.Context, ts *tableState) error {
	for _, pb := range ts.parts {
		if pb.b == nil || pb.rows == 0 {
			continue
		}
		rec := pb.b.NewRecordBatch()
		files, err := writeFiles(ctx, ts.tbl, ts.schema, rec)
		if err != nil {
			return fmt.Errorf("write data files: %w", err)
		}
		pb.files = append(pb.files, files...)
		s.buffered -= pb.rows
		pb.rows = 0
	}
	retry := sdk.Retry{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Attempts: s.cfg.CommitAttempts, Jitter: 0.3,
		What: "commit to table " + ts.name, Log: s.log}
	return retry.Do(ctx, func(ctx context.Context, attempt int) error {
		if attempt > 1 {
			tbl, err := s.cat.LoadTable(ctx, ts.ident)
			if err != nil {
				return fmt.Errorf("reload: %w", err)
			}
			ts.tbl = tbl
		}
		return s.commitTable(ctx, ts)
	})
}

// commitTable appends the data files of every partition whose range the table does not
// hold yet, with the offsets in the snapshot summary, asserting the snapshot read.
func (s *Sink) commitTable(ctx context.Context, ts *tableState) error {
	keys := map[sdk.Partition]string{}
	var list []string
	for p := range ts.parts {
		t := s.topics[p]
		keys[p] = offsetKey(s.key, t.Stream, t.Topic, p.PartitionID)
		list = append(list, keys[p])
	}
	stored, err := tableMarks(ts.tbl, list)
	if err != nil {
		return sdk.Permanent(err)
	}
	props := carried(ts.tbl)
	var files []iceberg.DataFile
	for p, pb := range ts.parts {
		// Offsets of an older generation are the purged messages': they hold nothing of
		// this range. A newer one is another owner's, which found the partition rewound.
		m, ok := stored[keys[p]]
		if ok && m.generation < ts.gen[p] {
			ok = false
		}
		if ok && m.generation > ts.gen[p] {
			s.log.Warn("iceberg sink: another writer found this partition purged and writes a newer generation; dropping this range (the partition has a new owner)",
				"table", ts.name, "partition", p.PartitionID, "first", pb.first, "last", pb.last)
			s.pos.Forget(p)
			delete(s.consumed, p)
			delete(ts.parts, p)
			continue
		}
		if have := m.last; ok && have >= pb.first {
			if have < pb.last {
				// Another owner (a rebalance) wrote part of this range: this instance no
				// longer owns the partition; its rows are the new owner's to write.
				s.log.Warn("iceberg sink: another writer appended part of this partition's range; dropping the rest (the partition has a new owner)",
					"table", ts.name, "partition", p.PartitionID, "first", pb.first, "last", pb.last, "table_holds", have)
				s.pos.Forget(p)
				delete(s.consumed, p)
			}
			ts.next[p] = max(ts.next[p], have+1)
			delete(ts.parts, p)
			continue
		}
		files = append(files, pb.files...)
		props[keys[p]] = strconv.FormatUint(pb.last, 10)
		props[siblingKey(keys[p], timestampPrefix)] = strconv.FormatUint(pb.lastTS, 10)
		if g := ts.gen[p]; g > 0 {
			props[siblingKey(keys[p], generationPrefix)] = strconv.FormatUint(g, 10)
		}
	}
	if len(files) == 0 {
		return nil
	}
	tx := ts.tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return err
	}
	if err := tx.AddDataFiles(ctx, files, props, table.WithoutDuplicateCheck()); err != nil {
		return fmt.Errorf("stage the append: %w", err)
	}
	tbl, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	ts.tbl = tbl
	s.stats.commits++
	s.stats.files += len(files)
	for p, pb := range ts.parts {
		ts.next[p] = pb.last + 1
	}
	clear(ts.parts)
	return nil
}

// writeFiles writes one record batch as the table's data files (Parquet, split by the
// table's partition spec).
func writeFiles(ctx context.Context, tbl *table.Table, sc *arrow.Schema, rec arrow.RecordBatch) ([]iceberg.DataFile, error) {
	seq := iter.Seq2[arrow.RecordBatch, error](func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })
	var out []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sc, seq) {
		if err != nil {
			return nil, err
		}
		out = append(out, df)
	}
	return out, nil
}

// Close writes and commits what is buffered, then closes the catalog.
func (s *Sink) Close(ctx context.Context) error {
	if s.stop == nil {
		return nil
	}
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if ctx.Err() == nil {
		err = s.flushLocked(ctx)
	}
	for _, ts := range s.tables {
		for _, pb := range ts.parts {
			if pb.b != nil {
				pb.b.Release()
			}
		}
	}
	return errors.Join(err, s.closeCat())
}

// crash stops the sink as the death of its process would: nothing more is flushed.
func (s *Sink) crash() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.stop != nil {
		s.once.Do(func() { close(s.stop) })
	}
}
