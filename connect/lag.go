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

// lagMaxAge is how long one read of a topic's offsets is served to every caller: the
// status route, the offsets route, the status page and a metrics scrape share it, so
// Iggy sees one read per topic per second at most, however many ask.
const lagMaxAge = time.Second

// lagReadTimeout bounds one read of a topic's offsets (a server that does not answer
// makes the surfaces answer without its offsets, not hang).
const lagReadTimeout = 5 * time.Second

// PartitionNotOwned is PartitionStatus.State for a partition of a sink's topic that is in
// none of its partition tables: the sink is not running (paused sinks keep theirs), or
// another member of the group owns it.
const PartitionNotOwned = "not_owned"

type lagTopic struct{ group, stream, topic string }

// lagRead is one read of a topic's offsets; parts and err are set before done closes.
type lagRead struct {
	done  chan struct{}
	start time.Time
	parts []groupPartition
	err   error
}

// lagReader reads each partition's current offset and the group's stored offset of a
// sink topic from Iggy (a GetTopic and one GetConsumerOffset per partition: Iggy has no
// request that answers a group's offsets of every partition at once), at most once per
// maxAge per topic; callers that ask meanwhile get that read, and callers that ask while
// it is in flight wait for it. A failed read is kept as long as a good one. Safe for
// concurrent use.
type lagReader struct {
	adm    offsetAdmin // nil: every read fails with errNoAdmin
	maxAge time.Duration
	reads  atomic.Uint64 // reads sent to Iggy

	mu     sync.Mutex
	topics map[lagTopic]*lagRead
}

func newLagReader(be backend) *lagReader {
	adm, _ := be.(offsetAdmin)
	return &lagReader{adm: adm, maxAge: lagMaxAge, topics: map[lagTopic]*lagRead{}}
}

// read returns the topic's partitions as Iggy answered within maxAge. The read itself
// is not cut short by ctx (others may wait for it); ctx only bounds this caller's wait.
func (l *lagReader) read(ctx context.Context, t lagTopic) ([]groupPartition, error) {
	if l.adm == nil {
		return nil, errNoAdmin
	}
	l.mu.Lock()
	r := l.topics[t]
	mine := r == nil || (isClosed(r.done) && time.Since(r.start) >= l.maxAge)
	if mine {
		r = &lagRead{done: make(chan struct{}), start: time.Now()}
		l.topics[t] = r
	}
	l.mu.Unlock()
	if mine {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lagReadTimeout)
		r.parts, r.err = l.adm.groupOffsets(rctx, t.group, t.stream, t.topic)
		cancel()
		l.reads.Add(1)
		close(r.done)
	}
	select {
	case <-r.done:
		return r.parts, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// forget drops the read of t: the next caller asks Iggy again. Callers already waiting
// for a read in flight still get it. The runtime forgets a topic when it changed the
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

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// lagOf is the number of messages after stored up to current (offsets, -1 = none).
func lagOf(current, stored int64) uint64 {
	return uint64(current+1) - uint64(min(stored+1, current+1))
}

// SinkPartitions returns every partition of every topic of the sink st describes (a
// status from Status or Connector), in every state the sink may be in: the partition's
// current offset and the group's stored offset read from Iggy (lagReader: at most one
// read per topic per second, shared by every caller), and Lag = current − stored. A
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
			parts, err := r.lag.read(ctx, lagTopic{group, st.Stream, topic})
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
				p.FromServer = true
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
