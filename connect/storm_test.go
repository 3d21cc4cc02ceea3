package connect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// Regression tests of the runtime core: assignment changes under a membership storm,
// stored offsets that must never move backwards, per-partition store failures.

// gateSink records what it is given; its first Consume blocks until gate is closed
// (entered is closed when it starts waiting). It honours ctx.
type gateSink struct {
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once

	mu     sync.Mutex
	got    map[uint32][]uint64
	gatedP uint32
}

func newGateSink() *gateSink {
	return &gateSink{gate: make(chan struct{}), entered: make(chan struct{}), got: map[uint32][]uint64{}}
}

func (s *gateSink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (s *gateSink) Close(context.Context) error             { return nil }

func (s *gateSink) Consume(ctx context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		s.mu.Lock()
		s.gatedP = meta.Partition.PartitionID
		s.mu.Unlock()
		close(s.entered)
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.got[meta.Partition.PartitionID] = append(s.got[meta.Partition.PartitionID], m.Offset)
	}
	return nil
}

func (s *gateSink) delivered(p uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[p])
}

// offsetSampler reads every partition's stored offset of a group in a loop and records
// each change, to prove the offsets never move backwards.
type offsetSampler struct {
	mu      sync.Mutex
	seen    map[uint32][]uint64
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func (e *iggyEnv) sampleOffsets(group, stream, topic string, parts uint32) *offsetSampler {
	s := &offsetSampler{seen: map[uint32][]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	c := e.Dial()
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			for p := uint32(0); p < parts; p++ {
				o, found, err := c.GetOffset(context.Background(), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(group)},
					iggy.Name(stream), iggy.Name(topic), p)
				if err != nil || !found {
					continue
				}
				s.mu.Lock()
				if h := s.seen[p]; len(h) == 0 || h[len(h)-1] != o.StoredOffset {
					s.seen[p] = append(h, o.StoredOffset)
				}
				s.samples++
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// finish stops sampling and fails t if a stored offset ever decreased.
func (s *offsetSampler) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == 0 {
		t.Fatal("no stored offset was sampled: the check proves nothing")
	}
	for p, h := range s.seen {
		for i := 1; i < len(h); i++ {
			if h[i] < h[i-1] {
				t.Fatalf("partition %d: the group's stored offset moved backwards: %v", p, h)
			}
		}
	}
}

// ownedCount is how many partitions the runtime's first topic tracks as owned.
func ownedCount(rt *Runtime) int {
	n := 0
	for _, st := range rt.Status()[0].Partitions {
		if st.State == "owned" {
			n++
		}
	}
	return n
}

// memberOf returns the consumer-group member of the runtime's first sink's first topic.
func memberOf(t *testing.T, rt *Runtime) *iggy.Consumer {
	t.Helper()
	ic, ok := sinkOf(rt).topics[0].cons.(iggyConsumer)
	if !ok {
		t.Fatalf("consumer is %T", sinkOf(rt).topics[0].cons)
	}
	return ic.cn
}

// TestSlowMemberDuringMembershipStorm is the regression test of "rebalance events can be
// lost, and then offsets move backwards": a runtime whose Consume was blocked while 300
// joins and leaves happened tracked partitions it did not own, retried their stores for
// ever (ResourceNotFound), and once a partition came back after its new owner had stored
// further, its stale store moved the group's offset back.
//
// Here runtime A (after_consuming, 16 partitions) blocks in its first Consume, a batch of
// partition 1 (the only partition with data until then), while 80 times two members join,
// one leaves (a full rebalance: A keeps the even partitions, the other member takes the
// odd ones, pending revocations cleared) and the other polls one batch, stores it and
// leaves (320 changes of membership in all); A's member syncs in the background and
// explicitly every few rounds. Then one more member joins and stays, and A's Consume
// returns. Asserted: no stored offset of the group ever decreases (sampled from the
// server throughout; A's blocked batch of partition 1 is below what the other members
// stored there, so its offset must never be stored); A's tables end tracking exactly the
// partitions the server says A owns (none draining, nothing pending); after the last
// member leaves every partition is stored to 299 and every offset was delivered to A or
// stored by a member that polled it; no store of A failed transiently.
func TestSlowMemberDuringMembershipStorm(t *testing.T) {
	const parts, per, rounds = 16, 300, 80
	env := newIggyEnv(t)
	env.Topic("s", "t", parts)
	env.Fill("s", "t", 1, per, nil)
	sink := newGateSink()
	rt := env.start(testSinkConfig(config.CommitAfterConsuming, config.FailureStop), sink)
	select {
	case <-sink.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Consume never called")
	}
	if sink.gatedP != 1 {
		t.Fatalf("the first batch is of partition %d, want 1", sink.gatedP)
	}
	for p := uint32(0); p < parts; p++ {
		if p != 1 {
			env.Fill("s", "t", p, per, nil)
		}
	}
	a := memberOf(t, rt)
	sampler := env.sampleOffsets("g", "s", "t", parts)

	stormed := map[uint32][][2]uint64{} // partition → ranges a storm member polled and stored
	storm := env.Dial()
	cfg := iggy.ConsumerConfig{Stream: iggy.Name("s"), Topic: iggy.Name("t"), Group: "g", BatchSize: 10}
	join := func(what string) *iggy.Consumer {
		t.Helper()
		m, err := storm.NewConsumer(bg(t), cfg)
		if err != nil {
			t.Fatalf("%s joins: %v", what, err)
		}
		return m
	}
	leave := func(what string, m *iggy.Consumer) {
		t.Helper()
		if err := m.Close(bg(t)); err != nil {
			t.Fatalf("%s leaves: %v", what, err)
		}
	}
	resync := func() {
		t.Helper()
		if err := a.Resync(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range rounds {
		m1, m2 := join(fmt.Sprint("member ", 2*i)), join(fmt.Sprint("member ", 2*i+1))
		leave("its partner", m2) // full rebalance: A the even partitions, m1 the odd ones
		if i%10 == 0 {
			resync()
		}
		if err := m1.Resync(bg(t)); err != nil { // m1 learns it owns the odd partitions
			t.Fatal(err)
		}
		// m1 polls round-robin over its partitions until it got one batch of partition 1
		// (at most one poll per partition), storing each batch it gets.
		for range parts / 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			b, err := m1.Poll(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break // nothing left to poll (or a slow poll: it is kept by m1 and dropped)
			}
			if err != nil {
				t.Fatalf("round %d: poll: %v", i, err)
			}
			if err := m1.StoreOffset(bg(t), b.Partition, b.LastOffset()); err != nil {
				t.Fatalf("round %d: store %d/%d: %v", i, b.Partition, b.LastOffset(), err)
			}
			p := b.Partition
			stormed[p] = append(stormed[p], [2]uint64{b.Messages[0].Offset, b.LastOffset()})
			b.Release()
			if p == 1 {
				break
			}
		}
		leave("the member", m1)
		if i%10 == 5 {
			resync()
		}
	}
	if len(stormed[1]) == 0 {
		t.Fatal("no other member stored partition 1: the test proves nothing")
	}
	last := join("the last member")
	resync() // A knows the final state before its blocked batch is done
	gen, _ := a.Assignment()
	if gen < 2*rounds/10 {
		t.Fatalf("A's syncs saw %d assignment changes during the storm, want at least %d: the test proves nothing", gen, 2*rounds/10)
	}
	close(sink.gate)

	if err := testkit.Eventually("A tracks exactly what it owns, nothing pending", func() bool {
		_, owned := a.Assignment()
		_, lastOwns := last.Assignment()
		if len(owned) == 0 || len(owned)+len(lastOwns) != parts {
			return false
		}
		tracked := tablePartitions(rt)
		if len(tracked) != len(owned) {
			return false
		}
		for _, p := range owned {
			if tracked[p] != partOwned {
				return false
			}
		}
		for _, st := range rt.Status()[0].Partitions {
			if o, ok := env.Stored("g", "s", "t", st.Partition); st.Pending != 0 || !ok || o != per-1 {
				return false
			}
		}
		return true
	}); err != nil {
		_, lastOwns := last.Assignment()
		t.Fatalf("%v; the last member owns %v; %s", err, lastOwns, stormState(env, rt, a, parts))
	}
	leave("the last member", last)
	testkit.WaitFor(t, "every partition stored to 299", func() bool {
		for p := uint32(0); p < parts; p++ {
			if o, ok := env.Stored("g", "s", "t", p); !ok || o != per-1 {
				return false
			}
		}
		return len(tablePartitions(rt)) == parts
	})
	sampler.finish(t)
	stopRuntime(t, rt)
	for p := uint32(0); p < parts; p++ {
		seen := make([]bool, per)
		for _, o := range sink.delivered(p) {
			seen[o] = true
		}
		for _, r := range stormed[p] {
			for o := r[0]; o <= r[1]; o++ {
				seen[o] = true
			}
		}
		if o := slices.Index(seen, false); o >= 0 {
			t.Fatalf("partition %d offset %d: neither delivered to A nor stored by another member", p, o)
		}
	}
	st := rt.Status()[0].Stats
	if st.StoreErrors != 0 || st.CommitsRejected() != 0 {
		t.Fatalf("stats %+v: want no failed store", st)
	}
	// A's stale offset of partition 1 never reached the server: either its entry was
	// released (reported lost and regained) before the store was due, or the store was
	// refused by the consumer (ErrOffsetBehind), depending on which came first.
	t.Logf("A's generation after the storm %d; stores refused %d; partition 1 stored by others %d times",
		gen, st.StoresRefused, len(stormed[1]))
}

// TestRebalanceStormSinkControlled: a sink_controlled sink that commits from its own
// goroutine every 20 ms (and records 1 ms per batch of 10) while 150 members join and
// leave a 16-partition group (300 changes; joins revoke partitions from A into drains,
// leaves rebalance everything back). At the end every partition's stored offset equals
// its last message (999), every offset was delivered at least once, A tracks all 16
// partitions as owned with nothing pending and none draining, and no store failed
// (stores are never retried for ever: StoreErrors 0).
func TestRebalanceStormSinkControlled(t *testing.T) {
	const parts, per, members = 16, 1000, 150
	env := newIggyEnv(t)
	env.Topic("s", "t", parts)
	for p := uint32(0); p < parts; p++ {
		env.Fill("s", "t", p, per, nil)
	}
	sink := newTimerSink(20*time.Millisecond, time.Millisecond)
	rt := env.start(testSinkConfig(config.CommitSinkControlled, config.FailureStop), sink)
	testkit.WaitFor(t, "A delivers", func() bool { return rt.Status()[0].Stats.Delivered > 0 })
	a := memberOf(t, rt)
	storm := env.Dial()
	ownsAll := func(when string) {
		testkit.WaitFor(t, "A owns all partitions "+when, func() bool {
			if err := a.Resync(bg(t)); err != nil {
				t.Fatal(err)
			}
			return ownedCount(rt) == parts
		})
	}
	for i := range members {
		var before uint64
		if i%10 == 0 { // the join below takes 8 of A's 16, never partitions A lost already
			ownsAll(fmt.Sprintf("before member %d joins", i))
			before = rt.Status()[0].Stats.Revoked // before the join: A may report it at once
		}
		m, err := storm.NewConsumer(bg(t), iggy.ConsumerConfig{Stream: iggy.Name("s"), Topic: iggy.Name("t"), Group: "g"})
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		if i%10 == 0 {
			// A's member sees the revocation (besides its background syncs) and reports
			// it: the 8 partitions the newcomer took are revoked from A's table before
			// the newcomer leaves. Waiting for the report (not for a clock) is what makes
			// the count of revocations below exact.
			err := testkit.Eventually(fmt.Sprintf("A reports member %d's join", i), func() bool {
				if err := a.Resync(bg(t)); err != nil {
					t.Fatal(err)
				}
				return rt.Status()[0].Stats.Revoked >= before+parts/2
			})
			if err != nil {
				// What A's member, its table and the runtime saw, for a failure that
				// one run in many under -race on a loaded machine has shown.
				gen, assigned := a.Assignment()
				st := rt.Status()[0]
				var table []string
				for _, ps := range st.Partitions {
					table = append(table, fmt.Sprintf("%d:%s polled %d done %d stored %d paused %v", ps.Partition, ps.State, ps.Polled, ps.Done, ps.Stored, ps.Paused))
				}
				t.Fatalf("%v: revoked %d (before the join %d); A's member: generation %d, partitions %v; A's table: %s; stats %+v",
					err, st.Stats.Revoked, before, gen, assigned, strings.Join(table, "; "), st.Stats)
			}
		}
		if err := m.Close(bg(t)); err != nil {
			t.Fatalf("member %d leaves: %v", i, err)
		}
		if i%10 == 0 { // …and that it got them back
			ownsAll(fmt.Sprintf("after member %d left", i))
		}
	}
	delivered := rt.Status()[0].Stats.Delivered
	if delivered >= parts*per {
		t.Fatalf("everything was delivered before the storm ended (%d): the test proves nothing", delivered)
	}
	if err := testkit.Eventually("every partition stored to its last message", func() bool {
		for p := uint32(0); p < parts; p++ {
			if o, ok := env.Stored("g", "s", "t", p); !ok || o != per-1 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v; %s", err, stormState(env, rt, a, parts))
	}
	testkit.WaitFor(t, "A tracks all 16, nothing pending", func() bool {
		sts := rt.Status()[0].Partitions
		if len(sts) != parts {
			return false
		}
		for _, st := range sts {
			if st.State != "owned" || st.Pending != 0 || st.Stored != per-1 {
				return false
			}
		}
		return true
	})
	stopRuntime(t, rt)
	for p := uint32(0); p < parts; p++ {
		seen := make([]bool, per)
		for _, o := range sink.got(p) {
			seen[o] = true
		}
		if i := slices.Index(seen, false); i >= 0 {
			t.Fatalf("partition %d offset %d never delivered", p, i)
		}
	}
	st := rt.Status()[0].Stats
	if st.StoreErrors != 0 || st.Committed < parts*per || st.Revoked < parts/2*members/10 {
		t.Fatalf("stats %+v: want no failed store, everything committed, at least %d partitions revoked (drained)", st, parts/2*members/10)
	}
	t.Logf("delivered %d before the storm ended; %d delivered in all, %d partitions revoked, %d commits accepted, %d rejected (partitions released while the sink held them), %d stores refused",
		delivered, st.Delivered, st.Revoked, st.CommitsAccepted, st.CommitsRejected(), st.StoresRefused)
}

// TestFailingDrainDoesNotBlockOthers is the regression test of "one failing partition
// slows the whole topic": a full rebalance cleared the server's pending revocation, the
// revoked partition's drain stores failed with ResourceNotFound, and the commit loop's
// single failure counter held back every other partition's stores.
//
// Runtime A (sink_controlled, store delay 5 ms, retry backoff 1 h so a retried store
// would never come back in time) has delivered 0..19 of partitions 0 and 1, committing
// nothing. B joins: partition 1 is in flight, so it stays with A pending revocation and
// A drains it. C joins and leaves: the full rebalance gives 1 to B and clears the
// pending revocation. A's sink then commits 19 on partition 1: its one store attempt is
// refused by the server (ResourceNotFound), final: partition 1 is released (a second
// commit is ErrCommitUnknownPartition) and counted once. Partition 0's commit is stored
// at once all the same.
func TestFailingDrainDoesNotBlockOthers(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 0, 20, nil)
	env.Fill("s", "t", 1, 20, nil)
	sink := newRecSink()
	cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
	cfg.Commit.Delay, cfg.Commit.Interval = 5*time.Millisecond, time.Hour
	cfg.Retry.InitialBackoff, cfg.Retry.MaxBackoff = time.Hour, time.Hour
	rt := env.runtime([]*config.Sink{cfg}, map[string]sdk.Sink{"rec": sink})
	fb := &faultyBackend{backend: rt.be}
	var p1Stores atomic.Int32
	fb.fail = func(p uint32, _ uint64) error {
		if p == 1 {
			p1Stores.Add(1)
		}
		return nil
	}
	rt.be = fb
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "both partitions delivered", func() bool { return len(sink.got(0)) == 20 && len(sink.got(1)) == 20 })

	b, err := env.Dial().NewConsumer(bg(t), iggyConsumerConfig("s", "t", "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close(context.Background()) }()
	testkit.WaitFor(t, "partition 1 draining in A", func() bool { return tablePartitions(rt)[1] == partDraining })
	c, err := env.Dial().NewConsumer(bg(t), iggyConsumerConfig("s", "t", "g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(bg(t)); err != nil { // full rebalance: 0 → A, 1 → B, pending cleared
		t.Fatal(err)
	}
	testkit.WaitFor(t, "B owns partition 1", func() bool { _, p := b.Assignment(); return slices.Equal(p, []uint32{1}) })

	cm := sink.committer()
	if err := cm.Commit(env.partition("s", "t", 1), 19); err != nil {
		t.Fatalf("drain commit: %v", err)
	}
	testkit.WaitFor(t, "partition 1's store refused and released", func() bool { return rt.Status()[0].Stats.StoresRefused == 1 })
	if err := cm.Commit(env.partition("s", "t", 0), 19); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "partition 0 stored", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 19 })
	if err := cm.Commit(env.partition("s", "t", 1), 19); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("commit after the refusal: %v, want ErrCommitUnknownPartition", err)
	}
	if _, ok := env.Stored("g", "s", "t", 1); ok {
		t.Fatal("partition 1 stored although B owns it")
	}
	stopRuntime(t, rt)
	if n := p1Stores.Load(); n != 1 {
		t.Fatalf("%d store attempts on partition 1, want exactly 1 (a refusal is final)", n)
	}
	if st := rt.Status()[0].Stats; st.StoresRefused != 1 || st.StoreErrors != 0 || st.CommitsUnknown != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFailingStoreDoesNotDelayOthers: partition 1's stores fail (injected in front of the
// real consumer) with a transient error whose retry waits an hour; partition 0's 100
// messages are stored (to 99) all the same, after_consuming, with the commit interval at
// 1 h: only the per-partition store delay can have stored them. The stop then retries
// partition 1 once more and gives up at shutdown_timeout.
func TestFailingStoreDoesNotDelayOthers(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 1, 10, nil)
	sink := newRecSink()
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Commit.Delay, cfg.Commit.Interval = 5*time.Millisecond, time.Hour
	cfg.Retry.InitialBackoff, cfg.Retry.MaxBackoff = time.Hour, time.Hour
	cfg.ShutdownTimeout = 200 * time.Millisecond
	rt := env.runtime([]*config.Sink{cfg}, map[string]sdk.Sink{"rec": sink})
	fb := &faultyBackend{backend: rt.be}
	fb.fail = func(p uint32, _ uint64) error {
		if p == 1 {
			return errInjectedStore
		}
		return nil
	}
	rt.be = fb
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "partition 1's store failed", func() bool { return rt.Status()[0].Stats.StoreErrors == 1 })
	env.Fill("s", "t", 0, 100, nil)
	testkit.WaitFor(t, "partition 0 stored to 99", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 99 })
	if _, ok := env.Stored("g", "s", "t", 1); ok {
		t.Fatal("partition 1 stored")
	}
	if st := rt.Status()[0].Stats; st.StoreErrors != 1 {
		t.Fatalf("stats %+v: partition 1 retried before its hour", st)
	}
	stopRuntime(t, rt)
	if st := rt.Status()[0].Stats; st.StoreErrors != 2 || st.Committed != 100 {
		t.Fatalf("stats after stop %+v: want the final pass's one retry of partition 1 (StoreErrors 2), 100 committed", st)
	}
	if _, ok := env.Stored("g", "s", "t", 1); ok {
		t.Fatal("partition 1 stored")
	}
}

// stormState is what a storm test's failed wait reports: the group's stored offset of every
// partition, A's member (generation, partitions) and A's table, row by row, and its stats.
func stormState(env *iggyEnv, rt *Runtime, a *iggy.Consumer, parts uint32) string {
	var stored []string
	for p := uint32(0); p < parts; p++ {
		o, ok := env.Stored("g", "s", "t", p)
		stored = append(stored, fmt.Sprintf("%d:%d(%v)", p, o, ok))
	}
	gen, assigned := a.Assignment()
	st := rt.Status()[0]
	var table []string
	for _, ps := range st.Partitions {
		table = append(table, fmt.Sprintf("%d:%s polled %d delivered %d done %d stored %d pending %d uncommitted %d paused %v store failures %d",
			ps.Partition, ps.State, ps.Polled, ps.Delivered, ps.Done, ps.Stored, ps.Pending, ps.Uncommitted, ps.Paused, ps.StoreFailures))
	}
	return fmt.Sprintf("stored %s; A's member: generation %d, partitions %v; A's table: %s; stats %+v",
		strings.Join(stored, " "), gen, assigned, strings.Join(table, "; "), st.Stats)
}
