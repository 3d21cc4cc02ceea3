package connect

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// The pipeline tests run the whole runtime (New, real iggy client) against the real
// embedded server over TCP; offsets are read back from the server with GetOffset.

// recSink records what it is given. failBatch (0-based batch index, counted per sink)
// fails failTimes times (-1 = for good); beforeFail, when set, runs before each failure.
// commitEach commits the batch's last offset from inside Consume (sink_controlled).
// delay is slept in every Consume.
type recSink struct {
	failBatch  int
	failTimes  int
	beforeFail func()
	commitEach bool
	delay      time.Duration
	onClose    func(sdk.Committer)

	mu        sync.Mutex
	env       sdk.SinkEnv
	batches   int
	offsets   map[uint32][]uint64
	payloads  map[uint32][]string
	closed    bool
	commitErr []error
}

func newRecSink() *recSink {
	return &recSink{failBatch: -1, offsets: map[uint32][]uint64{}, payloads: map[uint32][]string{}}
}

func (s *recSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.mu.Lock()
	s.env = env
	s.mu.Unlock()
	return nil
}

func (s *recSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.mu.Lock()
	if s.batches == s.failBatch && s.failTimes != 0 {
		if s.failTimes > 0 {
			s.failTimes--
		}
		hook := s.beforeFail
		s.mu.Unlock()
		if hook != nil {
			hook()
		}
		return errors.New("target rejected the batch")
	}
	defer s.mu.Unlock()
	s.batches++
	p := meta.Partition.PartitionID
	for _, m := range msgs {
		s.offsets[p] = append(s.offsets[p], m.Offset)
		s.payloads[p] = append(s.payloads[p], string(m.Payload))
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

// MaxInFlight makes recSink an sdk.ConcurrentSink (its state is under mu), so every
// pipeline test also runs with max_in_flight > 1 (FERRY_TEST_MAX_IN_FLIGHT).
func (s *recSink) MaxInFlight() int { return sdk.MaxConcurrentUnlimited }

func (s *recSink) got(p uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.offsets[p]...)
}

func (s *recSink) committer() sdk.Committer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.env.Committer
}

func testSinkConfig(mode config.CommitMode, policy config.FailurePolicy) *config.Sink {
	return &config.Sink{
		Common: config.Common{Key: "rec", Enabled: true, Name: "rec", Path: "builtin:rec", PluginConfig: []byte("null")},
		Streams: []config.SinkStream{{Stream: "s", Topics: []string{"t"}, Schema: sdk.SchemaRaw, BatchLength: 10,
			PollInterval: time.Millisecond, ConsumerGroup: "g"}},
		OffsetCommit: mode, OnFailure: policy,
		Retry:           config.Retry{MaxRetries: 1, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		DeadLetter:      config.DeadLetter{Stream: "dlq", Topic: "dead"},
		Commit:          config.CommitSettings{Interval: 5 * time.Millisecond, Delay: 5 * time.Millisecond, MaxUncommitted: 10000},
		ShutdownTimeout: 5 * time.Second,
		MaxInFlight:     testMaxInFlight(),
	}
}

// testMaxInFlight is max_in_flight for the test configs: FERRY_TEST_MAX_IN_FLIGHT, else 1.
// scripts/test.sh runs this package's tests once more with 4.
func testMaxInFlight() uint32 {
	if v, err := strconv.ParseUint(os.Getenv("FERRY_TEST_MAX_IN_FLIGHT"), 10, 32); err == nil && v > 0 {
		return uint32(v)
	}
	return 1
}

// TestPipelineTransientFailure: batch 3 (offsets 30..39) fails once and is retried: every
// mode delivers 0..49 exactly once, in order, and the group's stored offset is 49.
func TestPipelineTransientFailure(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 50, nil)
			sink := newRecSink()
			sink.failBatch, sink.failTimes, sink.commitEach = 3, 1, true
			rt := env.start(testSinkConfig(mode, config.FailureStop), sink)
			testkit.WaitFor(t, "50 delivered", func() bool { return len(sink.got(0)) == 50 })
			stopRuntime(t, rt)
			if got := sink.got(0); !equalOffsets(got, seq(0, 49)) {
				t.Fatalf("delivered %v, want 0..49 once each", got)
			}
			env.WantStored("g", "s", "t", 0, 49)
			st := rt.Status()[0]
			if st.State != StateStopped || st.Stats.Delivered != 50 || st.Stats.ConsumeErrors != 1 ||
				st.Stats.FailedBatches != 0 || st.Stats.Committed != 50 || st.Stats.CommitsRejected() != 0 {
				t.Fatalf("status %+v", st)
			}
			if !sink.closed {
				t.Fatal("sink not closed")
			}
		})
	}
}

