package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func TestCommitterRules(t *testing.T) {
	c := sdktest.NewCommitter()
	p := sdktest.Part(0)
	if err := c.Commit(p, 0); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("unowned: %v", err)
	}
	c.Assign(p, 10)
	if err := c.Commit(p, 10); !errors.Is(err, sdk.ErrCommitOutOfRange) {
		t.Fatalf("undelivered: %v", err)
	}
	c.Deliver(p, sdktest.Messages(0, 10, 5, nil))
	for _, tc := range []struct {
		off  uint64
		want error
	}{{9, sdk.ErrCommitStale}, {12, nil}, {12, sdk.ErrCommitStale}, {11, sdk.ErrCommitStale}, {15, sdk.ErrCommitOutOfRange}, {14, nil}} {
		if err := c.Commit(p, tc.off); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Fatalf("commit %d: %v, want %v", tc.off, err, tc.want)
		}
	}
	if off, ok := c.Committed(p); !ok || off != 14 {
		t.Fatalf("committed %d %v", off, ok)
	}
	c.Revoke(p)
	if err := c.Commit(p, 14); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("revoked: %v", err)
	}
	got := fmt.Sprint(len(c.Commits()), len(c.Refused()), len(c.OutOfRange()))
	if got != "2 7 2" {
		t.Fatalf("commits, refused, out of range: %s", got)
	}
}

func TestPositionsExactlyOnceBookkeeping(t *testing.T) {
	c := sdktest.NewCommitter()
	env := sdktest.SinkEnv(t, nil, c)
	held := map[sdk.Partition]uint64{sdktest.Part(0): 7} // the target holds up to 6 of partition 0
	k := sdk.NewPositions(env, func(_ context.Context, _ sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
		out := map[sdk.Partition]uint64{}
		for _, p := range parts {
			if n, ok := held[p]; ok {
				out[p] = n
			}
		}
		return out, nil
	})
	p0, p1 := sdktest.Part(0), sdktest.Part(1)
	seek, err := k.Assigned(context.Background(), sdktest.Topic, []sdk.Partition{p0, p1})
	if err != nil || len(seek) != 1 || seek[p0] != 7 {
		t.Fatalf("seek %v %v", seek, err)
	}
	c.Assign(p0, 7)
	c.Assign(p1, 0)
	// A redelivery of what the target holds is cut off; the rest accepted once.
	batch := sdktest.Messages(0, 5, 5, nil)
	c.Deliver(p0, batch)
	if fresh := k.Fresh(p0, batch); len(fresh) != 3 || fresh[0].Offset != 7 {
		t.Fatalf("fresh %v", offsets(fresh))
	}
	if fresh := k.Fresh(p0, batch); fresh != nil {
		t.Fatalf("accepted twice: %v", offsets(fresh))
	}
	if err := k.Durable(p0, 9); err != nil {
		t.Fatal(err)
	}
	if err := k.Durable(p0, 8); err != nil { // behind: nothing to do
		t.Fatal(err)
	}
	if off, _ := c.Committed(p0); off != 9 || len(c.Commits()) != 1 {
		t.Fatalf("committed %d, commits %v", off, c.Commits())
	}
	// Written then synced: one commit per partition with something new.
	b1 := sdktest.Messages(1, 0, 4, nil)
	c.Deliver(p1, b1)
	k.Fresh(p1, b1)
	k.Written(p1, 3)
	if err := k.Synced(); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(p1); off != 3 || len(c.Commits()) != 2 {
		t.Fatalf("p1 committed %d, commits %v", off, c.Commits())
	}
	if err := k.Synced(); err != nil || len(c.Commits()) != 2 {
		t.Fatalf("a second sync committed again: %v %v", err, c.Commits())
	}
	// Revoked: Owned says so, Durable refuses with the runtime's error; a later batch of
	// the partition (assigned again) starts afresh.
	if !k.Owned(p1) {
		t.Fatal("owned p1")
	}
	c.Revoke(p1)
	if k.Owned(p1) {
		t.Fatal("p1 still owned after the revoke")
	}
	if err := k.Durable(p1, 3); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("durable on a revoked partition: %v", err)
	}
	c.Assign(p1, 2)
	again := sdktest.Messages(1, 2, 3, nil)
	c.Deliver(p1, again)
	if fresh := k.Fresh(p1, again); len(fresh) != 3 {
		t.Fatalf("after the reassignment: %v", offsets(fresh))
	}
	if err := k.Durable(p1, 4); err != nil {
		t.Fatal(err)
	}
	if refused := c.OutOfRange(); len(refused) != 0 {
		t.Fatalf("out of range commits: %v", refused)
	}
}

