package connect

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/plugin"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// concurrentSink records every batch and checks the rules of concurrent delivery as it
// goes: never two calls for one partition at once, each partition's offsets in order and
// contiguous. Its first `barrier` calls wait until that many are inside Consume at once
// (or fail after 20 s), which proves the concurrency without depending on timing.
type concurrentSink struct {
	limit   int // MaxInFlight
	barrier int

	mu        sync.Mutex
	env       sdk.SinkEnv
	inside    map[uint32]bool
	now, peak int
	next      map[uint32]uint64
	got       map[uint32][]uint64
	errs      []string
	arrived   int
	release   chan struct{}
}

func newConcurrentSink(limit, barrier int) *concurrentSink {
	return &concurrentSink{limit: limit, barrier: barrier, inside: map[uint32]bool{}, next: map[uint32]uint64{},
		got: map[uint32][]uint64{}, release: make(chan struct{})}
}

func (s *concurrentSink) MaxInFlight() int { return s.limit }

func (s *concurrentSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.mu.Lock()
	s.env = env
	s.mu.Unlock()
	return nil
}

func (s *concurrentSink) Close(context.Context) error { return nil }

func (s *concurrentSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	p := meta.Partition.PartitionID
	s.mu.Lock()
	if s.inside[p] {
		s.errs = append(s.errs, fmt.Sprintf("partition %d: two Consume calls at once", p))
	}
	s.inside[p] = true
	s.now++
	s.peak = max(s.peak, s.now)
	s.arrived++
	wait := s.arrived <= s.barrier
	if s.arrived == s.barrier {
		close(s.release)
	}
	s.mu.Unlock()
	if wait {
		select {
		case <-s.release:
		case <-time.After(20 * time.Second):
			s.mu.Lock()
			s.errs = append(s.errs, fmt.Sprintf("never %d calls inside Consume at once", s.barrier))
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if m.Offset != s.next[p] {
			s.errs = append(s.errs, fmt.Sprintf("partition %d: offset %d after %d", p, m.Offset, s.next[p]))
		}
		s.next[p] = m.Offset + 1
		s.got[p] = append(s.got[p], m.Offset)
	}
	s.inside[p] = false
	s.now--
	if s.env.Committer != nil {
		if err := s.env.Committer.Commit(meta.Partition, msgs[len(msgs)-1].Offset); err != nil {
			s.errs = append(s.errs, err.Error())
		}
	}
	return nil
}

func (s *concurrentSink) delivered(p uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got[p])
}

// TestConcurrentDeliveryPerPartition: max_in_flight = 4 over 4 partitions of 200 messages
// (batches of 10), in every commit mode: 4 batches are inside Consume at once (the sink's
// barrier holds its first 4 calls until all 4 arrived), never two of one partition, each
// partition's offsets arrive once each, in order, and every partition's stored offset
// ends at 199.
func TestConcurrentDeliveryPerPartition(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 4)
			for p := uint32(0); p < 4; p++ {
				env.Fill("s", "t", p, 200, nil)
			}
			sink := newConcurrentSink(8, 4)
			cfg := testSinkConfig(mode, config.FailureStop)
			cfg.MaxInFlight = 4
			rt := env.start(cfg, sink)
			testkit.WaitFor(t, "800 delivered", func() bool {
				n := 0
				for p := uint32(0); p < 4; p++ {
					n += sink.delivered(p)
				}
				return n == 800
			})
			testkit.WaitFor(t, "every partition stored to 199", func() bool {
				for p := uint32(0); p < 4; p++ {
					if o, ok := env.Stored("g", "s", "t", p); !ok || o != 199 {
						return false
					}
				}
				return true
			})
			stopRuntime(t, rt)
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if len(sink.errs) > 0 {
				t.Fatalf("%d errors, first: %s", len(sink.errs), sink.errs[0])
			}
			if sink.peak != 4 {
				t.Fatalf("at most %d calls inside Consume at once, want 4 (max_in_flight)", sink.peak)
			}
			for p := uint32(0); p < 4; p++ {
				if !equalOffsets(sink.got[p], seq(0, 199)) {
					t.Fatalf("partition %d delivered %d offsets, want 0..199 once each in order", p, len(sink.got[p]))
				}
			}
			if st := rt.Status()[0].Stats; st.Delivered != 800 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestMaxInFlightCappedBySink: a sink that accepts 2 concurrent calls gets at most 2 even
