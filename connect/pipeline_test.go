package connect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// recSink records what it is given. failBatch (0-based batch index, counted per sink)
// fails failTimes times (-1 = for good). commitEach commits the batch's last offset
// from inside Consume (sink_controlled).
type recSink struct {
	failBatch  int
	failTimes  int
	commitEach bool
	onClose    func(sdk.Committer)

	mu        sync.Mutex
	env       sdk.SinkEnv
	batches   int
	offsets   map[uint32][]uint64
	closed    bool
	commitErr []error
}

func newRecSink() *recSink { return &recSink{failBatch: -1, offsets: map[uint32][]uint64{}} }

func (s *recSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.mu.Lock()
	s.env = env
	s.mu.Unlock()
	return nil
}

func (s *recSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.batches
	if idx == s.failBatch && s.failTimes != 0 {
		if s.failTimes > 0 {
			s.failTimes--
		}
		return errors.New("target rejected the batch")
	}
	s.batches++
	for _, m := range msgs {
		s.offsets[meta.Partition.PartitionID] = append(s.offsets[meta.Partition.PartitionID], m.Offset)
	}
	if s.commitEach && s.env.Committer != nil {
		if err := s.env.Committer.Commit(meta.Partition, msgs[len(msgs)-1].Offset); err != nil {
			s.commitErr = append(s.commitErr, err)
		}
	}
	return nil
}

func (s *recSink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.onClose != nil {
		s.onClose(s.env.Committer)
	}
	return nil
}

func (s *recSink) got(p uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.offsets[p]...)
}

func testSinkConfig(mode config.CommitMode, policy config.FailurePolicy) *config.Sink {
	return &config.Sink{
		Common: config.Common{Key: "rec", Enabled: true, Name: "rec", Path: "builtin:rec", PluginConfig: []byte("null")},
		Streams: []config.SinkStream{{Stream: "s", Topics: []string{"t"}, Schema: sdk.SchemaRaw, BatchLength: 10,
			PollInterval: time.Millisecond, ConsumerGroup: "g"}},
		OffsetCommit: mode, OnFailure: policy,
		Retry:           config.Retry{MaxRetries: 1, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		DeadLetter:      config.DeadLetter{Stream: "dlq", Topic: "dead"},
		Commit:          config.CommitSettings{Interval: 5 * time.Millisecond, MaxUncommitted: 10000},
		ShutdownTimeout: 5 * time.Second,
	}
}

func startRuntime(t *testing.T, be backend, cfg *config.Sink, sink sdk.Sink) *Runtime {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := sdk.NewRegistry().AddSink("rec", func() sdk.Sink { return sink })
	rt := newRuntime(&config.Connectors{Sinks: []*config.Sink{cfg}}, be, reg, nil, quietLog)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

func stopRuntime(t *testing.T, rt *Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

func equalOffsets(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var allModes = []config.CommitMode{config.CommitAfterPolling, config.CommitAfterConsuming, config.CommitSinkControlled}

// TestPipelineTransientFailure: batch 3 fails once and is retried: every mode delivers
// every message exactly once and stores offset 49.
func TestPipelineTransientFailure(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			be := newMemBackend()
			be.addTopic("s", "t", 1, 50)
			sink := newRecSink()
			sink.failBatch, sink.failTimes, sink.commitEach = 3, 1, true
			rt := startRuntime(t, be, testSinkConfig(mode, config.FailureStop), sink)
			waitFor(t, "50 delivered", func() bool { return len(sink.got(0)) == 50 })
			stopRuntime(t, rt)
			if got := sink.got(0); !equalOffsets(got, seq(0, 49)) {
				t.Fatalf("delivered %v", got)
			}
			if off, ok := be.storedOffset("g", "s", "t", 0); !ok || off != 49 {
				t.Fatalf("stored %d, %t; want 49", off, ok)
			}
			st := rt.Status()[0]
			if st.State != StateStopped || st.Stats.Delivered != 50 || st.Stats.ConsumeErrors != 1 || st.Stats.FailedBatches != 0 || st.Stats.Committed != 50 {
				t.Fatalf("status %+v", st)
			}
			if !sink.closed {
				t.Fatal("sink not closed")
			}
		})
	}
}

// TestPipelineStopPolicy: batch 2 (offsets 20..29) fails for good. after_consuming and
// sink_controlled store 19 and a restart redelivers from 20; after_polling has already
// stored past the failed batch (its documented at-most-once guarantee), so the restart
// resumes after it and offsets 20..29 are lost.
func TestPipelineStopPolicy(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			be := newMemBackend()
			be.addTopic("s", "t", 1, 100)
			sink := newRecSink()
			sink.failBatch, sink.failTimes, sink.commitEach = 2, -1, true
			cfg := testSinkConfig(mode, config.FailureStop)
			rt := startRuntime(t, be, cfg, sink)
			waitFor(t, "error status", func() bool { return rt.Status()[0].State == StateError })
			stopRuntime(t, rt)
			st := rt.Status()[0]
			if st.State != StateError || st.LastError == nil || !strings.Contains(st.LastError.Message, "target rejected the batch") ||
				st.Stats.FailedBatches != 1 || st.Stats.ConsumeErrors != 2 || st.Stats.Delivered != 20 {
				t.Fatalf("status %+v (last error %+v)", st, st.LastError)
			}
			stored, _ := be.storedOffset("g", "s", "t", 0)
			// Restart with a healthy sink.
			sink2 := newRecSink()
			sink2.commitEach = true
			rt2 := startRuntime(t, be, testSinkConfig(mode, config.FailureStop), sink2)
			waitFor(t, "redelivery to the end", func() bool { g := sink2.got(0); return len(g) > 0 && g[len(g)-1] == 99 })
			stopRuntime(t, rt2)
			got := sink2.got(0)
			if mode == config.CommitAfterPolling {
				if stored < 29 || got[0] != stored+1 {
					t.Fatalf("after_polling: stored %d, redelivered from %d; want stored ≥ 29 and resume at stored+1", stored, got[0])
				}
				return
			}
			if stored != 19 || !equalOffsets(got, seq(20, 99)) {
				t.Fatalf("stored %d, redelivered %v; want 19 and 20..99", stored, got)
			}
		})
	}
}