// TestPositionsSeek: a write whose outcome was unknown is settled by the target: landed,
// the batch is cut off and the next one commits past it; not landed, it is accepted again.
func TestPositionsSeek(t *testing.T) {
	c := sdktest.NewCommitter()
	k := sdk.NewPositions(sdktest.SinkEnv(t, nil, c), nil)
	p := sdktest.Part(0)
	c.Assign(p, 0)
	b := sdktest.Messages(0, 0, 5, nil)
	c.Deliver(p, b)
	if fresh := k.Fresh(p, b); len(fresh) != 5 {
		t.Fatalf("fresh %v", offsets(fresh))
	}
	// The write failed and did not land: the retry is accepted whole.
	k.Seek(p, 0)
	if fresh := k.Fresh(p, b); len(fresh) != 5 {
		t.Fatalf("after a seek back: %v", offsets(fresh))
	}
	// It failed again but landed: the retry is cut off, the next batch commits past it.
	k.Seek(p, 5)
	if fresh := k.Fresh(p, b); fresh != nil {
		t.Fatalf("after a seek forward: %v", offsets(fresh))
	}
	if next, ok := k.Next(p); !ok || next != 5 {
		t.Fatalf("next %d %v", next, ok)
	}
	b2 := sdktest.Messages(0, 5, 3, nil)
	c.Deliver(p, b2)
	if fresh := k.Fresh(p, b2); len(fresh) != 3 {
		t.Fatalf("next batch: %v", offsets(fresh))
	}
	if err := k.Durable(p, 7); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(p); off != 7 {
		t.Fatalf("committed %d, want 7", off)
	}
}

func TestPositionsWithoutCommitter(t *testing.T) {
	k := sdk.NewPositions(sdk.SinkEnv{}, nil)
	p := sdktest.Part(0)
	if got := k.Fresh(p, sdktest.Messages(0, 3, 3, nil)); len(got) != 3 {
		t.Fatal(got)
	}
	k.Written(p, 5)
	if err := k.Synced(); err != nil || !k.Owned(p) {
		t.Fatal(err)
	}
	if next, ok := k.Next(p); !ok || next != 6 {
		t.Fatalf("next %d %v", next, ok)
	}
}

