package sdktest

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Guarantee is what a connector promises about each message.
type Guarantee int

// The guarantees a harness checks.
const (
	// AtLeastOnce: every message reaches the target; a crash may repeat some.
	AtLeastOnce Guarantee = iota + 1
	// ExactlyOnce: every message reaches the target once, whatever crashes.
	ExactlyOnce
)

func (g Guarantee) String() string {
	if g == ExactlyOnce {
		return "exactly once"
	}
	return "at least once"
}

// Record is one message as the test's reader finds it in the target.
type Record struct {
	Partition uint32
	Offset    uint64
	Payload   []byte
}

// SinkHarness runs a Go sink against its real target the way the runtime does — open,
// assignment (with the sink's seek when it is a [sdk.PartitionSeeker]), batches per
// partition, the runtime storing what the sink committed, a rebalance that takes a
// partition away and gives it back, close — and checks the target with the test's
// reader. [SinkHarness.CrashAtEveryStep] does it once whole and then once per step with
// a crash there (the instance dropped without Close, its commits refused from then on,
// as when its process dies), each followed by a new instance that runs to the end.
//
// The simulated runtime keeps, per partition, the group's stored offset: resumed from
// at every assignment unless the sink seeks elsewhere; moved, in sink_controlled mode,
// to what the sink committed (at the step after each batch, at the rebalance and after
// Close), in after_consuming mode to each batch that Consume accepted.
type SinkHarness struct {
	// New returns a new, unopened sink (one per instance).
	New func() sdk.Sink
	// Config is the sink's plugin_config (see [Config]).
	Config any
	// SinkControlled runs the sink with a Committer (offset_commit = "sink_controlled");
	// false runs it as after_consuming.
	SinkControlled bool
	// Topic, Partitions, Messages (per partition) and Batch (messages per Consume) shape
	// the run; zero values: [Topic], 3, 30 and 10.
	Topic      sdk.TopicMetadata
	Partitions int
	Messages   int
	Batch      int
	// Payload makes each message's payload (nil: [JSONPayload]).
	Payload func(p uint32, offset uint64) []byte
	// Guarantee is what the sink states.
	Guarantee Guarantee
	// Reset empties the target before each run (nil: nothing to empty).
	Reset func(ctx context.Context) error
	// Read returns what the target holds, for the check.
	Read func(ctx context.Context) ([]Record, error)
	// Crash, when set, is called once with each instance right after its crash, to do to
	// the target what the death of its process would and an instance dropped in the
	// test's process does not: end its connections without finishing anything (the
	// server rolls back the open transaction, releases the locks, the lease) and stop its
	// goroutines (a timer that would still commit). nil: the crashed instance is left as
	// it is, beside the next one, until the test ends. See [SourceHarness.Crash].
	Crash func(sdk.Sink)
}

func (h *SinkHarness) defaults() {
	if h.Topic == (sdk.TopicMetadata{}) {
		h.Topic = Topic
	}
	if h.Partitions <= 0 {
		h.Partitions = 3
	}
	if h.Messages <= 0 {
		h.Messages = 30
	}
	if h.Batch <= 0 {
		h.Batch = 10
	}
	if h.Payload == nil {
		h.Payload = JSONPayload
	}
	if h.Guarantee == 0 {
		h.Guarantee = AtLeastOnce
	}
}

// Run runs the whole sequence once without a crash and checks the target; it returns
// how many steps the sequence has.
func (h SinkHarness) Run(t *testing.T) int {
	t.Helper()
	h.defaults()
	return h.run(t, 0)
}

// CrashAtEveryStep runs the sequence whole, then once with a crash at each of its steps
// (a subtest each), checking the target after every run.
func (h SinkHarness) CrashAtEveryStep(t *testing.T) {
	t.Helper()
	h.defaults()
	steps := h.run(t, 0)
	for k := 1; k <= steps; k++ {
		t.Run(fmt.Sprintf("crash_at_step_%02d", k), func(t *testing.T) { h.run(t, k) })
	}
}

// sinkRun is one simulated runtime: Iggy's stored offsets and the instances it starts.
type sinkRun struct {
	h       *SinkHarness
	t       *testing.T
	stored  []uint64 // per partition: the next offset the group resumes from
	crashAt int
	step    int
	names   []string // each step's name, for the report
}

