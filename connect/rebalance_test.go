package connect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server/servertest"
)

// userHeader is attached to every message of the dead-letter test; it must survive into
// the dead-letter topic.
var userHeader = wire.StringKV("trace", wire.StringValue("abc"))

func iggyConsumerConfig(stream, topic, group string) iggy.ConsumerConfig {
	return iggy.ConsumerConfig{Stream: iggy.Name(stream), Topic: iggy.Name(topic), Group: group, BatchSize: 10,
		PollInterval: time.Millisecond}
}

// partition returns the sdk partition of stream/topic/p with the server's numeric ids.
func (e *iggyEnv) partition(stream, topic string, p uint32) sdk.Partition {
	e.T.Helper()
	t, err := e.Admin.GetTopic(bg(e.T), iggy.Name(stream), iggy.Name(topic))
	if err != nil {
		e.T.Fatal(err)
	}
	s, err := e.Admin.GetStream(bg(e.T), iggy.Name(stream))
	if err != nil {
		e.T.Fatal(err)
	}
	return sdk.Partition{StreamID: s.ID, TopicID: t.ID, PartitionID: p}
}

func (e *iggyEnv) wantNoStream(stream string) {
	e.T.Helper()
	if _, err := e.Admin.GetStream(bg(e.T), iggy.Name(stream)); !errors.Is(err, wire.ErrNotFound) {
		e.T.Fatalf("stream %s: err %v, want not found", stream, err)
	}
}

// wantDeadLetters reads partition 0 of stream/topic from the start and checks it holds
// exactly the source messages first..last of s/t partition 0, in order, with their
// payloads, the user header and the ferry-* headers.
func (e *iggyEnv) wantDeadLetters(t *testing.T, stream, topic string, first, last uint64) {
	t.Helper()
	zero := uint32(0)
	res, err := e.Admin.PollMessages(bg(t), iggy.PollRequest{
		Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
		Stream:   iggy.Name(stream), Topic: iggy.Name(topic), Partition: &zero,
		Strategy: wire.PollOffset(0), Count: 1000,
	})
	if err != nil {
		t.Fatalf("poll dead letters: %v", err)
	}
	defer res.Release()
	if uint64(len(res.Messages)) != last-first+1 {
		t.Fatalf("dead-letter topic holds %d messages, want %d", len(res.Messages), last-first+1)
	}
	for i, m := range res.Messages {
		src := first + uint64(i)
		if m.Offset != uint64(i) || string(m.Payload) != fmt.Sprintf("p0-m%d", src) {
			t.Fatalf("dead letter %d: offset %d payload %q, want offset %d payload p0-m%d", i, m.Offset, m.Payload, i, src)
		}
		kvs, err := m.Headers(nil)
		if err != nil {
			t.Fatalf("dead letter %d headers: %v", i, err)
		}
		want := map[string]wire.HeaderValue{
			"trace":               wire.StringValue("abc"),
			HeaderSourceStream:    wire.StringValue("s"),
			HeaderSourceTopic:     wire.StringValue("t"),
			HeaderSourcePartition: wire.Uint32Value(0),
			HeaderSourceOffset:    wire.Uint64Value(src),
			HeaderStage:           wire.StringValue("consume"),
		}
		if len(kvs) != len(want)+1 {
			t.Fatalf("dead letter %d has %d headers, want %d: %v", i, len(kvs), len(want)+1, kvs)
		}
		for k, w := range want {
			v, ok := wire.LookupKV(kvs, k)
			if !ok || v.Kind != w.Kind || string(v.Raw) != string(w.Raw) {
				t.Fatalf("dead letter %d header %s = %+v (found %t), want %+v", i, k, v, ok, w)
			}
		}
		v, ok := wire.LookupKV(kvs, HeaderError)
		if msg, _ := v.AsString(); !ok || !strings.Contains(msg, "target rejected the batch") {
			t.Fatalf("dead letter %d: %s = %q", i, HeaderError, msg)
		}
	}
}

