package iggy_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
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

// nextEvent returns the next assignment event within d.
func nextEvent(t testing.TB, cn *iggy.Consumer, d time.Duration) iggy.AssignmentEvent {
	t.Helper()
	select {
	case ev, ok := <-cn.Events():
		if !ok {
			t.Fatal("events closed")
		}
		return ev
	case <-time.After(d):
		t.Fatalf("no assignment event within %v", d)
	}
	return iggy.AssignmentEvent{}
}

func wantEvent(t testing.TB, ev iggy.AssignmentEvent, gen uint64, assigned, revoked []uint32) {
	t.Helper()
	if ev.Generation != gen || !slices.Equal(ev.Assigned, assigned) || !slices.Equal(ev.Revoked, revoked) {
		t.Fatalf("event %+v, want generation %d assigned %v revoked %v", ev, gen, assigned, revoked)
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
	a := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	wantEvent(t, nextEvent(t, a, time.Second), 1, all, nil)
	got := drain(t, a, 12)
	for _, p := range all {
		if !slices.Equal(got[p], seq(0, 3)) {
			t.Fatalf("a polled %v", got)
		}
	}

	b := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	if _, parts := b.Assignment(); len(parts) != 0 {
		t.Fatalf("b owns %v while a's partitions are pending revocation", parts)
	}
	wantEvent(t, nextEvent(t, b, time.Second), 1, nil, nil)
	waitFor(t, handOverBound, "a's assignment sync revokes 2 and 3", func() bool {
		_, parts := a.Assignment()
		return slices.Equal(parts, []uint32{0, 1})
	})
	// A's last batch was of partition 3: the event waits for A's next Poll.
	select {
	case ev := <-a.Events():
		t.Fatalf("event %+v before a polled again", ev)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := a.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a poll with nothing new: %v", err)
	}
	cancel()
	wantEvent(t, nextEvent(t, a, time.Second), 2, nil, []uint32{2, 3})

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
	time.Sleep(300 * time.Millisecond)
	if _, parts := b.Assignment(); len(parts) != 0 {
		t.Fatalf("b owns %v before a committed", parts)
	}
	for _, p := range []uint32{2, 3} {
		if err := a.Commit(testCtx(t), p, 2); err != nil {
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
	ev := nextEvent(t, b, time.Second)
	if ev.Generation != 2 || len(ev.Revoked) != 0 || !slices.Equal(ev.Assigned, []uint32{2, 3}) {
		// The two hand-overs may be seen by one sync or two.
		ev2 := nextEvent(t, b, time.Second)
		if ev.Generation != 2 || ev2.Generation != 3 || len(ev.Assigned)+len(ev2.Assigned) != 2 ||
			!slices.Equal(slices.Sorted(slices.Values(append(slices.Clone(ev.Assigned), ev2.Assigned...))), []uint32{2, 3}) {
			t.Fatalf("b events %+v %+v, want partitions 2 and 3 assigned", ev, ev2)
		}
	}
	if _, parts := a.Assignment(); !slices.Equal(parts, []uint32{0, 1}) {
		t.Fatalf("a owns %v", parts)
	}
}

// TestConsumerRevokedWhileReplyInFlight: B joins after the server answered A's poll of
// partition 1 but before A handled the reply (a hook between the two), so the server
// counts the batch as polled by the group and keeps partition 1 pending revocation with
// A. A still returns the batch (offsets 0..2, the generation it was polled under), and
// reports the revocation only once it polls again; when A commits the batch, B gets
// partition 1 and its new data within handOverBound — not after the 30 s rebalancing
// timeout it would take had A thrown the batch away.
func TestConsumerRevokedWhileReplyInFlight(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 2)
	fill(t, c, []uint32{1}, 0, 3)
	a := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	wantEvent(t, nextEvent(t, a, time.Second), 1, []uint32{0, 1}, nil)
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
	if batch.Partition != 1 || batch.Generation != 1 || !slices.Equal(offsetsOf(batch.Messages), seq(0, 3)) {
		t.Fatalf("batch partition %d generation %d offsets %v, want 1, 1, [0 1 2]", batch.Partition, batch.Generation, offsetsOf(batch.Messages))
	}
	batch.Release()
	if _, parts := b.Assignment(); len(parts) != 0 {
		t.Fatalf("b owns %v while partition 1 is pending revocation", parts)
	}
	waitFor(t, handOverBound, "a's assignment sync revokes 1", func() bool {
		_, parts := a.Assignment()
		return slices.Equal(parts, []uint32{0})
	})
	select {
	case ev := <-a.Events():
		t.Fatalf("event %+v before a polled again", ev)
	default:
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := a.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a poll with nothing to poll: %v", err)
	}
	cancel()
	wantEvent(t, nextEvent(t, a, time.Second), 2, nil, []uint32{1})

	fill(t, c, []uint32{1}, 3, 2)
	if err := a.Commit(testCtx(t), 1, 2); err != nil {
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
