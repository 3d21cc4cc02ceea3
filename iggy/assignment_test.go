package iggy_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

// replay applies reported changes, in order, to the set of partitions the caller thinks
// it owns.
func replay(owned map[uint32]bool, chs []iggy.AssignmentChange) {
	for _, ch := range chs {
		for _, p := range ch.Revoked {
			delete(owned, p)
		}
		for _, p := range ch.Assigned {
			owned[p] = true
		}
	}
}

func sortedKeys(m map[uint32]bool) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestAssignmentChangesNeverDropped is the regression test of "rebalance events can be
// lost": assignment changes went to a 256-slot channel and were dropped when it was
// full, so a member that did not read them while 400 joins and leaves happened got 256
// of 800 events and, replaying them, believed it owned partitions 0-7 when it owned
// 0-15. Now changes are reported in band by Poll. Member A (syncing every 20 ms in the
// background) does not poll while 200 other members join and leave a 16-partition
// group (400 changes of membership); then A polls once. Replaying what A was told gives
// exactly the partitions the server says A owns (all 16), and no partition is reported
// twice in one change list.
func TestAssignmentChangesNeverDropped(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s, iggy.WithHeartbeat(20*time.Millisecond))
	setup(t, c, 16)
	acfg, alog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	a := newConsumer(t, c, acfg)
	pollNothing(t, a, "a alone")
	owned := map[uint32]bool{}
	replay(owned, alog.take())
	if got := sortedKeys(owned); len(got) != 16 {
		t.Fatalf("a alone was told it owns %v", got)
	}
	other := dial(t, s)
	syncs := 0
	for i := range 200 {
		if i%20 == 0 {
			testkit.WaitFor(t, "a's background sync sees all 16", func() bool { _, p := a.Assignment(); return len(p) == 16 })
		}
		b, err := other.NewConsumer(testCtx(t), iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		if i%20 == 0 { // let A's background sync see some of the intermediate states
			testkit.WaitFor(t, "a's background sync sees the split", func() bool { _, p := a.Assignment(); return len(p) == 8 })
			syncs++
		}
		if err := b.Close(testCtx(t)); err != nil {
			t.Fatalf("member %d leaves: %v", i, err)
		}
	}
	testkit.WaitFor(t, "a owns all 16 again", func() bool { _, parts := a.Assignment(); return len(parts) == 16 })
	if gen, _ := a.Assignment(); gen < uint64(1+2*syncs) {
		t.Fatalf("a's generation %d: its syncs saw fewer than %d changes, the test proves nothing", gen, 2*syncs)
	}
	pollNothing(t, a, "a after the storm")
	chs := alog.take()
	for _, ch := range chs {
		if len(slices.Compact(slices.Clone(ch.Revoked))) != len(ch.Revoked) || len(slices.Compact(slices.Clone(ch.Assigned))) != len(ch.Assigned) {
			t.Fatalf("a change lists a partition twice: %+v", ch)
		}
	}
	replay(owned, chs)
	g, err := c.GetConsumerGroup(testCtx(t), sID, tID, iggy.Name("g"))
	if err != nil || len(g.Members) != 1 {
		t.Fatalf("group %+v, %v", g, err)
	}
	server := slices.Sorted(slices.Values(g.Members[0].Partitions))
	if got := sortedKeys(owned); !slices.Equal(got, server) || len(got) != 16 {
		t.Fatalf("replaying %d reported changes gives %v; the server says a owns %v", len(chs), got, server)
	}
	if _, parts := a.Assignment(); !slices.Equal(parts, server) {
		t.Fatalf("a's assignment %v, server %v", parts, server)
	}
}