// TestPipelineStopPolicy: batch 2 (offsets 20..29) fails for good (on_failure = stop). The
// failing sink waits until the poll goroutine is blocked (50 polled: batches 0, 1, the
// failed 2, 3 queued, 4 held), so what after_polling has stored is exact.
//
//   - after_consuming, sink_controlled: stored offset 19; a restart redelivers exactly
//     20..99: nothing lost.
//   - after_polling: the server stored 49 with the poll of batch 4 — its documented
//     at-most-once guarantee. The restart resumes at 50: offsets 20..49 (the failed batch
//     and the two polled ahead of it) are lost, exactly.
func TestPipelineStopPolicy(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 100, nil)
			sink := newRecSink()
			var rt *Runtime
			var rtMu sync.Mutex
			pollerBlocked := make(chan bool, 2)
			sink.failBatch, sink.failTimes, sink.commitEach = 2, -1, true
			sink.beforeFail = func() {
				pollerBlocked <- testkit.Eventually("the poller to have polled 50", func() bool {
					rtMu.Lock()
					defer rtMu.Unlock()
					return rt != nil && sinkOf(rt).counters.Polled.Load() == 50
				}) == nil
			}
			rtMu.Lock()
			rt = env.runtime([]*config.Sink{testSinkConfig(mode, config.FailureStop)}, map[string]sdk.Sink{"rec": sink})
			rtMu.Unlock()
			if err := rt.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "error status", func() bool { return rt.Status()[0].State == StateError })
			stopRuntime(t, rt)
			for range 2 { // first attempt and its one retry
				if !<-pollerBlocked {
					t.Fatal("the poll goroutine never reached 50 polled messages")
				}
			}
			st := rt.Status()[0]
			if st.State != StateError || st.LastError == nil || !strings.Contains(st.LastError.Message, "target rejected the batch") ||
				st.Stats.FailedBatches != 1 || st.Stats.ConsumeErrors != 2 || st.Stats.Delivered != 20 || st.Stats.Polled != 50 {
				t.Fatalf("status %+v (last error %+v)", st, st.LastError)
			}
			if got := sink.got(0); !equalOffsets(got, seq(0, 19)) {
				t.Fatalf("first run delivered %v, want 0..19", got)
			}
			wantStored, wantResume := uint64(19), uint64(20)
			if mode == config.CommitAfterPolling {
				wantStored, wantResume = 49, 50
			}
			env.WantStored("g", "s", "t", 0, wantStored)

			sink2 := newRecSink()
			sink2.commitEach = true
			rt2 := env.start(testSinkConfig(mode, config.FailureStop), sink2)
			testkit.WaitFor(t, "redelivery to the end", func() bool { g := sink2.got(0); return len(g) > 0 && g[len(g)-1] == 99 })
			stopRuntime(t, rt2)
			if got := sink2.got(0); !equalOffsets(got, seq(wantResume, 99)) {
				t.Fatalf("restart delivered %v, want %d..99", got, wantResume)
			}
			env.WantStored("g", "s", "t", 0, 99)
		})
	}
}

// TestPipelineDeadLetterAndSkip: batch 2 (offsets 20..29) fails on both attempts, later
// batches succeed (after_consuming). dead_letter sends exactly those ten messages — same
// payloads and user headers plus the ferry-* headers — to dlq/dead before committing past
// them; skip commits past them and counts them. Either way the stored offset ends at 49.
func TestPipelineDeadLetterAndSkip(t *testing.T) {
	for _, policy := range []config.FailurePolicy{config.FailureDeadLetter, config.FailureSkip} {
		t.Run(string(policy), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			if policy == config.FailureDeadLetter {
				env.Topic("dlq", "dead", 1) // the runtime creates no topic (ferry run --create-topics does)
			}
			env.Fill("s", "t", 0, 50, nil, userHeader)
			sink := newRecSink()
			sink.failBatch, sink.failTimes = 2, 2
			rt := env.start(testSinkConfig(config.CommitAfterConsuming, policy), sink)
			testkit.WaitFor(t, "stored 49", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 49 })
			stopRuntime(t, rt)
			env.WantStored("g", "s", "t", 0, 49)
			st := rt.Status()[0].Stats
			if got := sink.got(0); !equalOffsets(got, append(seq(0, 19), seq(30, 49)...)) {
				t.Fatalf("delivered %v", got)
			}
			if st.FailedBatches != 1 || st.ConsumeErrors != 2 || st.Delivered != 40 || st.Committed != 50 {
				t.Fatalf("stats %+v", st)
			}
			if policy == config.FailureSkip {
				if st.Skipped != 10 || st.DeadLettered != 0 {
					t.Fatalf("stats %+v", st)
				}
				env.wantNoStream("dlq")
				return
			}
			if st.DeadLettered != 10 || st.Skipped != 0 {
				t.Fatalf("stats %+v", st)
			}
			env.wantDeadLetters(t, "dlq", "dead", 20, 29)
		})
	}
}

