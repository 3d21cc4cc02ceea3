package iggy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

func newConsumer(t testing.TB, c *iggy.Client, cfg iggy.ConsumerConfig) *iggy.Consumer {
	t.Helper()
	cn, err := c.NewConsumer(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	t.Cleanup(func() { _ = cn.Close(context.Background()) })
	return cn
}

// drain polls until want messages arrived and returns partition → offsets.
func drain(t testing.TB, cn *iggy.Consumer, want int) map[uint32][]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[uint32][]uint64{}
	for n := 0; n < want; {
		b, err := cn.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d: %v", n, want, err)
		}
		for _, m := range b.Messages {
			if want := fmt.Sprintf("p%d-%d", b.Partition, m.Offset); string(m.Payload) != want {
				t.Fatalf("partition %d offset %d payload %q, want %q", b.Partition, m.Offset, m.Payload, want)
			}
		}
		got[b.Partition] = append(got[b.Partition], offsetsOf(b.Messages)...)
		n += len(b.Messages)
		b.Release()
	}
	return got
}

// fill sends n messages "p<part>-<offset>" to each partition (which must be empty).
func fill(t testing.TB, c *iggy.Client, parts []uint32, from, n int) {
	t.Helper()
	for _, p := range parts {
		msgs := make([]iggy.Message, n)
		for i := range msgs {
			msgs[i].Payload = fmt.Appendf(nil, "p%d-%d", p, from+i)
		}
		if _, err := c.SendMessages(testCtx(t), sID, tID, wire.ToPartition(p), msgs); err != nil {
			t.Fatal(err)
		}
	}
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestConsumerLocalPositions(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 2)
	fill(t, c, []uint32{0, 1}, 0, 5)
	cfg, log := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 3})
	cn := newConsumer(t, c, cfg)
	log.want(t, "before the first poll")
	got := drain(t, cn, 10)
	if !slices.Equal(got[0], seq(0, 5)) || !slices.Equal(got[1], seq(0, 5)) {
		t.Fatalf("first pass = %v", got)
	}
	log.want(t, "first pass", change(nil, []uint32{0, 1}))
	// Nothing was committed, yet new data continues from the local position: no re-read.
	fill(t, c, []uint32{0, 1}, 5, 2)
	got = drain(t, cn, 4)
	if !slices.Equal(got[0], []uint64{5, 6}) || !slices.Equal(got[1], []uint64{5, 6}) {
		t.Fatalf("second pass = %v", got)
	}
	if _, found, _ := c.GetOffset(testCtx(t), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}, sID, tID, 0); found {
		t.Fatal("an offset was stored without Commit")
	}
	// Commit, Seek (redeliver) and Pause.
	if err := cn.StoreOffset(testCtx(t), 0, 4); err != nil {
		t.Fatal(err)
	}
	cn.Seek(1, 3)
	cn.Pause(0)
	got = drain(t, cn, 4)
	if len(got[0]) != 0 || !slices.Equal(got[1], []uint64{3, 4, 5, 6}) {
		t.Fatalf("after seek and pause = %v", got)
	}
	cn.Resume(0)
	fill(t, c, []uint32{0}, 7, 1)
	got = drain(t, cn, 1)
	if !slices.Equal(got[0], []uint64{7}) {
		t.Fatalf("after resume = %v", got)
	}
	// A second consumer of the group starts from the committed offset (4+1).
	if err := cn.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := cn.Poll(testCtx(t)); !errors.Is(err, iggy.ErrClosed) {
		t.Fatalf("poll after close: %v", err)
	}
	cn2 := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	got = drain(t, cn2, 3+7)
	if !slices.Equal(got[0], []uint64{5, 6, 7}) || !slices.Equal(got[1], seq(0, 7)) {
		t.Fatalf("new member = %v", got)
	}
}

func TestConsumerAutoCommit(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 1)
	fill(t, c, []uint32{0}, 0, 4)
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", AutoCommit: true, BatchSize: 2})
	got := drain(t, cn, 4)
	if !slices.Equal(got[0], seq(0, 4)) {
		t.Fatalf("got %v", got)
	}
	o, found, err := c.GetOffset(testCtx(t), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}, sID, tID, 0)
	if err != nil || !found || o.StoredOffset != 3 {
		t.Fatalf("auto-committed offset = %+v %v %v", o, found, err)
	}
}

func TestConsumersSplitPartitions(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s, iggy.WithHeartbeat(100*time.Millisecond))
	setup(t, c, 4)
	acfg, alog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	a := newConsumer(t, c, acfg)
	if _, parts := a.Assignment(); !slices.Equal(parts, []uint32{0, 1, 2, 3}) {
		t.Fatalf("a alone = %v", parts)
	}
	pollNothing(t, a, "a alone")
	alog.want(t, "a alone", change(nil, []uint32{0, 1, 2, 3}))
	b := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	if _, parts := b.Assignment(); !slices.Equal(parts, []uint32{2, 3}) {
		t.Fatalf("b = %v", parts)
	}
	// A learns of the revocation on its next heartbeat sync, and reports it at its next Poll.
	testkit.WaitFor(t, "a's sync revokes 2 and 3", func() bool {
		_, parts := a.Assignment()
		return slices.Equal(parts, []uint32{0, 1})
	})
	if gen, _ := a.Assignment(); gen != 2 {
		t.Fatalf("a's generation %d after one change, want 2", gen)
	}
	pollNothing(t, a, "a after b joined")
	alog.want(t, "a after b joined", change([]uint32{2, 3}, nil))
	fill(t, c, []uint32{0, 1, 2, 3}, 0, 3)
	ga, gb := drain(t, a, 6), drain(t, b, 6)
	if len(ga) != 2 || len(ga[0]) != 3 || len(ga[1]) != 3 || len(gb) != 2 || len(gb[2]) != 3 || len(gb[3]) != 3 {
		t.Fatalf("a %v b %v", ga, gb)
	}
	// B leaves: A gets everything back.
	if err := b.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a owns all partitions", func() bool {
		_, parts := a.Assignment()
		return len(parts) == 4
	})
}

func TestHeartbeatKeepsSlowMemberAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the server's stale-client check")
	}
	// Members silent for 1.2 × 200ms are evicted; the client heartbeats every 50ms.
	s := servertest.Start(t, servertest.WithHeartbeatInterval(200*time.Millisecond))
	c := dial(t, s, iggy.WithHeartbeat(50*time.Millisecond))
	setup(t, c, 2)
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	fill(t, c, []uint32{0, 1}, 0, 1)
	drain(t, cn, 2)
	// The caller is "busy" for 6 of the server's heartbeat intervals: only the client's own
	// heartbeats keep the member alive, and no event marks "the server checked and kept it",
	// so watch the member's generation (it grows if the membership is lost and rebuilt).
	testkit.Quiet(t, 1200*time.Millisecond, "the slow member's generation", func() bool {
		gen, _ := cn.Assignment()
		return gen == 1
	})
	g, err := c.GetConsumerGroup(testCtx(t), sID, tID, iggy.Name("g"))
	if err != nil || g.MembersCount != 1 || len(g.Members[0].Partitions) != 2 {
		t.Fatalf("group = %+v, %v", g, err)
	}
	gen, _ := cn.Assignment()
	if gen != 1 {
		t.Fatalf("generation %d: membership was lost and rebuilt", gen)
	}
	fill(t, c, []uint32{0, 1}, 1, 1)
	if got := drain(t, cn, 2); !slices.Equal(got[0], []uint64{1}) || !slices.Equal(got[1], []uint64{1}) {
		t.Fatalf("after pause = %v", got)
	}
}