// TestPositionsAtForARewindSeeker: a sink that is a RewindSeeker gives its positions with
// the timestamp of the last message written; Positions returns them, Assigned the same
// offsets; the bookkeeping is that of Assigned (a redelivery cut off, the offset before
// the seek known done); after a rewind the sink forgets the partition, whose messages from
// offset 0 are accepted again.
func TestPositionsAtForARewindSeeker(t *testing.T) {
	c := sdktest.NewCommitter()
	held := map[sdk.Partition]sdk.Position{sdktest.Part(0): {Next: 7, Timestamp: 1234}}
	k := sdk.NewPositionsAt(sdktest.SinkEnv(t, nil, c), func(_ context.Context, _ sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]sdk.Position, error) {
		out := map[sdk.Partition]sdk.Position{}
		for _, p := range parts {
			if at, ok := held[p]; ok {
				out[p] = at
			}
		}
		return out, nil
	})
	p0, p1 := sdktest.Part(0), sdktest.Part(1)
	at, err := k.Positions(context.Background(), sdktest.Topic, []sdk.Partition{p0, p1})
	if err != nil || len(at) != 1 || at[p0] != (sdk.Position{Next: 7, Timestamp: 1234}) {
		t.Fatalf("positions %v %v", at, err)
	}
	seek, err := k.Assigned(context.Background(), sdktest.Topic, []sdk.Partition{p0, p1})
	if err != nil || len(seek) != 1 || seek[p0] != 7 {
		t.Fatalf("seek %v %v", seek, err)
	}
	c.Assign(p0, 7)
	batch := sdktest.Messages(0, 5, 5, nil)
	c.Deliver(p0, batch)
	if fresh := k.Fresh(p0, batch); len(fresh) != 3 || fresh[0].Offset != 7 {
		t.Fatalf("fresh %v", offsets(fresh))
	}
	if !k.Owned(p0) { // asks with offset 6, known done
		t.Fatal("p0 not owned")
	}
	// Purged: the partition starts again at 0, its new messages are not the ones held.
	k.Forget(p0)
	c.Assign(p0, 0)
	again := sdktest.Messages(0, 0, 4, nil)
	c.Deliver(p0, again)
	if fresh := k.Fresh(p0, again); len(fresh) != 4 {
		t.Fatalf("after the rewind: %v", offsets(fresh))
	}
	if err := k.Durable(p0, 3); err != nil {
		t.Fatal(err)
	}
	if off, ok := c.Committed(p0); !ok || off != 3 {
		t.Fatalf("committed %d %v", off, ok)
	}
	// A LoadPositions sink's Positions carry no timestamps.
	plain := sdk.NewPositions(sdk.SinkEnv{}, func(_ context.Context, _ sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
		return map[sdk.Partition]uint64{parts[0]: 9}, nil
	})
	if at, err := plain.Positions(context.Background(), sdktest.Topic, []sdk.Partition{p1}); err != nil || at[p1] != (sdk.Position{Next: 9}) {
		t.Fatalf("plain positions %v %v", at, err)
	}
}

func offsets(msgs []sdk.ConsumedMessage) []uint64 {
	var out []uint64
	for _, m := range msgs {
		out = append(out, m.Offset)
	}
	return out
}

// originOf reads the "lane" and "pos" headers a test source writes.
func originOf(m sdk.SentMessage) (sdk.Origin[uint64], bool) {
	lane, ok := sdk.Lookup(m.Headers, "lane")
	pos, ok2 := sdk.Lookup(m.Headers, "pos")
	if !ok || !ok2 {
		return sdk.Origin[uint64]{}, false
	}
	v, err := pos.AsUint64()
	return sdk.Origin[uint64]{Lane: string(lane.Value), Pos: v}, err == nil
}

func produced(lane string, pos uint64, key string) sdk.ProducedMessage {
	return sdk.ProducedMessage{PartitionKey: []byte(key), Payload: fmt.Appendf(nil, "%s:%d", lane, pos),
		Headers: []sdk.Header{{Key: sdk.String("lane"), Value: sdk.String(lane)}, {Key: sdk.String("pos"), Value: sdk.Uint64(pos)}}}
}