// when its file asks for 8 (and the runtime says so once), still over 4 partitions.
func TestMaxInFlightCappedBySink(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 4)
	for p := uint32(0); p < 4; p++ {
		env.Fill("s", "t", p, 100, nil)
	}
	sink := newConcurrentSink(2, 2)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.MaxInFlight = 8
	rt, logs := env.startLogged(cfg, sink)
	testkit.WaitFor(t, "400 delivered", func() bool {
		n := 0
		for p := uint32(0); p < 4; p++ {
			n += sink.delivered(p)
		}
		return n == 400
	})
	stopRuntime(t, rt)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.errs) > 0 || sink.peak != 2 {
		t.Fatalf("peak %d (want 2), errors %v", sink.peak, sink.errs)
	}
	if n := strings.Count(logs.String(), "max_in_flight is more than the sink accepts"); n != 1 {
		t.Fatalf("%d warnings about the cap, want 1", n)
	}
}

// TestMaxInFlightRefusedWithoutCapability: a sink that does not accept concurrent calls
// is refused when its file asks for max_in_flight > 1: status error naming the reason, and
// no restart (a restart cannot fix a config).
func TestMaxInFlightRefusedWithoutCapability(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	sink := &scriptSink{}
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.MaxInFlight = 3
	cfg.Restart = config.RestartPolicy{MaxRestarts: 5, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	rt := env.runtime([]*config.Sink{cfg}, map[string]sdk.Sink{"rec": sink})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "sink in error", func() bool { return rt.Status()[0].State == StateError })
	st := rt.Status()[0]
	stopRuntime(t, rt)
	const want = "max_in_flight = 3: the sink builtin:rec does not accept concurrent Consume calls (sdk.ConcurrentSink)"
	if st.LastError == nil || !strings.Contains(st.LastError.Message, want) || st.Restart.Restarts != 0 {
		t.Fatalf("status %+v, last error %+v; want %q and no restart", st, st.LastError, want)
	}
}

// blockingSink holds every Consume of partition 0 until release is closed and records
// what each partition received, in order.
type blockingSink struct {
	release chan struct{}
	mu      sync.Mutex
	got     map[uint32][]uint64
}

func (s *blockingSink) MaxInFlight() int                        { return 4 }
func (s *blockingSink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (s *blockingSink) Close(context.Context) error             { return nil }
func (s *blockingSink) delivered(p uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[p])
}
func (s *blockingSink) Consume(ctx context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	p := meta.Partition.PartitionID
	if p == 0 {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.got[p] = append(s.got[p], m.Offset)
	}
	return nil
}

// TestBusyPartitionDoesNotStallOthers: with max_in_flight = 2 over 2 partitions, the
// sink holds partition 0's first batch inside Consume; partition 1 still gets all its
// 200 messages meanwhile. (Before the table paused the polling of a partition whose next
// batch already waits, that batch stood in the dispatcher's one-place queue and the poll
// goroutine stopped with partition 1's next batch in its hand: one slow partition stalled
// every other.) Then partition 0 is released and gets its 200, in order.
func TestBusyPartitionDoesNotStallOthers(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 2)
			for p := uint32(0); p < 2; p++ {
				env.Fill("s", "t", p, 200, nil)
			}
			sink := &blockingSink{release: make(chan struct{}), got: map[uint32][]uint64{}}
			cfg := testSinkConfig(mode, config.FailureStop)
			cfg.MaxInFlight = 2
			rt := env.start(cfg, sink)
			testkit.WaitFor(t, "partition 1 delivered while partition 0 is held", func() bool { return len(sink.delivered(1)) == 200 })
			if got := sink.delivered(0); len(got) != 0 {
				t.Fatalf("partition 0 delivered %d while held", len(got))
			}
			close(sink.release)
			testkit.WaitFor(t, "partition 0 delivered", func() bool { return len(sink.delivered(0)) == 200 })
			stopRuntime(t, rt)
			for p := uint32(0); p < 2; p++ {
				if got := sink.delivered(p); !equalOffsets(got, seq(0, 199)) {
					t.Fatalf("partition %d delivered %d offsets, want 0..199 once each in order", p, len(got))
				}
			}
		})
	}
}