// asyncSink buffers in Consume and commits from its own flusher goroutine every `every`
// batches, and once more (the final flush) in Close: a sink with asynchronous durability.
type asyncSink struct {
	every int

	mu       sync.Mutex
	c        sdk.Committer
	highest  map[sdk.Partition]uint64
	batches  int
	commits  map[uint32][]uint64
	rejected []error
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

func newAsyncSink(every int) *asyncSink {
	return &asyncSink{every: every, highest: map[sdk.Partition]uint64{}, commits: map[uint32][]uint64{}}
}

func (s *asyncSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.c = env.Committer
	s.kick, s.stop, s.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go s.flusher()
	return nil
}

func (s *asyncSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	s.mu.Lock()
	s.highest[meta.Partition] = msgs[len(msgs)-1].Offset
	s.batches++
	n := s.batches
	s.mu.Unlock()
	if n%s.every == 0 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

func (s *asyncSink) flusher() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			s.flush()
		}
	}
}

func (s *asyncSink) flush() {
	s.mu.Lock()
	pending := s.highest
	s.highest = map[sdk.Partition]uint64{}
	s.mu.Unlock()
	parts := make([]sdk.Partition, 0, len(pending))
	for p := range pending {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartitionID < parts[j].PartitionID })
	for _, p := range parts {
		err := s.c.Commit(p, pending[p])
		s.mu.Lock()
		if err != nil {
			s.rejected = append(s.rejected, err)
		} else {
			s.commits[p.PartitionID] = append(s.commits[p.PartitionID], pending[p])
		}
		s.mu.Unlock()
	}
}

func (s *asyncSink) Close(context.Context) error {
	close(s.stop)
	<-s.done
	s.flush()
	return nil
}

func (s *asyncSink) commitLog(p uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.commits[p]...)
}

func (s *asyncSink) errs() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.rejected...)
}

// groupMembers returns the partitions of each member of the group, sorted by count.
func (e *iggyEnv) groupMembers(stream, topic, group string) [][]uint32 {
	e.T.Helper()
	g, err := e.Admin.GetConsumerGroup(bg(e.T), iggy.Name(stream), iggy.Name(topic), iggy.Name(group))
	if err != nil {
		e.T.Fatal(err)
	}
	var out [][]uint32
	for _, m := range g.Members {
		out = append(out, m.Partitions)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out
}

// TestPipelineRebalance: two runtimes (two connect.Runtime values, separate clients) run
// the same sink in one group over 4 partitions × 400 messages (a slow sink, 4 ms per
// batch of 10). A starts alone; B joins and the group splits 2/2 (read back from the
// server) with both sinks receiving messages; then A stops and B takes every partition.
// At the end every offset 0..399 of every partition was delivered at least once (to A or
// B), each sink saw each partition's offsets in increasing order, and the stored offset of
// every partition is exactly 399.
func TestPipelineRebalance(t *testing.T) {
	for _, mode := range []config.CommitMode{config.CommitAfterConsuming, config.CommitSinkControlled} {
		t.Run(string(mode), func(t *testing.T) {
			const parts, per = 4, 400
			env := newIggyEnv(t, servertest.WithRebalancingTimeout(300*time.Millisecond))
			env.Topic("s", "t", parts)
			for p := uint32(0); p < parts; p++ {
				env.Fill("s", "t", p, per, nil)
			}
			cfg := func() *config.Sink {
				c := testSinkConfig(mode, config.FailureStop)
				c.Commit.Interval = 20 * time.Millisecond
				return c
			}
			sinkA, sinkB := newRecSink(), newRecSink()
			sinkA.delay, sinkB.delay = 4*time.Millisecond, 4*time.Millisecond
			sinkA.commitEach, sinkB.commitEach = true, true
			rtA := env.start(cfg(), sinkA)
			testkit.WaitFor(t, "A owns every partition", func() bool { return len(ownedPartitions(rtA)) == parts })
			rtB := env.start(cfg(), sinkB)
			testkit.WaitFor(t, "group split 2/2", func() bool {
				m := env.groupMembers("s", "t", "g")
				return len(m) == 2 && len(m[0]) == 2 && len(m[1]) == 2 && len(ownedPartitions(rtA)) == 2
			})
			t0 := time.Now()
			testkit.WaitFor(t, "B receives messages", func() bool { return total(sinkB, parts) > 0 })
			t.Logf("B received after %v; A total %d", time.Since(t0), total(sinkA, parts))
			aBefore := total(sinkA, parts)
			if aBefore == parts*per {
				t.Fatal("A delivered everything before the split: the test proves nothing")
			}
			stopRuntime(t, rtA)
			t.Logf("A stopped at %v", time.Since(t0))
			testkit.WaitFor(t, "B owns every partition", func() bool {
				m := env.groupMembers("s", "t", "g")
				return len(m) == 1 && len(m[0]) == parts
			})
			testkit.WaitFor(t, "every partition stored to 399", func() bool {
				for p := uint32(0); p < parts; p++ {
					if o, ok := env.Stored("g", "s", "t", p); !ok || o != per-1 {
						return false
					}
				}
				return true
			})
			t.Logf("all stored at %v; B total %d", time.Since(t0), total(sinkB, parts))
			stopRuntime(t, rtB)
			for p := uint32(0); p < parts; p++ {
				env.WantStored("g", "s", "t", p, per-1)
				seen := make([]bool, per)
				for _, s := range []*recSink{sinkA, sinkB} {
					got := s.got(p)
					for i, o := range got {
						if i > 0 && o <= got[i-1] {
							t.Fatalf("partition %d: offsets out of order %v", p, got)
						}
						seen[o] = true
					}
				}
				for o, ok := range seen {
					if !ok {
						t.Fatalf("partition %d: offset %d never delivered", p, o)
					}
				}
			}
			for _, rt := range []*Runtime{rtA, rtB} {
				if st := rt.Status()[0].Stats; st.CommitsRejected() != 0 {
					t.Fatalf("stats %+v", st)
				}
			}
		})
	}
}

func total(s *recSink, parts uint32) int {
	n := 0
	for p := uint32(0); p < parts; p++ {
		n += len(s.got(p))
	}
	return n
}

// timerSink is a sink_controlled sink with timed durability, like the file sink: Consume
// only records (sleeping delay), and a flusher goroutine commits the highest offset
// delivered per partition every `every` and once more in Close. Commit results are logged.
type timerSink struct {
	every, delay time.Duration

	mu       sync.Mutex
	c        sdk.Committer
	offsets  map[uint32][]uint64
	firstAt  map[uint32]time.Time // when the partition's first batch arrived
	highest  map[sdk.Partition]uint64
	commits  map[uint32][]uint64
	rejected []error
	stop     chan struct{}
	done     chan struct{}
}

func newTimerSink(every, delay time.Duration) *timerSink {
	return &timerSink{every: every, delay: delay, offsets: map[uint32][]uint64{}, firstAt: map[uint32]time.Time{},
		highest: map[sdk.Partition]uint64{}, commits: map[uint32][]uint64{}}
}

func (s *timerSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.c = env.Committer
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(s.every)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.flush()
			}
		}
	}()
	return nil
}