type crashed struct{}

func (h *SinkHarness) run(t *testing.T, crashAt int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*Patience)
	defer cancel()
	if h.Reset != nil {
		if err := h.Reset(ctx); err != nil {
			t.Fatalf("reset the target: %v", err)
		}
	}
	r := &sinkRun{h: h, t: t, stored: make([]uint64, h.Partitions), crashAt: crashAt}
	first := r.instance(ctx, crashAt > 0)
	if first.crashed {
		t.Logf("crashed at step %d: %s", crashAt, r.names[len(r.names)-1])
		r.crashAt = 0
		if again := r.instance(ctx, false); again.crashed {
			t.Fatal("the recovery run crashed")
		}
	}
	h.check(ctx, t)
	return r.step
}

type instanceResult struct{ crashed bool }

// instance runs one sink instance until every message is stored, or until the crash.
func (r *sinkRun) instance(ctx context.Context, mayCrash bool) (res instanceResult) {
	h := r.h
	var c *Committer
	if h.SinkControlled {
		c = NewCommitter()
	}
	sink := h.New()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(crashed); !ok {
				panic(v)
			}
			res.crashed = true
			if c != nil {
				c.RevokeAll()
			}
			if h.Crash != nil {
				h.Crash(sink)
			}
			// A dead process writes nothing more; this instance's goroutines are stopped
			// only now that the test is over (Close under an ended context).
			r.t.Cleanup(func() {
				ended, cancel := context.WithCancel(context.Background())
				cancel()
				_ = sink.Close(ended)
			})
		}
		r.checkRefusals(c)
	}()
	r.at(mayCrash, "open")
	if err := sink.Open(ctx, SinkEnv(r.t, h.Config, c)); err != nil {
		r.t.Fatalf("open: %v", err)
	}
	pos := make([]uint64, h.Partitions)
	all := make([]uint32, h.Partitions)
	for i := range all {
		all[i] = uint32(i)
	}
	r.at(mayCrash, "assign every partition")
	r.assign(ctx, sink, c, pos, all)
	done := func() bool {
		for _, p := range pos {
			if p < uint64(h.Messages) {
				return false
			}
		}
		return true
	}
	pending := make([]uint64, h.Partitions) // after_consuming: accepted, not yet stored
	copy(pending, r.stored)
	for round := 0; !done(); round++ {
		for i := range pos {
			if pos[i] >= uint64(h.Messages) {
				continue
			}
			n := min(uint64(h.Batch), uint64(h.Messages)-pos[i])
			msgs := Messages(uint32(i), pos[i], n, h.Payload)
			r.at(mayCrash, fmt.Sprintf("consume partition %d offsets %d..%d", i, pos[i], pos[i]+n-1))
			r.consume(ctx, sink, c, uint32(i), msgs)
			pos[i] += n
			pending[i] = pos[i]
			r.at(mayCrash, fmt.Sprintf("store partition %d", i))
			r.store(c, pending, uint32(i))
		}
		if round == 0 && h.Partitions > 0 && !done() {
			// A rebalance: partition 0 taken away (its commits stored first, as the
			// runtime's drain does), then given back.
			r.at(mayCrash, "revoke partition 0")
			r.store(c, pending, 0)
			if c != nil {
				c.Revoke(Part(0))
			}
			r.at(mayCrash, "assign partition 0 again")
			r.assign(ctx, sink, c, pos, []uint32{0})
		}
	}
	r.at(mayCrash, "close")
	cctx, cancel := context.WithTimeout(ctx, Patience)
	defer cancel()
	if err := sink.Close(cctx); err != nil {
		r.t.Fatalf("close: %v", err)
	}
	for i := range pos {
		r.store(c, pending, uint32(i))
	}
	return res
}

// at counts a step and crashes there when it is the one.
func (r *sinkRun) at(mayCrash bool, name string) {
	r.step++
	r.names = append(r.names, name)
	if mayCrash && r.step == r.crashAt {
		panic(crashed{})
	}
}

func (r *sinkRun) part(id uint32) sdk.Partition {
	return sdk.Partition{StreamID: r.h.Topic.StreamID, TopicID: r.h.Topic.TopicID, PartitionID: id}
}

