package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
)

// lagMaxAge is how long one read of a topic's offsets is fresh: the status route, the
// offsets route, the status page and a metrics scrape share it, so Iggy sees one read per
// topic per second at most, however many ask.
const lagMaxAge = time.Second

// lagReadTimeout bounds one read of a topic's offsets. Callers do not wait for a refresh
// (they get the kept read meanwhile), so it may be long: a topic of 10,000 partitions is
// 10,000 requests.
const lagReadTimeout = 30 * time.Second

// lagWait bounds a caller's wait for a topic's first read (none is kept yet): past it the
// surfaces answer without Iggy's offsets, not hang, and the read goes on for later callers.
const lagWait = 5 * time.Second

// PartitionNotOwned is PartitionStatus.State for a partition of a sink's topic that is in
// none of its partition tables: the sink is not running (paused sinks keep theirs), or
// another member of the group owns it.
const PartitionNotOwned = "not_owned"

type lagTopic struct{ group, stream, topic string }

// lagRead is one read of a topic's offsets; parts and err are set before done closes.
// start is when it began: what it answers is at least that old.
type lagRead struct {
	done  chan struct{}
	start time.Time
	parts []groupPartition
	err   error
}

// lagEntry is a topic's reads: the last one that ended, and the one in flight.
type lagEntry struct {
	kept    *lagRead // nil: none ended yet
	running *lagRead // nil: none in flight
}

// lagReader reads each partition's current offset and the group's stored offset of a
// sink topic from Iggy (offsetAdmin.groupOffsets: a GetTopic and one GetConsumerOffset
// per partition, a few at a time: Iggy has no request that answers a group's offsets of
// every partition at once), at most once per maxAge per topic, and keeps the last read:
//
//   - a read younger than maxAge is served as it is;
//   - an older one is served at once too, marked with its start (ReadAt), while a new
//     read runs in the background: no caller waits for a refresh, however many
//     partitions the topic has;
//   - only a topic with no read kept (the first ask, or after forget) makes its callers
//     wait for the read, at most lagWait each.
//
// A failed read is kept as a good one is (its error is served until the next read
// ends). Safe for concurrent use; close ends the background reads.
type lagReader struct {
	adm    offsetAdmin // nil: every read fails with errNoAdmin
	maxAge time.Duration
	wait   time.Duration
	reads  atomic.Uint64 // reads sent to Iggy

	ctx    context.Context // ends at close: the background reads stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // background reads

	mu     sync.Mutex
	closed bool // reads run in the caller's goroutine from now on
	topics map[lagTopic]*lagEntry
}

func newLagReader(be backend) *lagReader {
	adm, _ := be.(offsetAdmin)
	l := &lagReader{adm: adm, maxAge: lagMaxAge, wait: lagWait, topics: map[lagTopic]*lagEntry{}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// read returns the topic's partitions as the kept read of Iggy answered them, and when
// that read began (see lagReader). ctx bounds only this caller's wait for a first read;
// the read itself is not cut short by it (others may wait for it).
func (l *lagReader) read(ctx context.Context, t lagTopic) ([]groupPartition, time.Time, error) {
	if l.adm == nil {
		return nil, time.Time{}, errNoAdmin
	}
	l.mu.Lock()
	e := l.topics[t]
	if e == nil {
		e = &lagEntry{}
		l.topics[t] = e
	}
	if k := e.kept; k != nil && time.Since(k.start) < l.maxAge {
		l.mu.Unlock()
		return k.parts, k.start, k.err
	}
	r, inline := e.running, false
	if r == nil {
		r = &lagRead{done: make(chan struct{}), start: time.Now()}
		e.running = r
		if inline = l.closed; !inline {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.run(l.ctx, t, e, r)
			}()
		}
	}
	kept := e.kept
	l.mu.Unlock()
	if inline { // after close: no goroutine outlives the runtime
		l.run(context.WithoutCancel(ctx), t, e, r)
		return r.parts, r.start, r.err
	}
	if kept != nil {
		return kept.parts, kept.start, kept.err
	}
	wait := time.NewTimer(l.wait)
	defer wait.Stop()
	select {
	case <-r.done:
		return r.parts, r.start, r.err
	case <-wait.C:
		return nil, time.Time{}, fmt.Errorf("%w (read for %s so far)", errLagReading, l.wait)
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
}

// errLagReading: a topic's first read of offsets did not end within lagWait.
var errLagReading = errors.New("the offsets are still being read from Iggy")

// run reads t's offsets into r and keeps r as the topic's read, unless the topic was
// forgotten meanwhile, or the read failed because close ended it (its waiters still get
// r; the next caller reads again).
func (l *lagReader) run(ctx context.Context, t lagTopic, e *lagEntry, r *lagRead) {
	rctx, cancel := context.WithTimeout(ctx, lagReadTimeout)
	r.parts, r.err = l.adm.groupOffsets(rctx, t.group, t.stream, t.topic)
	cancel()
	l.reads.Add(1)
	l.mu.Lock()
	if l.topics[t] == e {
		e.running = nil
		if r.err == nil || !l.closed {
			e.kept = r
		}
	}
	l.mu.Unlock()
	close(r.done)
}

// close ends the background reads and waits for them; later reads run in their caller's
// goroutine (a status asked after the runtime stopped still reads Iggy).
func (l *lagReader) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}

// forget drops the reads of t: the next caller asks Iggy again and waits for that read
// (nothing older is served). Callers already waiting for a read in flight still get it,
// but it is not kept. The runtime forgets a topic when it changed the
// group's offsets itself (SetOffsets), and when a sink's instance stopped or starts: a
// new instance's tables know no offsets yet, so a read from before its start would show
// as current what the old one had stored since.
func (l *lagReader) forget(t lagTopic) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.topics, t)
}