// TestPipelineBackpressure: sink_controlled, a sink that never commits by itself,
// max_uncommitted 25 and batches of 10: exactly 30 messages are polled and delivered, then
// the partition is paused; one commit of 29 resumes it and it pauses again at exactly 60.
func TestPipelineBackpressure(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 100, nil)
	sink := newRecSink()
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	cfg.Commit.MaxUncommitted = 25
	rt := env.start(cfg, sink)
	testkit.WaitFor(t, "30 delivered", func() bool { return len(sink.got(0)) == 30 })
	// A paused partition must stay paused; no event marks "the poller checked and did not
	// poll", so watch the counters for many poll intervals.
	stillAt := func(n int) func() bool {
		return func() bool { return len(sink.got(0)) == n && rt.Status()[0].Stats.Polled == uint64(n) }
	}
	testkit.Quiet(t, 100*time.Millisecond, "delivered and polled, 30 each, while paused", stillAt(30))
	if _, ok := env.Stored("g", "s", "t", 0); ok {
		t.Fatal("an offset was stored before the sink committed")
	}
	if err := sink.committer().Commit(env.partition("s", "t", 0), 29); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "commit stored", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 29 })
	testkit.WaitFor(t, "60 delivered after the commit", func() bool { return len(sink.got(0)) == 60 })
	testkit.Quiet(t, 100*time.Millisecond, "delivered and polled, 60 each, after the second pause", stillAt(60))
	stopRuntime(t, rt)
	if got := sink.got(0); !equalOffsets(got, seq(0, 59)) {
		t.Fatalf("delivered %v", got)
	}
	env.WantStored("g", "s", "t", 0, 29)
}