func TestReadBack(t *testing.T) {
	log := sdktest.NewLog(2)
	// Lanes a and b share a partition (key "k"); a message of another writer carries no origin.
	log.Append([]sdk.ProducedMessage{produced("a", 1, "k"), produced("a", 2, "k"), produced("b", 7, "k"), produced("a", 3, "k")})
	log.Append([]sdk.ProducedMessage{{PartitionKey: []byte("k"), Payload: []byte("foreign")}})
	env := sdktest.SourceEnv(t, nil, nil, log)
	less := func(a, b uint64) bool { return a < b }
	// With a window of 1 only the partition's last message is read: nothing of a or b.
	o, err := sdk.ReadBack(context.Background(), env, 1, originOf, less)
	if err != nil || !o.Read() || len(o.Lanes()) != 0 {
		t.Fatalf("window 1: %v %v", o.Lanes(), err)
	}
	o, err = sdk.ReadBack(context.Background(), env, 10, originOf, less)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(o.Lanes()) != "map[a:3 b:7]" {
		t.Fatalf("lanes %v", o.Lanes())
	}
	for _, c := range []struct {
		lane string
		pos  uint64
		want bool
	}{{"a", 3, true}, {"a", 1, true}, {"a", 4, false}, {"b", 7, true}, {"b", 8, false}, {"c", 0, false}} {
		if got := o.HoldsKeyed([]byte("k"), c.lane, c.pos); got != c.want {
			t.Errorf("HoldsKeyed(k, %s, %d) = %v", c.lane, c.pos, got)
		}
		if got := o.Holds(-1, c.lane, c.pos); got != c.want {
			t.Errorf("Holds(any, %s, %d) = %v", c.lane, c.pos, got)
		}
	}
	if o.HoldsKeyed(nil, "a", 1) {
		t.Error("an unkeyed message cannot be placed")
	}
	// Without a tail reader nothing is held.
	o, err = sdk.ReadBack(context.Background(), sdk.SourceEnv{}, 10, originOf, less)
	if err != nil || o.Read() || o.Holds(-1, "a", 0) {
		t.Fatalf("no reader: %v", err)
	}
}

// TestReadBackExplicitPartition: messages sent to a named partition (ProducedMessage.
// Partition) land there in the Log and are found there by Holds; another partition
// holds nothing of their lane.
func TestReadBackExplicitPartition(t *testing.T) {
	log := sdktest.NewLog(3)
	m := func(lane string, pos uint64, part uint32) sdk.ProducedMessage {
		p := produced(lane, pos, "")
		p.Partition = sdk.PartitionAt(part)
		return p
	}
	log.Append([]sdk.ProducedMessage{m("r2", 10, 2), m("r2", 11, 2), m("r0", 5, 0)})
	if n := len(log.Partition(2)); n != 2 {
		t.Fatalf("partition 2 holds %d messages, want 2", n)
	}
	o, err := sdk.ReadBack(context.Background(), sdktest.SourceEnv(t, nil, nil, log), 1, originOf, func(a, b uint64) bool { return a < b })
	if err != nil {
		t.Fatal(err)
	}
	if o.Partitions() != 3 {
		t.Fatalf("Partitions() = %d, want 3", o.Partitions())
	}
	for _, c := range []struct {
		part uint32
		lane string
		pos  uint64
		want bool
	}{{2, "r2", 11, true}, {2, "r2", 12, false}, {1, "r2", 11, false}, {0, "r0", 5, true}, {7, "r0", 5, false}} {
		if got := o.Holds(int(c.part), c.lane, c.pos); got != c.want {
			t.Errorf("Holds(%d, %s, %d) = %v, want %v", c.part, c.lane, c.pos, got, c.want)
		}
	}
}

// mapTarget is the target of the harness' own tests: a map the sinks below write to, kept
// across instances as a database would be (this package's tests cannot run a real one).
type mapTarget struct {
	mu      sync.Mutex
	rows    []sdktest.Record
	offsets map[sdk.Partition]uint64 // next, written with the rows (exactly once)
	leased  bool                     // a leaseSink holds the target
}

func (m *mapTarget) reset(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows, m.offsets = nil, map[sdk.Partition]uint64{}
	return nil
}

func (m *mapTarget) read(context.Context) ([]sdktest.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.rows), nil
}

// txSink writes each batch and its offset in one step and seeks past what the target
// holds: exactly once. With commitFirst it commits before writing, a bug a crash exposes;
// with noSeek it forgets to seek, which a redelivery exposes.
type txSink struct {
	target      *mapTarget
	keep        *sdk.Positions
	commitFirst bool
	noSeek      bool
}

func (s *txSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.keep = sdk.NewPositions(env, func(_ context.Context, _ sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
		if s.noSeek {
			return nil, nil
		}
		s.target.mu.Lock()
		defer s.target.mu.Unlock()
		out := map[sdk.Partition]uint64{}
		for _, p := range parts {
			if n, ok := s.target.offsets[p]; ok {
				out[p] = n
			}
		}
		return out, nil
	})
	return nil
}