// forgetSink forgets every topic of a sink (forget).
func (l *lagReader) forgetSink(cfg *config.Sink) {
	for _, st := range cfg.Streams {
		group := st.ConsumerGroup
		if group == "" {
			group = config.DefaultConsumerGroup(cfg.Key)
		}
		for _, topic := range st.Topics {
			l.forget(lagTopic{group, st.Stream, topic})
		}
	}
}

// lagOf is the number of messages after stored up to current (offsets, -1 = none).
func lagOf(current, stored int64) uint64 {
	return uint64(current+1) - uint64(min(stored+1, current+1))
}

// SinkPartitions returns every partition of every topic of the sink st describes (a
// status from Status or Connector), in every state the sink may be in: the partition's
// current offset and the group's stored offset read from Iggy (lagReader: at most one
// read per topic per second, shared by every caller; a read older than that is answered
// at once while the next runs, ReadAt says when it began), and Lag = current − stored. A
// partition in one of the sink's tables keeps the table's figures (polled, delivered,
// done, pending, uncommitted, paused) and its current and stored offsets are the newer of
// the table's (its last poll and store) and Iggy's; the others have State
// PartitionNotOwned and -1 for what only a table knows. Sorted by stream, topic and
// partition.
//
// A topic whose offsets cannot be read keeps only its table's entries (FromServer false)
// and the error, naming the stream and topic, is returned with the partitions that could
// be read. ctx bounds the wait for the reads.
func (r *Runtime) SinkPartitions(ctx context.Context, st Status) ([]PartitionStatus, error) {
	if st.Kind != KindSink || st.Sink == nil {
		return st.Partitions, nil
	}
	return r.sinkPartitions(ctx, st.Sink, st.Partitions)
}

func (r *Runtime) sinkPartitions(ctx context.Context, cfg *config.Sink, tables []PartitionStatus) ([]PartitionStatus, error) {
	type pk struct {
		stream, topic string
		id            uint32
	}
	mine := make(map[pk]PartitionStatus, len(tables))
	for _, p := range tables {
		mine[pk{p.Stream, p.Topic, p.Partition}] = p
	}
	var out []PartitionStatus
	var errs []error
	for _, st := range cfg.Streams {
		group := st.ConsumerGroup
		if group == "" {
			group = config.DefaultConsumerGroup(cfg.Key)
		}
		for _, topic := range st.Topics {
			parts, at, err := r.lag.read(ctx, lagTopic{group, st.Stream, topic})
			if err != nil {
				errs = append(errs, fmt.Errorf("stream %s topic %s: %w", st.Stream, topic, err))
				continue // its table entries are added below
			}
			for _, gp := range parts {
				k := pk{st.Stream, topic, gp.id}
				p, ok := mine[k]
				if !ok {
					p = PartitionStatus{Stream: st.Stream, Topic: topic, Partition: gp.id, State: PartitionNotOwned,
						Polled: -1, Delivered: -1, Done: -1, Stored: -1, Current: -1}
				}
				delete(mine, k)
				p.FromServer, p.ReadAt = true, at
				p.Current, p.Stored = max(p.Current, gp.current), max(p.Stored, gp.stored)
				p.Lag = lagOf(p.Current, p.Stored)
				out = append(out, p)
			}
		}
	}
	for _, p := range tables { // topics that could not be read, or a partition Iggy no longer lists
		if _, left := mine[pk{p.Stream, p.Topic, p.Partition}]; left {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, errors.Join(errs...)
}
