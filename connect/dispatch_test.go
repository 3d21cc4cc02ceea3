package connect

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
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