// TestPartitionLostAndRegained: member A stores offset 9 of partitions 0 and 1, then
// (without polling) loses 1 to B, which polls 10..14 and stores 14, and gets it back when
// B leaves. Whether or not A's syncs saw B own it, A's next Poll reports partition 1
// revoked and assigned (its earlier assignment is void), A polls on from 15, not from its
// old local position 10, and refuses to store 12 (ErrOffsetBehind, nothing sent: the
// group's offset stays 14).
func TestPartitionLostAndRegained(t *testing.T) {
	for _, tc := range []struct {
		name string
		seen bool
		opts []iggy.Opt
	}{
		// A syncs only once, after B left: it finds partition 1 kept but stored under it.
		{"unseen", false, []iggy.Opt{iggy.WithHeartbeat(time.Hour), iggy.WithAssignmentSync(time.Hour)}},
		// A syncs every 10 ms in the background and sees B own the partition.
		{"seen", true, []iggy.Opt{iggy.WithHeartbeat(10 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := servertest.Start(t)
			ca := dial(t, s, tc.opts...)
			cb := dial(t, s)
			setup(t, ca, 2)
			fill(t, ca, []uint32{0, 1}, 0, 10)
			acfg, alog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 100})
			a := newConsumer(t, ca, acfg)
			if got := drain(t, a, 20); !slices.Equal(got[1], seq(0, 10)) {
				t.Fatalf("a polled %v", got)
			}
			alog.want(t, "a's first polls", change(nil, []uint32{0, 1}))
			for _, p := range []uint32{0, 1} {
				if err := a.StoreOffset(testCtx(t), p, 9); err != nil {
					t.Fatal(err)
				}
			}
			// Cooperative join: A keeps 0, B takes 1 at once (nothing in flight).
			b := newConsumer(t, cb, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 100})
			if _, parts := b.Assignment(); !slices.Equal(parts, []uint32{1}) {
				t.Fatalf("b owns %v, want [1]", parts)
			}
			if tc.seen {
				testkit.WaitFor(t, "a's sync sees b own partition 1", func() bool { _, p := a.Assignment(); return slices.Equal(p, []uint32{0}) })
			}
			fill(t, ca, []uint32{1}, 10, 5)
			if got := drain(t, b, 5); !slices.Equal(got[1], seq(10, 15)) {
				t.Fatalf("b polled %v", got)
			}
			if err := b.StoreOffset(testCtx(t), 1, 14); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(testCtx(t)); err != nil { // full rebalance: A gets 1 back
				t.Fatal(err)
			}
			if tc.seen {
				testkit.WaitFor(t, "a's sync sees partition 1 back", func() bool { _, p := a.Assignment(); return slices.Equal(p, []uint32{0, 1}) })
			} else {
				if _, p := a.Assignment(); !slices.Equal(p, []uint32{0, 1}) {
					t.Fatalf("a synced by itself (owns %v) although its sync interval is 1h", p)
				}
				if err := a.Resync(testCtx(t)); err != nil {
					t.Fatal(err)
				}
			}
			alog.want(t, "a did not poll meanwhile")
			fill(t, ca, []uint32{1}, 15, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			batch, err := a.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, gotPart := offsetsOf(batch.Messages), batch.Partition
			batch.Release()
			if gotPart != 1 || !slices.Equal(got, []uint64{15}) {
				t.Fatalf("a polled partition %d %v after regaining partition 1, want 1 [15] (from the group's stored offset)", gotPart, got)
			}
			chs := alog.take()
			var revoked, assigned []uint32
			for _, ch := range chs {
				revoked, assigned = append(revoked, ch.Revoked...), append(assigned, ch.Assigned...)
			}
			if !slices.Equal(revoked, []uint32{1}) || !slices.Equal(assigned, []uint32{1}) {
				t.Fatalf("a was told %+v, want partition 1 revoked and assigned again", chs)
			}
			if err := a.StoreOffset(testCtx(t), 1, 12); !errors.Is(err, iggy.ErrOffsetBehind) {
				t.Fatalf("a stores 12 below the group's 14: %v, want ErrOffsetBehind", err)
			}
			o, found, err := ca.GetOffset(testCtx(t), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}, sID, tID, 1)
			if err != nil || !found || o.StoredOffset != 14 {
				t.Fatalf("group offset %+v found %t err %v, want 14", o, found, err)
			}
			if err := a.StoreOffset(testCtx(t), 1, 15); err != nil {
				t.Fatalf("a stores 15: %v", err)
			}
		})
	}
}

// TestStoreRefusedDropsPartition: a store the server refuses because the member does
// not own the partition (ResourceNotFound) makes the Consumer drop it at once: its next
// Poll reports it revoked. A never syncs by itself here (sync interval 1 h), so when B
// joins and takes one of A's two partitions, A still believes it owns both until its
// store of B's partition is refused.
func TestStoreRefusedDropsPartition(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s, iggy.WithHeartbeat(time.Hour), iggy.WithAssignmentSync(time.Hour))
	setup(t, c, 2)
	acfg, alog := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	a := newConsumer(t, c, acfg)
	pollNothing(t, a, "a alone")
	alog.want(t, "a alone", change(nil, []uint32{0, 1}))
	b := newConsumer(t, dial(t, s), iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	_, bparts := b.Assignment()
	if len(bparts) != 1 {
		t.Fatalf("b owns %v, want one partition", bparts)
	}
	foreign, kept := bparts[0], 1-bparts[0]
	if _, parts := a.Assignment(); len(parts) != 2 {
		t.Fatalf("a synced by itself (%v) although its sync interval is 1h", parts)
	}
	err := a.StoreOffset(testCtx(t), foreign, 0)
	if !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("store of b's partition: %v, want ResourceNotFound", err)
	}
	if _, parts := a.Assignment(); !slices.Equal(parts, []uint32{kept}) {
		t.Fatalf("a owns %v after the refusal, want [%d]", parts, kept)
	}
	pollNothing(t, a, "a")
	alog.want(t, "a after the refusal", change([]uint32{foreign}, nil))
	if _, parts := a.Assignment(); !slices.Equal(parts, []uint32{kept}) {
		t.Fatalf("a owns %v after its resync, want [%d]", parts, kept)
	}
}