func (s *txSink) Assigned(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	return s.keep.Assigned(ctx, topic, parts)
}

func (s *txSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	fresh := s.keep.Fresh(meta.Partition, msgs)
	if len(fresh) == 0 {
		return nil
	}
	last := fresh[len(fresh)-1].Offset
	if s.commitFirst {
		_ = s.keep.Durable(meta.Partition, last)
		return nil // and never writes: lost if nothing redelivers it
	}
	s.target.mu.Lock()
	for _, m := range fresh {
		s.target.rows = append(s.target.rows, sdktest.Record{Partition: meta.Partition.PartitionID, Offset: m.Offset, Payload: slices.Clone(m.Payload)})
	}
	s.target.offsets[meta.Partition] = last + 1
	s.target.mu.Unlock()
	if err := s.keep.Durable(meta.Partition, last); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		return err
	}
	return nil
}

func (s *txSink) Close(context.Context) error { return nil }

func harness(target *mapTarget, mk func() sdk.Sink, g sdktest.Guarantee) sdktest.SinkHarness {
	return sdktest.SinkHarness{New: mk, SinkControlled: true, Guarantee: g, Partitions: 2, Messages: 25, Batch: 10,
		Reset: target.reset, Read: target.read}
}

func TestSinkHarnessPassesAnExactlyOnceSink(t *testing.T) {
	target := &mapTarget{}
	h := harness(target, func() sdk.Sink { return &txSink{target: target} }, sdktest.ExactlyOnce)
	if steps := h.Run(t); steps != 17 {
		t.Fatalf("%d steps", steps) // open, assign, 3 rounds of 2 × (consume, store) less one, revoke, reassign, close
	}
	h.CrashAtEveryStep(t)
}

// TestSinkHarnessCatchesBrokenSinks runs the harness on sinks that break their promise
// in a child process and checks it fails each with the defect named.
func TestSinkHarnessCatchesBrokenSinks(t *testing.T) {
	if name := os.Getenv("SDKTEST_BROKEN"); name != "" {
		target := &mapTarget{}
		switch name {
		case "commit-first":
			harness(target, func() sdk.Sink { return &txSink{target: target, commitFirst: true} }, sdktest.AtLeastOnce).Run(t)
		case "no-seek":
			harness(target, func() sdk.Sink { return &txSink{target: target, noSeek: true} }, sdktest.ExactlyOnce).CrashAtEveryStep(t)
		}
		return
	}
	for name, want := range map[string]string{
		"commit-first": "partition 0 offset 0: missing",
		"no-seek":      "partition 0 offset 0: 2 times",
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSinkHarnessCatchesBrokenSinks$")
			cmd.Env = append(os.Environ(), "SDKTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), want) {
				t.Fatalf("the harness did not fail with %q (err %v):\n%s", want, err, out)
			}
		})
	}
}

// cursorSource reads lanes "a" and "b" of a fixed origin, carries each position in its
// headers and its cursor in the state; with readBack it skips what the topic holds.
type cursorSource struct {
	readBack bool
	n        uint64
	next     uint64 // the next position of both lanes
	held     *sdk.Origins[uint64]
}

func (s *cursorSource) Open(ctx context.Context, env sdk.SourceEnv) error {
	if len(env.State) > 0 {
		if _, err := fmt.Sscan(string(env.State), &s.next); err != nil {
			return err
		}
	}
	if s.readBack {
		var err error
		s.held, err = sdk.ReadBack(ctx, env, 20, originOf, func(a, b uint64) bool { return a < b })
		return err
	}
	return nil
}

func (s *cursorSource) Read(context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	if s.next >= s.n {
		return sdk.SourceBatch{}, nil, sdk.ErrEndOfInput
	}
	var b sdk.SourceBatch
	for _, lane := range []string{"a", "b"} {
		for pos := s.next; pos < min(s.next+3, s.n); pos++ {
			if s.held != nil && s.held.HoldsKeyed([]byte(lane), lane, pos) {
				continue
			}
			b.Messages = append(b.Messages, produced(lane, pos, lane))
		}
	}
	s.next = min(s.next+3, s.n)
	b.State = fmt.Append(nil, s.next)
	return b, sdk.NoAck, nil
}