// TestMaxInFlightDefault: a file that leaves max_in_flight unset gets
// config.DefaultMaxInFlight batches at once for a sink that declares it accepts concurrent
// calls — the barrier proves that many were inside Consume together, and the peak that the
// runtime made no more — and still delivers every offset once, in order.
func TestMaxInFlightDefault(t *testing.T) {
	d := config.DefaultMaxInFlight()
	if d < 2 || d > 8 {
		t.Fatalf("DefaultMaxInFlight = %d, want 2..8", d)
	}
	env := newIggyEnv(t)
	env.Topic("s", "t", 8)
	for p := uint32(0); p < 8; p++ {
		env.Fill("s", "t", p, 50, nil)
	}
	sink := newConcurrentSink(sdk.MaxConcurrentUnlimited, d)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.MaxInFlight = 0
	rt, logs := env.startLogged(cfg, sink)
	testkit.WaitFor(t, "400 delivered", func() bool {
		n := 0
		for p := uint32(0); p < 8; p++ {
			n += sink.delivered(p)
		}
		return n == 400
	})
	stopRuntime(t, rt)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.errs) > 0 || sink.peak != d {
		t.Fatalf("peak %d (want the default %d), errors %v", sink.peak, d, sink.errs)
	}
	if want := fmt.Sprintf("max_in_flight=%d", d); !strings.Contains(logs.String(), want) {
		t.Fatalf("the sink's start line does not say %s:\n%s", want, logs.String())
	}
}

// TestMaxInFlightDefaultRules: unset, the default is 1 for a sink that declares nothing,
// for a native plugin (its ABI cannot say its calls may overlap; only its file can) and
// for a source that does not read ahead; a declared limit below the default wins; a file's
// own value is kept.
func TestMaxInFlightDefaultRules(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	d := config.DefaultMaxInFlight()
	for _, c := range []struct {
		name  string
		asked uint32
		sink  sdk.Sink
		want  int
	}{
		{"plain sink", 0, &scriptSink{}, 1},
		{"concurrent sink", 0, newConcurrentSink(sdk.MaxConcurrentUnlimited, 0), d},
		{"concurrent sink with a lower limit", 0, newConcurrentSink(2, 0), 2},
		{"native plugin", 0, &plugin.Sink{}, 1},
		{"native plugin, asked", 3, &plugin.Sink{}, 3},
		{"concurrent sink, asked 1", 1, newConcurrentSink(sdk.MaxConcurrentUnlimited, 0), 1},
	} {
		got, err := maxInFlight(&config.Sink{Common: config.Common{Path: "x"}, MaxInFlight: c.asked}, c.sink, log)
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		src  sdk.Source
		want int
	}{
		{"plain source", plainSource{}, 1},
		{"source reading ahead", &seqSource{maxUnacked: 100}, d},
		{"source reading ahead, lower limit", &seqSource{maxUnacked: 2}, min(2, d)},
	} {
		got, err := sourceInFlight(&config.Source{}, c.src, log)
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}

// plainSource is a source that does not read ahead (no sdk.PipelinedSource).
type plainSource struct{}

func (plainSource) Open(context.Context, sdk.SourceEnv) error { return nil }
func (plainSource) Read(context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	return sdk.SourceBatch{}, sdk.NoAck, sdk.ErrEndOfInput
}
func (plainSource) Close(context.Context) error { return nil }
