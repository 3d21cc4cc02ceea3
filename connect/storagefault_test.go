package connect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server/servertest"
)

// Issue 22's duplicate storm: with the server's disk full, every offset store was
// refused, the partition was released and polled again from the stored offset, in a
// loop for as long as the fault lasted (10 s of it wrote 243,000 lines for 26,000
// offsets). A store refused by a storage fault must keep the partition: back off, stop
// polling at max_uncommitted, say so in the status, and go on once stores succeed.

var errDiskFull = errors.New("no space left on device (test fault)")

// diskFault is the embedded server's storage fault hook (servertest.WithWriteFault):
// while on, every write of the server's store is refused as on a full disk.
type diskFault struct{ on atomic.Bool }

func (d *diskFault) option() servertest.Option {
	return servertest.WithWriteFault(func() error {
		if d.on.Load() {
			return errDiskFull
		}
		return nil
	})
}

// countSink records every offset it is given, duplicates included. The batch starting
// at gateAt waits until gate is closed (reached is closed when it arrives). With commit
// it commits each batch's last offset (sink_controlled).
type countSink struct {
	gateAt        uint64
	gate, reached chan struct{}
	commit        bool

	mu  sync.Mutex
	env sdk.SinkEnv
	got []uint64
}

func newCountSink(gateAt uint64, commit bool) *countSink {
	return &countSink{gateAt: gateAt, gate: make(chan struct{}), reached: make(chan struct{}), commit: commit}
}

func (s *countSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.mu.Lock()
	s.env = env
	s.mu.Unlock()
	return nil
}

func (s *countSink) Close(context.Context) error { return nil }

func (s *countSink) Consume(ctx context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if msgs[0].Offset == s.gateAt {
		select {
		case <-s.reached:
		default:
			close(s.reached)
		}
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.got = append(s.got, m.Offset)
	}
	if s.commit {
		return s.env.Committer.Commit(meta.Partition, msgs[len(msgs)-1].Offset)
	}
	return nil
}

func (s *countSink) delivered() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.got...)
}

func (s *countSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// partitionStatus returns the status of partition 0 of the runtime's only sink, and
// whether it is in the sink's table.
func partitionStatus(rt *Runtime) (PartitionStatus, bool) {
	for _, p := range rt.Status()[0].Partitions {
		if p.Partition == 0 {
			return p, true
		}
	}
	return PartitionStatus{}, false
}

// TestStorageFaultNoRedeliveryStorm: 300 messages are delivered and stored, then the
// server's storage refuses every write (its WriteFault hook). The batch in the sink
// (300..309) finishes, its store is refused with 4006, and the partition keeps its entry:
// it is polled until max_uncommitted (100) is reached and then paused, so exactly 0..399
// are delivered, once each, however many stores the fault refuses (at least 30 more are
// waited for); the bound is what was delivered before the fault plus max_uncommitted.
// The status and the offsets route show the failing store. Once writes are accepted
// again, every offset 0..999 is delivered exactly once and 999 is stored; nothing was
// released.
func TestStorageFaultNoRedeliveryStorm(t *testing.T) {
	for _, mode := range []config.CommitMode{config.CommitAfterConsuming, config.CommitSinkControlled} {
		t.Run(string(mode), func(t *testing.T) {
			var fault diskFault
			env := newIggyEnv(t, fault.option())
			t.Cleanup(func() { fault.on.Store(false) }) // before the server closes: its final sync is a write
			runStorageFault(t, env, mode, func() { fault.on.Store(true) }, func() { fault.on.Store(false) })
		})
	}
}

// runStorageFault runs the scenario of TestStorageFaultNoRedeliveryStorm on env: on
// starts the server's storage fault (it returns once the server refuses writes), off
// ends it.
func runStorageFault(t *testing.T, env *iggyEnv, mode config.CommitMode, on, off func()) {
	const (
		total          = 1000
		before         = 300 // delivered and stored before the fault
		maxUncommitted = 100
		batch          = 10
		attempts       = 30 // failed stores the fault lasts for, at least
	)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, total, nil)
	sink := newCountSink(before, mode == config.CommitSinkControlled)
	cfg := testSinkConfig(mode, config.FailureStop)
	cfg.Streams[0].BatchLength = batch
	cfg.Commit.MaxUncommitted = maxUncommitted
	cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	rt := env.start(cfg, sink)
	faulted := false
	defer func() {
		if faulted {
			off() // the stop stores what is done
		}
		stopRuntime(t, rt)
	}()
	storeErrors := func() uint64 { return rt.Status()[0].Stats.StoreErrors }

	testkit.WaitFor(t, "the batch at 300 in the sink", func() bool {
		select {
		case <-sink.reached:
			return true
		default:
			return false
		}
	})
	testkit.WaitFor(t, "299 stored", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == before-1 })
	on()
	faulted = true
	close(sink.gate)

	// Either the partition pauses at max_uncommitted with exactly 0..399 delivered, or
	// deliveries pass the bound (the storm): stop waiting at whichever comes first.
	const bound = before + maxUncommitted
	testkit.WaitFor(t, "the partition paused at max_uncommitted", func() bool {
		p, ok := partitionStatus(rt)
		n := sink.count()
		return n > bound+batch || (n == bound && ok && p.Paused)
	})
	wantBound := func(when string) {
		if got := sink.delivered(); !equalOffsets(got, seq(0, bound-1)) {
			t.Fatalf("delivered %d messages %s (bound %d), want 0..%d once each; first %v", len(got), when, bound, bound-1, got[:min(len(got), 20)])
		}
	}
	wantBound("when the fault began")
	from := storeErrors()
	testkit.WaitFor(t, "30 more failed stores", func() bool { return storeErrors() >= from+attempts })
	wantBound("during the fault")
	p, ok := partitionStatus(rt)
	if !ok || p.State != "owned" || !p.Paused || p.Stored != before-1 || p.Polled != bound-1 || p.Delivered != bound-1 {
		t.Fatalf("partition during the fault: %+v (in table %t)", p, ok)
	}
	if p.StoreFailures < attempts || p.StoreError == nil || !strings.Contains(p.StoreError.Message, "CannotSaveMessagesToSegment (4006)") {
		t.Fatalf("store failure not reported: failures %d, error %+v", p.StoreFailures, p.StoreError)
	}
	offs, err := rt.Offsets(bg(t), "rec")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 1 || !offs[0].Owned || offs[0].Stored != before-1 || offs[0].StoreFailures < attempts ||
		offs[0].StoreError == nil || !strings.Contains(offs[0].StoreError.Message, "4006") {
		t.Fatalf("offsets during the fault: %+v", offs)
	}
	if st := rt.Status()[0].Stats; st.StoresRefused != 0 || st.Revoked != 0 {
		t.Fatalf("stats during the fault: refused %d, revoked %d", st.StoresRefused, st.Revoked)
	}

	off()
	faulted = false
	testkit.WaitFor(t, "999 stored after the fault", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == total-1 })
	if got := sink.delivered(); !equalOffsets(got, seq(0, total-1)) {
		t.Fatalf("delivered %d messages, want 0..%d once each", len(got), total-1)
	}
	testkit.WaitFor(t, "the status to clear", func() bool {
		p, ok := partitionStatus(rt)
		return ok && p.Stored == total-1
	})
	if p, _ := partitionStatus(rt); p.StoreFailures != 0 || p.StoreError != nil || p.Paused {
		t.Fatalf("partition after the fault: %+v", p)
	}
	if st := rt.Status()[0].Stats; st.StoresRefused != 0 || st.Revoked != 0 {
		t.Fatalf("stats after the fault: %+v", st)
	}
}