// TestPipelineAsyncCommitter: sink_controlled with a sink that only buffers in Consume and
// commits from its own flusher goroutine every 3 batches (and once more in Close), on two
// partitions × 300 messages. The final stored offsets are 299 and 299, no commit is
// rejected, the flusher's commits per partition strictly increase, and the stored offsets
// sampled from the server while it runs never go backwards.
func TestPipelineAsyncCommitter(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 0, 300, nil)
	env.Fill("s", "t", 1, 300, nil)
	sink := newAsyncSink(3)
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	cfg.Commit.MaxUncommitted = 100
	rt := env.start(cfg, sink)

	sampled := map[uint32][]uint64{}
	testkit.WaitFor(t, "both partitions stored to 299", func() bool {
		done := true
		for p := uint32(0); p < 2; p++ {
			o, ok := env.Stored("g", "s", "t", p)
			if ok {
				sampled[p] = append(sampled[p], o)
			}
			done = done && ok && o == 299
		}
		return done
	})
	stopRuntime(t, rt)
	for p := uint32(0); p < 2; p++ {
		env.WantStored("g", "s", "t", p, 299)
		for i := 1; i < len(sampled[p]); i++ {
			if sampled[p][i] < sampled[p][i-1] {
				t.Fatalf("partition %d: stored offset went backwards: %v", p, sampled[p])
			}
		}
		commits := sink.commitLog(p)
		for i := 1; i < len(commits); i++ {
			if commits[i] <= commits[i-1] {
				t.Fatalf("partition %d: flusher commits not increasing: %v", p, commits)
			}
		}
		if len(commits) < 2 || commits[len(commits)-1] != 299 {
			t.Fatalf("partition %d: flusher commits %v, want several ending at 299", p, commits)
		}
	}
	if errs := sink.errs(); len(errs) != 0 {
		t.Fatalf("commits rejected: %v", errs)
	}
	st := rt.Status()[0].Stats
	if st.Delivered != 600 || st.Committed != 600 || st.CommitsRejected() != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPipelineRevocationAndStop: runtime A (sink_controlled, commit delay and interval
// 1 h so only the revocation and stop stores write) owns both partitions of a topic and has
// committed 0..19 of each. A second member of the group joins: the server revokes one
// partition from A and hands it over once A has stored what it polled, so A's drain
// stores 19 (draining partitions store at once) and the other member takes it. Once the
// drained entry is released (registry 1 entry), a commit for it is rejected with
// ErrCommitUnknownPartition; after Stop every commit is.
func TestPipelineRevocationAndStop(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 0, 20, nil)
	env.Fill("s", "t", 1, 20, nil)
	sink := newRecSink()
	sink.commitEach = true
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	cfg.Commit.Interval, cfg.Commit.Delay = time.Hour, time.Hour
	rt := env.start(cfg, sink)
	testkit.WaitFor(t, "both partitions delivered", func() bool { return len(sink.got(0)) == 20 && len(sink.got(1)) == 20 })
	if _, ok := env.Stored("g", "s", "t", 0); ok {
		t.Fatal("stored before any flush")
	}

	other, err := env.Dial().NewConsumer(bg(t), iggyConsumerConfig("s", "t", "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close(context.Background()) }()
	testkit.WaitFor(t, "one partition revoked from A", func() bool { return len(ownedPartitions(rt)) == 1 })
	var revoked, kept uint32 = 0, 1
	if ownedPartitions(rt)[0] {
		revoked, kept = 1, 0
	}
	testkit.WaitFor(t, "the other member owns the revoked partition", func() bool {
		_, parts := other.Assignment()
		return len(parts) == 1 && parts[0] == revoked
	})
	env.WantStored("g", "s", "t", revoked, 19)
	testkit.WaitFor(t, "the revoked partition's drained entry released", func() bool { return len(tablePartitions(rt)) == 1 })
	cm := sink.committer()
	if err := cm.Commit(env.partition("s", "t", revoked), 19); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit on the revoked partition = %v, want ErrCommitUnknownPartition", err)
	}
	if _, ok := env.Stored("g", "s", "t", kept); ok {
		t.Fatal("kept partition stored before stop (delay 1h)")
	}
	stopRuntime(t, rt)
	env.WantStored("g", "s", "t", kept, 19)
	if err := cm.Commit(env.partition("s", "t", kept), 19); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit after stop = %v, want ErrCommitUnknownPartition", err)
	}
	if n := len(tablePartitions(rt)); n != 0 {
		t.Fatalf("the tables hold %d partitions after stop", n)
	}
	if st := rt.Status()[0].Stats; st.CommitsUnknown != 2 || st.CommitsAccepted != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPipelineCloseMayCommit: a sink_controlled sink that commits only in Close (what it
// flushed last); the runtime stores 29 before leaving the group.
func TestPipelineCloseMayCommit(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 30, nil)
	sink := newRecSink()
	var closeErr error
	p0 := env.partition("s", "t", 0)
	sink.onClose = func(c sdk.Committer) { closeErr = c.Commit(p0, 29) }
	rt := env.start(testSinkConfig(config.CommitSinkControlled, config.FailureStop), sink)
	testkit.WaitFor(t, "30 delivered", func() bool { return len(sink.got(0)) == 30 })
	if _, ok := env.Stored("g", "s", "t", 0); ok {
		t.Fatal("stored before Close committed")
	}
	stopRuntime(t, rt)
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	env.WantStored("g", "s", "t", 0, 29)
}

// TestPipelineStoreFailuresRetried: the first three offset stores fail (injected in front
// of the real consumer's Commit); they are retried and the stored offset reaches 49.
// Regression: a store still in flight when the stop began was cut short by the stop and
// counted as a fourth failure (StoreErrors 4); stores ended by our own stop are not failures.
func TestPipelineStoreFailuresRetried(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 50, nil)
	sink := newRecSink()
	rt := env.runtime([]*config.Sink{testSinkConfig(config.CommitAfterConsuming, config.FailureStop)}, map[string]sdk.Sink{"rec": sink})
	fb := &faultyBackend{backend: rt.be}
	fb.failStores.Store(3)
	rt.be = fb
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "stored 49", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 49 })
	stopRuntime(t, rt)
	if st := rt.Status()[0].Stats; st.StoreErrors != 3 || st.Committed != 50 || st.Delivered != 50 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRuntimeUnknownBuiltin(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Path = "builtin:nope"
	rt := env.runtime([]*config.Sink{cfg}, nil)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := rt.Status()[0]
	if st.State != StateError || st.LastError == nil || !strings.Contains(st.LastError.Message, `unknown built-in sink "nope"`) {
		t.Fatalf("status %+v", st)
	}
	stopRuntime(t, rt)
}

// TestRuntimeMissingTopic: a sink whose topic does not exist is refused at start (status
// error naming it); New and Start still succeed.
func TestRuntimeMissingTopic(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "other", 1)
	sink := newRecSink()
	rt := env.start(testSinkConfig(config.CommitAfterConsuming, config.FailureStop), sink)
	st := rt.Status()[0]
	if st.State != StateError || st.LastError == nil || !strings.Contains(st.LastError.Message, "stream s topic t") {
		t.Fatalf("status %+v", st)
	}
	stopRuntime(t, rt)
	if !sink.closed {
		t.Fatal("sink opened but not closed after a failed start")
	}
}