// assign gives ids to the sink, each resuming from the group's stored offset unless the
// sink seeks.
func (r *sinkRun) assign(ctx context.Context, sink sdk.Sink, c *Committer, pos []uint64, ids []uint32) {
	for _, id := range ids {
		pos[id] = r.stored[id]
	}
	if seeker, ok := sink.(sdk.PartitionSeeker); ok {
		parts := make([]sdk.Partition, len(ids))
		for i, id := range ids {
			parts[i] = r.part(id)
		}
		next, err := seeker.Assigned(ctx, r.h.Topic, parts)
		if err != nil {
			r.t.Fatalf("assigned %v: %v", ids, err)
		}
		for p, off := range next {
			if p.StreamID != r.h.Topic.StreamID || p.TopicID != r.h.Topic.TopicID || int(p.PartitionID) >= len(pos) {
				r.t.Fatalf("assigned: the sink seeks partition %v, which it was not given", p)
			}
			pos[p.PartitionID] = off
		}
	}
	if c != nil {
		for _, id := range ids {
			c.Assign(r.part(id), pos[id])
		}
	}
}

// consume delivers one batch, retried as the runtime would on errors (a few times).
func (r *sinkRun) consume(ctx context.Context, sink sdk.Sink, c *Committer, id uint32, msgs []sdk.ConsumedMessage) {
	retry := sdk.Retry{Initial: 10 * time.Millisecond, Max: time.Second, Attempts: 5}
	err := retry.Do(ctx, func(ctx context.Context, _ int) error {
		return Consume(ctx, sink, c, r.h.Topic, r.part(id), msgs)
	})
	if err != nil {
		r.t.Fatalf("consume partition %d offsets %d..%d: %v", id, msgs[0].Offset, msgs[len(msgs)-1].Offset, err)
	}
}

// store moves the group's stored offset of id: to what the sink committed
// (sink_controlled), or to what it accepted (after_consuming).
func (r *sinkRun) store(c *Committer, pending []uint64, id uint32) {
	if c == nil {
		r.stored[id] = max(r.stored[id], pending[id])
		return
	}
	if done, ok := c.Done(r.part(id)); ok && done > r.stored[id] {
		r.stored[id] = done
	}
}

func (r *sinkRun) checkRefusals(c *Committer) {
	if c == nil {
		return
	}
	if bad := c.OutOfRange(); len(bad) > 0 {
		r.t.Errorf("the sink committed offsets it was never given: %v", bad)
	}
}

// check reads the target and judges it by the guarantee.
func (h *SinkHarness) check(ctx context.Context, t *testing.T) {
	t.Helper()
	recs, err := h.Read(ctx)
	if err != nil {
		t.Fatalf("read the target: %v", err)
	}
	type key struct {
		p uint32
		o uint64
	}
	seen := map[key]int{}
	var problems []string
	for _, rec := range recs {
		k := key{rec.Partition, rec.Offset}
		seen[k]++
		if int(rec.Partition) >= h.Partitions || rec.Offset >= uint64(h.Messages) {
			problems = append(problems, fmt.Sprintf("partition %d offset %d: never sent", rec.Partition, rec.Offset))
			continue
		}
		if want := h.Payload(rec.Partition, rec.Offset); rec.Payload != nil && !bytes.Equal(rec.Payload, want) {
			problems = append(problems, fmt.Sprintf("partition %d offset %d: payload %q, sent %q", rec.Partition, rec.Offset, rec.Payload, want))
		}
	}
	dups := 0
	for p := range h.Partitions {
		for o := range uint64(h.Messages) {
			switch n := seen[key{uint32(p), o}]; {
			case n == 0:
				problems = append(problems, fmt.Sprintf("partition %d offset %d: missing", p, o))
			case n > 1 && h.Guarantee == ExactlyOnce:
				problems = append(problems, fmt.Sprintf("partition %d offset %d: %d times", p, o, n))
			case n > 1:
				dups += n - 1
			}
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("… %d more", len(problems)-20))
		}
		t.Fatalf("the target breaks %s:\n%s", h.Guarantee, strings.Join(problems, "\n"))
	}
	if dups > 0 {
		t.Logf("%d duplicates (allowed: %s)", dups, h.Guarantee)
	}
}
