package iggy_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

// handOverBound is how soon after the previous owner's commit the new owner must
// receive data of a handed-over partition: one assignment sync (1 s by default) plus
// slack, far below the 5 s heartbeat.
const handOverBound = 1500 * time.Millisecond

// pollWithin polls cn until want messages arrived or d passes, and returns
// partition → offsets.
func pollWithin(t testing.TB, cn *iggy.Consumer, want int, d time.Duration) map[uint32][]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	got := map[uint32][]uint64{}
	for n := 0; n < want; {
		b, err := cn.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d messages within %v: %v (got %v)", n, want, d, err, got)
		}
		got[b.Partition] = append(got[b.Partition], offsetsOf(b.Messages)...)
		n += len(b.Messages)
		b.Release()
	}
	return got
}

// changeLog records, in order, what a Consumer's OnAssignmentChange reported.
type changeLog struct {
	mu  sync.Mutex
	got []iggy.AssignmentChange
}

// watched returns cfg with OnAssignmentChange recording into a new changeLog.
func watched(cfg iggy.ConsumerConfig) (iggy.ConsumerConfig, *changeLog) {
	l := &changeLog{}
	cfg.OnAssignmentChange = func(ch iggy.AssignmentChange) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, iggy.AssignmentChange{Revoked: slices.Clone(ch.Revoked), Assigned: slices.Clone(ch.Assigned)})
	}
	return cfg, l
}

// take returns the changes reported since the last take.
func (l *changeLog) take() []iggy.AssignmentChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// change is an AssignmentChange literal for comparisons.
func change(revoked, assigned []uint32) iggy.AssignmentChange {
	return iggy.AssignmentChange{Revoked: revoked, Assigned: assigned}
}

// want fails unless the changes reported since the last take are exactly want.
func (l *changeLog) want(t testing.TB, when string, want ...iggy.AssignmentChange) {
	t.Helper()
	got := l.take()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = slices.Equal(got[i].Revoked, want[i].Revoked) && slices.Equal(got[i].Assigned, want[i].Assigned)
	}
	if !ok {
		t.Fatalf("%s: assignment changes %+v, want %+v", when, got, want)
	}
}

// pollNothing calls Poll with a short deadline that must expire (nothing to deliver):
// it lets the Consumer report what changed.
func pollNothing(t testing.TB, cn *iggy.Consumer, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if b, err := cn.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: poll with nothing to deliver: batch %v, %v", when, b, err)
	}
}

// TestConsumerHandOverAfterCommit: A owns 4 partitions and holds polled, uncommitted data
// of each when B joins, so A's surplus partitions 2 and 3 stay pending revocation on the
// server (B gets nothing). A learns the revocation by its assignment sync (default 1 s,
// heartbeat left at 5 s); once A commits them, B learns of the hand-over by its own
// assignment sync and receives their new data within handOverBound.
func TestConsumerHandOverAfterCommit(t *testing.T) {
	s := servertest.Start(t) // rebalancing timeout 30 s
	c := dial(t, s)
	setup(t, c, 4)
	all := []uint32{0, 1, 2, 3}
	fill(t, c, all, 0, 3)
	acfg, alog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	a := newConsumer(t, c, acfg)
	got := drain(t, a, 12)
	for _, p := range all {
		if !slices.Equal(got[p], seq(0, 3)) {
			t.Fatalf("a polled %v", got)
		}
	}
	alog.want(t, "a's first polls", change(nil, all))

	bcfg, blog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	b := newConsumer(t, c, bcfg)
	if _, parts := b.Assignment(); len(parts) != 0 {
		t.Fatalf("b owns %v while a's partitions are pending revocation", parts)
	}
	revokeStart := time.Now()
	testkit.WaitFor(t, "a's assignment sync revokes 2 and 3", func() bool {
		_, parts := a.Assignment()
		return slices.Equal(parts, []uint32{0, 1})
	})
	if d := time.Since(revokeStart); d > handOverBound {
		t.Fatalf("a's assignment sync revokes 2 and 3 after %v, want within %v", d, handOverBound)
	}
	// A's last batch was of partition 3: the change waits for A's next Poll.
	alog.want(t, "before a polled again")
	pollNothing(t, a, "a")
	alog.want(t, "a polled again", change([]uint32{2, 3}, nil))

	// B is already waiting in Poll (its prompt sync done) when A commits: only its
	// periodic assignment sync can tell it.
	fill(t, c, []uint32{2, 3}, 3, 2)
	type result struct {
		got map[uint32][]uint64
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got := map[uint32][]uint64{}
		for n := 0; n < 4; {
			batch, err := b.Poll(ctx)
			if err != nil {
				done <- result{got: got, err: err}
				return
			}
			got[batch.Partition] = append(got[batch.Partition], offsetsOf(batch.Messages)...)
			n += len(batch.Messages)
			batch.Release()
		}
		done <- result{got: got, at: time.Now()}
	}()
	// Nothing marks the moment after which b could no longer take the partitions early
	// (its periodic sync runs every heartbeat, and each one must find them still pending):
	// watch b's assignment for six heartbeats.
	testkit.Quiet(t, 300*time.Millisecond, "b's empty assignment before a committed", func() bool {
		_, parts := b.Assignment()
		return len(parts) == 0
	})
	for _, p := range []uint32{2, 3} {
		if err := a.StoreOffset(testCtx(t), p, 2); err != nil {
			t.Fatalf("commit %d (pending revocation): %v", p, err)
		}
	}
	committed := time.Now()
	r := <-done
	if r.err != nil {
		t.Fatalf("b poll: %v (got %v)", r.err, r.got)
	}
	if d := r.at.Sub(committed); d > handOverBound {
		t.Fatalf("b received the handed-over partitions %v after a's commit, want within %v", d, handOverBound)
	}
	if len(r.got) != 2 || !slices.Equal(r.got[2], []uint64{3, 4}) || !slices.Equal(r.got[3], []uint64{3, 4}) {
		t.Fatalf("b received %v, want partitions 2 and 3 offsets [3 4]", r.got)
	}
	t.Logf("b received the handed-over partitions %v after a's commit", r.at.Sub(committed).Round(time.Millisecond))
	if _, parts := b.Assignment(); !slices.Equal(parts, []uint32{2, 3}) {
		t.Fatalf("b owns %v", parts)
	}
	// The two hand-overs may be seen by one sync or two; either way before their data.
	var assigned []uint32
	for _, ch := range blog.take() {
		if len(ch.Revoked) != 0 {
			t.Fatalf("b was told of a revocation: %+v", ch)
		}
		assigned = append(assigned, ch.Assigned...)
	}
	if slices.Sort(assigned); !slices.Equal(assigned, []uint32{2, 3}) {
		t.Fatalf("b was told of assignments %v, want partitions 2 and 3", assigned)
	}
	if _, parts := a.Assignment(); !slices.Equal(parts, []uint32{0, 1}) {
		t.Fatalf("a owns %v", parts)
	}
}