func (s *cursorSource) Close(context.Context) error { return nil }

func checkOnce(dupsAllowed bool) func(t *testing.T, log *sdktest.Log) {
	return func(t *testing.T, log *sdktest.Log) {
		t.Helper()
		seen := map[string]int{}
		for _, m := range log.All() {
			seen[string(m.Message.Payload)]++
		}
		for _, lane := range []string{"a", "b"} {
			for pos := range 10 {
				k := fmt.Sprintf("%s:%d", lane, pos)
				if n := seen[k]; n == 0 || (n > 1 && !dupsAllowed) {
					t.Fatalf("%s: %d times", k, n)
				}
			}
		}
		if len(seen) != 20 {
			t.Fatalf("%d distinct messages", len(seen))
		}
	}
}

func TestSourceHarness(t *testing.T) {
	h := sdktest.SourceHarness{New: func() sdk.Source { return &cursorSource{readBack: true, n: 10} }, Partitions: 2, Check: checkOnce(false)}
	if steps := h.Run(t); steps != 15 {
		t.Fatalf("%d steps", steps) // open, 4 × (read, append, ack), the read that ends, close
	}
	h.CrashAtEveryStep(t)

	// Without the read-back a crash between append and ack duplicates: caught by Check.
	if os.Getenv("SDKTEST_BROKEN") == "source" {
		h.New = func() sdk.Source { return &cursorSource{n: 10} }
		h.CrashAtEveryStep(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSourceHarness$")
	cmd.Env = append(os.Environ(), "SDKTEST_BROKEN=source")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "crash_at_step_04") || !strings.Contains(string(out), "a:0: 2 times") {
		t.Fatalf("a source without read-back passed (err %v):\n%s", err, out)
	}
}

// TestPositionsDone: Done says where a partition's next write continues what is durable:
// unknown before anything is, the target's position once Assigned found it, the last
// durable offset + 1 after Durable, unknown again once the runtime refused the partition
// or the sink forgot it.
func TestPositionsDone(t *testing.T) {
	c := sdktest.NewCommitter()
	k := sdk.NewPositions(sdktest.SinkEnv(t, nil, c), func(context.Context, sdk.TopicMetadata, []sdk.Partition) (map[sdk.Partition]uint64, error) {
		return map[sdk.Partition]uint64{sdktest.Part(0): 5}, nil
	})
	p0, p1 := sdktest.Part(0), sdktest.Part(1)
	if _, ok := k.Done(p0); ok {
		t.Fatal("done before anything is known")
	}
	if _, err := k.Assigned(context.Background(), sdktest.Topic, []sdk.Partition{p0, p1}); err != nil {
		t.Fatal(err)
	}
	c.Assign(p0, 5)
	c.Assign(p1, 0)
	if next, ok := k.Done(p0); !ok || next != 5 {
		t.Fatalf("p0 done %d %v, want the target's 5", next, ok)
	}
	if _, ok := k.Done(p1); ok {
		t.Fatal("p1 done with nothing durable")
	}
	c.Deliver(p1, sdktest.Messages(1, 0, 3, nil))
	if err := k.Durable(p1, 2); err != nil {
		t.Fatal(err)
	}
	if next, ok := k.Done(p1); !ok || next != 3 {
		t.Fatalf("p1 done %d %v, want 3", next, ok)
	}
	c.Revoke(p1)
	if err := k.Durable(p1, 2); err != nil { // known durable: nothing asked of the runtime
		t.Fatal(err)
	}
	if err := k.Durable(p1, 3); !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		t.Fatalf("durable on a revoked partition: %v", err)
	}
	if _, ok := k.Done(p1); ok {
		t.Fatal("p1 done after the runtime refused it")
	}
	k.Forget(p0)
	if _, ok := k.Done(p0); ok {
		t.Fatal("p0 done after Forget")
	}
}