func TestPipelineDeadLetterAndSkip(t *testing.T) {
	for _, policy := range []config.FailurePolicy{config.FailureDeadLetter, config.FailureSkip} {
		t.Run(string(policy), func(t *testing.T) {
			be := newMemBackend()
			be.addTopic("s", "t", 1, 50)
			sink := newRecSink()
			sink.failBatch, sink.failTimes = 2, 2 // both attempts (MaxRetries 1) fail; later batches succeed
			rt := startRuntime(t, be, testSinkConfig(config.CommitAfterConsuming, policy), sink)
			waitFor(t, "stored 49", func() bool { o, _ := be.storedOffset("g", "s", "t", 0); return o == 49 })
			stopRuntime(t, rt)
			st := rt.Status()[0].Stats
			if got := sink.got(0); !equalOffsets(got, append(seq(0, 19), seq(30, 49)...)) {
				t.Fatalf("delivered %v", got)
			}
			if policy == config.FailureSkip {
				if st.Skipped != 10 || st.DeadLettered != 0 || len(be.dlq) != 0 {
					t.Fatalf("stats %+v dlq %d", st, len(be.dlq))
				}
				return
			}
			if st.DeadLettered != 10 || len(be.dlq) != 1 || len(be.dlq[0]) != 10 {
				t.Fatalf("stats %+v dlq %v", st, be.dlq)
			}
			for i, m := range be.dlq[0] {
				var off uint64
				for _, h := range m.Headers {
					if string(h.Key.Value) == HeaderSourceOffset {
						off = uint64(h.Value.Value[0])
					}
				}
				if off != uint64(20+i) {
					t.Fatalf("dead letter %d has source offset %d", i, off)
				}
			}
		})
	}
}

// TestPipelineBackpressure: sink_controlled, a sink that never commits, max_uncommitted 25
// and batches of 10: exactly 30 messages are delivered, then the partition is paused until
// the sink commits.
func TestPipelineBackpressure(t *testing.T) {
	be := newMemBackend()
	be.addTopic("s", "t", 1, 100)
	sink := newRecSink()
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	cfg.Commit.MaxUncommitted = 25
	rt := startRuntime(t, be, cfg, sink)
	waitFor(t, "30 delivered", func() bool { return len(sink.got(0)) == 30 })
	time.Sleep(50 * time.Millisecond) // a paused partition must stay paused: nothing to wait for
	if n := len(sink.got(0)); n != 30 {
		t.Fatalf("delivered %d while paused, want 30", n)
	}
	if st := rt.Status()[0].Stats; st.Polled != 30 {
		t.Fatalf("polled %d, want 30", st.Polled)
	}
	sink.mu.Lock()
	cm := sink.env.Committer
	sink.mu.Unlock()
	if err := cm.Commit(sdk.Partition{StreamID: 1, TopicID: 1, PartitionID: 0}, 29); err != nil {
		t.Fatal(err)
	}
	// Resumed; the sink still commits nothing more, so it pauses again at 60 − 29 − 1 = 30.
	waitFor(t, "60 delivered after commit", func() bool { return len(sink.got(0)) == 60 })
	time.Sleep(50 * time.Millisecond)
	if n := len(sink.got(0)); n != 60 {
		t.Fatalf("delivered %d after the second pause, want 60", n)
	}
	stopRuntime(t, rt)
}