// TestConsumerRevokedWhileReplyInFlight: B joins after the server answered A's poll of
// partition 1 but before A handled the reply (a hook between the two), so the server
// counts the batch as polled by the group and keeps partition 1 pending revocation with
// A. A still returns the batch (offsets 0..2), and reports the revocation only once it
// polls again; when A commits the batch, B gets
// partition 1 and its new data within handOverBound — not after the 30 s rebalancing
// timeout it would take had A thrown the batch away.
func TestConsumerRevokedWhileReplyInFlight(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 2)
	fill(t, c, []uint32{1}, 0, 3)
	acfg, alog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	a := newConsumer(t, c, acfg)
	var b *iggy.Consumer
	var joinErr error
	iggy.SetPollHook(a, func(p uint32) {
		if p != 1 || b != nil || joinErr != nil {
			return
		}
		b, joinErr = c.NewConsumer(testCtx(t), iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	batch, err := a.Poll(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if joinErr != nil || b == nil {
		t.Fatalf("b joined: %v", joinErr)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	if batch.Partition != 1 || !slices.Equal(offsetsOf(batch.Messages), seq(0, 3)) {
		t.Fatalf("batch partition %d offsets %v, want 1, [0 1 2]", batch.Partition, offsetsOf(batch.Messages))
	}
	batch.Release()
	alog.want(t, "a's first poll", change(nil, []uint32{0, 1}))
	if _, parts := b.Assignment(); len(parts) != 0 {
		t.Fatalf("b owns %v while partition 1 is pending revocation", parts)
	}
	revokeStart := time.Now()
	testkit.WaitFor(t, "a's assignment sync revokes 1", func() bool {
		_, parts := a.Assignment()
		return slices.Equal(parts, []uint32{0})
	})
	if d := time.Since(revokeStart); d > handOverBound {
		t.Fatalf("a's assignment sync revokes 1 after %v, want within %v", d, handOverBound)
	}
	alog.want(t, "before a polled again")
	pollNothing(t, a, "a")
	alog.want(t, "a polled again", change([]uint32{1}, nil))

	fill(t, c, []uint32{1}, 3, 2)
	if err := a.StoreOffset(testCtx(t), 1, 2); err != nil {
		t.Fatalf("commit of the revoked partition's batch: %v", err)
	}
	got := pollWithin(t, b, 2, handOverBound)
	if len(got) != 1 || !slices.Equal(got[1], []uint64{3, 4}) {
		t.Fatalf("b received %v, want partition 1 offsets [3 4]", got)
	}
	if _, parts := b.Assignment(); !slices.Equal(parts, []uint32{1}) {
		t.Fatalf("b owns %v", parts)
	}
}