func (s *timerSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := meta.Partition.PartitionID
	if _, ok := s.firstAt[p]; !ok {
		s.firstAt[p] = time.Now()
	}
	for _, m := range msgs {
		s.offsets[p] = append(s.offsets[p], m.Offset)
	}
	s.highest[meta.Partition] = msgs[len(msgs)-1].Offset
	return nil
}

func (s *timerSink) flush() {
	s.mu.Lock()
	pending := s.highest
	s.highest = map[sdk.Partition]uint64{}
	s.mu.Unlock()
	for p, o := range pending {
		err := s.c.Commit(p, o)
		s.mu.Lock()
		if err != nil {
			s.rejected = append(s.rejected, err)
		} else {
			s.commits[p.PartitionID] = append(s.commits[p.PartitionID], o)
		}
		s.mu.Unlock()
	}
}

func (s *timerSink) Close(context.Context) error {
	close(s.stop)
	<-s.done
	s.flush()
	return nil
}

func (s *timerSink) got(p uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.offsets[p]...)
}

func (s *timerSink) first(p uint32) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.firstAt[p]
	return at, ok
}

func (s *timerSink) commitLog(p uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.commits[p]...)
}

func (s *timerSink) errs() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.rejected...)
}

// TestPipelineRebalanceDrainsTimedCommits: sink_controlled with a sink that commits on a
// 100 ms timer (as the file sink does after each fsync), against a server with the default
// 30 s rebalancing timeout. Runtime A owns both partitions (2 × 3000 messages, 2 ms per
// batch of 10) when runtime B joins; B's sink commits only in Close, so the stored offset
// of the revoked partition r stays what A stored. Asserted:
//   - B receives r's first batch within 2 s of joining (A's drain released r when its
//     timer commit was stored; without the drain r would move only after 30 s);
//   - while B runs, r's stored offset is exactly A's last delivered offset on r, X−1;
//   - A delivered exactly 0..X−1 of r, in order, and B exactly X..2999 (no duplicate,
//     no gap), with 0 < X < 3000 (the split happened mid-stream);
//   - A's last accepted commit on r is X−1; no commit of A or B was rejected
//     (CommitsUnknown = 0, CommitsRejected() = 0);
//   - A delivered the kept partition 0..2999, B none of it; both partitions end stored
//     at 2999.
func TestPipelineRebalanceDrainsTimedCommits(t *testing.T) {
	const parts, per = 2, 3000
	env := newIggyEnv(t)
	env.Topic("s", "t", parts)
	for p := uint32(0); p < parts; p++ {
		env.Fill("s", "t", p, per, nil)
	}
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	sinkA := newTimerSink(100*time.Millisecond, 2*time.Millisecond)
	sinkB := newTimerSink(time.Hour, 0)
	rtA := env.start(cfg, sinkA)
	testkit.WaitFor(t, "A delivers from both partitions", func() bool {
		return len(sinkA.got(0)) >= 100 && len(sinkA.got(1)) >= 100
	})
	joined := time.Now()
	rtB := env.start(testSinkConfig(config.CommitSinkControlled, config.FailureStop), sinkB)
	testkit.WaitFor(t, "one partition revoked from A", func() bool { return len(ownedPartitions(rtA)) == 1 })
	var r, k uint32 = 0, 1
	if ownedPartitions(rtA)[0] {
		r, k = 1, 0
	}
	var firstB time.Time
	testkit.WaitFor(t, fmt.Sprintf("B to receive revoked partition %d", r), func() bool {
		at, ok := sinkB.first(r)
		firstB = at
		return ok
	})
	if d := firstB.Sub(joined); d > 2*time.Second {
		t.Fatalf("B received revoked partition %d %v after joining, want within 2s", r, d)
	}
	gotA := sinkA.got(r)
	x := uint64(len(gotA))
	if x == 0 || x >= per {
		t.Fatalf("A delivered %d of partition %d before the split, want 0 < X < %d", x, r, per)
	}
	env.WantStored("g", "s", "t", r, x-1)
	testkit.WaitFor(t, "A's kept partition stored to 2999", func() bool {
		o, ok := env.Stored("g", "s", "t", k)
		return ok && o == per-1
	})
	testkit.WaitFor(t, "B delivers the rest of the revoked partition", func() bool { return len(sinkB.got(r)) == per-int(x) })
	stopRuntime(t, rtB)
	stopRuntime(t, rtA)

	if !equalOffsets(gotA, seq(0, x-1)) || !equalOffsets(sinkA.got(r), gotA) {
		t.Fatalf("A delivered %v of partition %d, want exactly 0..%d", sinkA.got(r), r, x-1)
	}
	if got := sinkB.got(r); !equalOffsets(got, seq(x, per-1)) {
		t.Fatalf("B delivered %d offsets of partition %d (first %v), want exactly %d..%d", len(got), r, got[:min(3, len(got))], x, per-1)
	}
	if c := sinkA.commitLog(r); len(c) == 0 || c[len(c)-1] != x-1 {
		t.Fatalf("A's accepted commits on partition %d = %v, want the last = %d", r, c, x-1)
	}
	if got := sinkA.got(k); !equalOffsets(got, seq(0, per-1)) {
		t.Fatalf("A delivered %d offsets of kept partition %d, want exactly 0..%d", len(got), k, per-1)
	}
	if got := sinkB.got(k); len(got) != 0 {
		t.Fatalf("B delivered %d offsets of kept partition %d, want none", len(got), k)
	}
	for p := uint32(0); p < parts; p++ {
		env.WantStored("g", "s", "t", p, per-1)
	}
	for name, s := range map[string]*timerSink{"A": sinkA, "B": sinkB} {
		if errs := s.errs(); len(errs) != 0 {
			t.Fatalf("%s: commits rejected: %v", name, errs)
		}
	}
	for name, rt := range map[string]*Runtime{"A": rtA, "B": rtB} {
		if st := rt.Status()[0].Stats; st.CommitsUnknown != 0 || st.CommitsRejected() != 0 {
			t.Fatalf("%s: stats %+v", name, st)
		}
	}
}