// leaseSink is txSink holding its target's one lease from Open to Close, as a database
// session holds a lock: an instance cannot open while a crashed one still holds it,
// unless the harness' Crash lets go of it, as the death of its process would.
type leaseSink struct {
	txSink
	held bool
}

func (s *leaseSink) Open(ctx context.Context, env sdk.SinkEnv) error {
	s.target.mu.Lock()
	if s.target.leased {
		s.target.mu.Unlock()
		return errors.New("the target is leased to another instance")
	}
	s.target.leased, s.held = true, true
	s.target.mu.Unlock()
	return s.txSink.Open(ctx, env)
}

func (s *leaseSink) release() {
	s.target.mu.Lock()
	defer s.target.mu.Unlock()
	if s.held {
		s.target.leased, s.held = false, false
	}
}

func (s *leaseSink) Close(context.Context) error { s.release(); return nil }

// TestSinkHarnessCrashHook: Crash is called once per crash, with the instance that
// crashed (never opened again, never closed before it), so a sink whose target holds a
// session's lease recovers; without it the recovery instance cannot open.
func TestSinkHarnessCrashHook(t *testing.T) {
	target := &mapTarget{}
	if os.Getenv("SDKTEST_BROKEN") == "lease" {
		harness(target, func() sdk.Sink { return &leaseSink{txSink: txSink{target: target}} }, sdktest.ExactlyOnce).CrashAtEveryStep(t)
		return
	}
	h := harness(target, func() sdk.Sink { return &leaseSink{txSink: txSink{target: target}} }, sdktest.ExactlyOnce)
	var mu sync.Mutex
	crashed := map[sdk.Sink]bool{}
	h.Crash = func(s sdk.Sink) {
		mu.Lock()
		defer mu.Unlock()
		if crashed[s] {
			t.Error("Crash called twice for one instance")
		}
		crashed[s] = true
		s.(*leaseSink).release()
	}
	h.CrashAtEveryStep(t)
	if len(crashed) != 17 {
		t.Fatalf("Crash called for %d instances, want one per step (17)", len(crashed))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSinkHarnessCrashHook$")
	cmd.Env = append(os.Environ(), "SDKTEST_BROKEN=lease")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "open: the target is leased to another instance") {
		t.Fatalf("the recovery instance opened beside a crashed one holding the lease (err %v):\n%s", err, out)
	}
}

// TestSourceHarnessCrashHook: the same for a source: Crash gets each crashed instance
// once, before the next one opens.
func TestSourceHarnessCrashHook(t *testing.T) {
	var mu sync.Mutex
	open := 0 // instances opened and neither closed nor crashed
	crashes := 0
	h := sdktest.SourceHarness{Partitions: 2, Check: checkOnce(false),
		New: func() sdk.Source {
			return &countedSource{cursorSource: cursorSource{readBack: true, n: 10}, mu: &mu, open: &open}
		}}
	h.Crash = func(s sdk.Source) {
		mu.Lock()
		defer mu.Unlock()
		crashes++
		if cs := s.(*countedSource); cs.opened {
			cs.opened = false
			open--
		}
	}
	h.CrashAtEveryStep(t)
	if crashes != 15 {
		t.Fatalf("Crash called %d times, want one per step (15)", crashes)
	}
}

// countedSource is cursorSource counting the instances open at once: never two.
type countedSource struct {
	cursorSource
	mu     *sync.Mutex
	open   *int
	opened bool
}

func (s *countedSource) Open(ctx context.Context, env sdk.SourceEnv) error {
	s.mu.Lock()
	if *s.open > 0 {
		s.mu.Unlock()
		return errors.New("another instance is open")
	}
	*s.open, s.opened = *s.open+1, true
	s.mu.Unlock()
	return s.cursorSource.Open(ctx, env)
}

func (s *countedSource) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened {
		s.opened = false
		*s.open--
	}
	return nil
}