// TestPipelineRevocationAndStop: a revoked partition's pending commit is written and its
// commits are rejected afterwards; after Stop every commit is rejected and changes nothing.
func TestPipelineRevocationAndStop(t *testing.T) {
	be := newMemBackend()
	be.addTopic("s", "t", 2, 20)
	sink := newRecSink()
	sink.commitEach = true
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	cfg.Commit.Interval = time.Hour // only the revocation/stop flushes write
	rt := startRuntime(t, be, cfg, sink)
	waitFor(t, "both partitions delivered", func() bool { return len(sink.got(0)) == 20 && len(sink.got(1)) == 20 })
	be.mu.Lock()
	cons := be.consumers[0]
	be.mu.Unlock()
	cons.revoke(1)
	waitFor(t, "revoked partition flushed", func() bool { o, ok := be.storedOffset("g", "s", "t", 1); return ok && o == 19 })
	sink.mu.Lock()
	cm := sink.env.Committer
	sink.mu.Unlock()
	p1 := sdk.Partition{StreamID: 1, TopicID: 1, PartitionID: 1}
	if err := cm.Commit(p1, 19); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit on revoked partition = %v", err)
	}
	stopRuntime(t, rt)
	if o, _ := be.storedOffset("g", "s", "t", 0); o != 19 {
		t.Fatalf("partition 0 stored %d at stop, want 19", o)
	}
	p0 := sdk.Partition{StreamID: 1, TopicID: 1, PartitionID: 0}
	if err := cm.Commit(p0, 19); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit after stop = %v", err)
	}
	if rt.reg.len() != 0 {
		t.Fatalf("registry holds %d entries after stop", rt.reg.len())
	}
	if st := rt.Status()[0].Stats; st.CommitsUnknown != 2 || st.CommitsAccepted != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPipelineCloseMayCommit: sink_controlled Close commits what it flushed; the runtime
// writes it before leaving the group.
func TestPipelineCloseMayCommit(t *testing.T) {
	be := newMemBackend()
	be.addTopic("s", "t", 1, 30)
	sink := newRecSink()
	var closeErr error
	sink.onClose = func(c sdk.Committer) { closeErr = c.Commit(sdk.Partition{StreamID: 1, TopicID: 1, PartitionID: 0}, 29) }
	rt := startRuntime(t, be, testSinkConfig(config.CommitSinkControlled, config.FailureStop), sink)
	waitFor(t, "30 delivered", func() bool { return len(sink.got(0)) == 30 })
	stopRuntime(t, rt)
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	if o, ok := be.storedOffset("g", "s", "t", 0); !ok || o != 29 {
		t.Fatalf("stored %d %t, want 29", o, ok)
	}
}

// TestPipelineStoreFailuresRetried: the first stores fail; nothing is lost.
func TestPipelineStoreFailuresRetried(t *testing.T) {
	be := newMemBackend()
	be.addTopic("s", "t", 1, 50)
	be.storeFails = 3
	sink := newRecSink()
	rt := startRuntime(t, be, testSinkConfig(config.CommitAfterConsuming, config.FailureStop), sink)
	waitFor(t, "stored 49", func() bool { o, _ := be.storedOffset("g", "s", "t", 0); return o == 49 })
	stopRuntime(t, rt)
	if st := rt.Status()[0].Stats; st.StoreErrors != 3 || st.Committed != 50 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRuntimeUnknownBuiltin(t *testing.T) {
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Path = "builtin:nope"
	rt := newRuntime(&config.Connectors{Sinks: []*config.Sink{cfg}}, newMemBackend(), sdk.NewRegistry(), nil, quietLog)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := rt.Status()[0]
	if st.State != StateError || st.LastError == nil || !strings.Contains(st.LastError.Message, `unknown built-in sink "nope"`) {
		t.Fatalf("status %+v", st)
	}
	stopRuntime(t, rt)
}
