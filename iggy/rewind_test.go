package iggy_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

// TestConsumerPurgedPartition is the regression test of "a purged topic is skipped": a
// member caught up on offsets 0..99 of each partition (all stored) kept polling from 100
// after PurgeTopic, so of 110 new messages sent before its next poll it delivered only
// 100..109, and of 50 it delivered nothing. Now its next poll finds offset 99 holding
// another message (partition 0: 110 new ones) or nothing (partition 1: 50, current offset
// 49), reports both rewound, revoked and assigned again, and delivers exactly 0..109 and
// 0..49; an offset of the old assignment is refused unsent (ErrPartitionRewound) and the
// group's offsets are only what the member stored since.
func TestConsumerPurgedPartition(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 2)
	fill(t, c, []uint32{0, 1}, 0, 100)
	var mu sync.Mutex
	var changes []iggy.AssignmentChange
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 30,
		OnAssignmentChange: func(ch iggy.AssignmentChange) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, ch)
		}})
	got := drain(t, cn, 200)
	if !slices.Equal(got[0], seq(0, 100)) || !slices.Equal(got[1], seq(0, 100)) {
		t.Fatalf("before the purge: %v", got)
	}
	for _, p := range []uint32{0, 1} {
		if err := cn.StoreOffsetIn(testCtx(t), 0, p, 99); err != nil {
			t.Fatalf("store partition %d: %v", p, err)
		}
	}
	if err := c.PurgeTopic(testCtx(t), sID, tID); err != nil {
		t.Fatal(err)
	}
	fill(t, c, []uint32{0}, 0, 110)
	fill(t, c, []uint32{1}, 0, 50)
	got = drain(t, cn, 160)
	if !slices.Equal(got[0], seq(0, 110)) || !slices.Equal(got[1], seq(0, 50)) {
		t.Fatalf("after the purge delivered %v; want 0..109 and 0..49", got)
	}
	mu.Lock()
	var rewound []iggy.PartitionRewind
	var last iggy.AssignmentChange
	for _, ch := range changes {
		rewound = append(rewound, ch.Rewound...)
		if len(ch.Rewound) > 0 {
			last = ch
			if !slices.Equal(ch.Revoked, ch.Assigned) || len(ch.Revoked) != len(ch.Rewound) {
				t.Errorf("change %+v: a rewound partition must be revoked and assigned", ch)
			}
		}
	}
	mu.Unlock()
	slices.SortFunc(rewound, func(a, b iggy.PartitionRewind) int { return int(a.Partition) - int(b.Partition) })
	want := []iggy.PartitionRewind{
		{Partition: 0, Position: 100, Current: 109},
		{Partition: 1, Position: 100, Current: 49, Reason: "its current offset 49 is below offset 99, already delivered"},
	}
	if len(rewound) != 2 || rewound[0].Partition != 0 || rewound[0].Position != 100 || rewound[0].Current != 109 ||
		rewound[1] != want[1] {
		t.Fatalf("rewinds %+v; want %+v (partition 0 for another message at 99)", rewound, want)
	}
	if err := cn.StoreOffsetIn(testCtx(t), 0, 0, 99); !errors.Is(err, iggy.ErrPartitionRewound) {
		t.Fatalf("store of the purged messages' offset: %v; want ErrPartitionRewound", err)
	}
	g := wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}
	for _, p := range []uint32{0, 1} {
		if o, found, err := c.GetOffset(testCtx(t), g, sID, tID, p); err != nil || found {
			t.Fatalf("partition %d's stored offset after the purge = %+v found %v, %v; want none", p, o, found, err)
		}
	}
	if err := cn.StoreOffsetIn(testCtx(t), last.Incarnation, 0, 109); err != nil {
		t.Fatalf("store of a new offset: %v", err)
	}
	if o, found, err := c.GetOffset(testCtx(t), g, sID, tID, 0); err != nil || !found || o.StoredOffset != 109 {
		t.Fatalf("stored offset = %+v found %v, %v; want 109", o, found, err)
	}
	if err := cn.StoreOffsetIn(testCtx(t), last.Incarnation, 1, 49); err != nil {
		t.Fatalf("store of partition 1's new offset: %v", err)
	}
}

// TestConsumerCheckedSeek: a caller that keeps positions elsewhere seeks with the
// timestamp of the message before the position. The right timestamp resumes there
// (nothing redelivered, nothing reported); a wrong one (the partition was purged and
// refilled while the caller was away) is found rewound and delivered from 0.
func TestConsumerCheckedSeek(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 1)
	fill(t, c, []uint32{0}, 0, 20)
	probe := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "probe", BatchSize: 20})
	b, err := probe.Poll(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ts9 := b.Messages[9].Timestamp
	b.Release()

	var mu sync.Mutex
	var rewinds []iggy.PartitionRewind
	seekTS := ts9
	var cn *iggy.Consumer
	cn = newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 50,
		OnAssignmentChange: func(ch iggy.AssignmentChange) {
			mu.Lock()
			defer mu.Unlock()
			rewinds = append(rewinds, ch.Rewound...)
			if len(ch.Rewound) == 0 && slices.Contains(ch.Assigned, 0) {
				cn.SeekChecked(0, 10, seekTS)
			}
		}})
	if got := drain(t, cn, 10); !slices.Equal(got[0], seq(10, 20)) {
		t.Fatalf("checked seek to 10 delivered %v; want 10..19", got[0])
	}
	mu.Lock()
	if len(rewinds) != 0 {
		t.Fatalf("rewinds %+v; want none", rewinds)
	}
	mu.Unlock()

	if err := c.PurgeTopic(testCtx(t), sID, tID); err != nil {
		t.Fatal(err)
	}
	fill(t, c, []uint32{0}, 0, 30)
	var cn4 *iggy.Consumer
	cn4 = newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g4", BatchSize: 50,
		OnAssignmentChange: func(ch iggy.AssignmentChange) {
			mu.Lock()
			defer mu.Unlock()
			rewinds = append(rewinds, ch.Rewound...)
			if len(ch.Rewound) == 0 && slices.Contains(ch.Assigned, 0) {
				cn4.SeekChecked(0, 10, ts9) // the old message 9's timestamp
			}
		}})
	if got := drain(t, cn4, 30); !slices.Equal(got[0], seq(0, 30)) {
		t.Fatalf("checked seek past a purge delivered %v; want 0..29", got[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rewinds) != 1 || rewinds[0].Position != 10 || rewinds[0].Current != 29 {
		t.Fatalf("rewinds %+v; want partition 0 at 10, current offset 29", rewinds)
	}
}

// TestConsumerPurgedIdlePartition: the same purge on partitions the member found idle
// (an empty poll since their last batch), whose polls start at the position without the
// overlap message. Partition 0 gets 110 new messages: the poll that brings 100..109 is
// checked against offset 99 before it is handed out. Partition 1 gets 50: the empty
// reply's current offset 49 is below 99. Partition 2 gets exactly 100, so its polls from
// 100 stay empty with the old current offset 99: the idle poll that carries the overlap
// (once a second) finds another message at 99. Each is delivered from 0, nothing else.
func TestConsumerPurgedIdlePartition(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 3)
	fill(t, c, []uint32{0, 1, 2}, 0, 100)
	var mu sync.Mutex
	var rewound []iggy.PartitionRewind
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 100,
		OnAssignmentChange: func(ch iggy.AssignmentChange) {
			mu.Lock()
			defer mu.Unlock()
			rewound = append(rewound, ch.Rewound...)
		}})
	got := drain(t, cn, 300)
	for p := range uint32(3) {
		if !slices.Equal(got[p], seq(0, 100)) {
			t.Fatalf("before the purge partition %d: %v", p, got[p])
		}
	}
	testkit.WaitFor(t, "every partition polled empty", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if b, err := cn.Poll(ctx); err == nil {
			t.Fatalf("polled %d messages of partition %d with nothing new", len(b.Messages), b.Partition)
		}
		return iggy.Idle(cn)
	})
	if err := c.PurgeTopic(testCtx(t), sID, tID); err != nil {
		t.Fatal(err)
	}
	fill(t, c, []uint32{0}, 0, 110)
	fill(t, c, []uint32{1}, 0, 50)
	fill(t, c, []uint32{2}, 0, 100)
	got = drain(t, cn, 260)
	if !slices.Equal(got[0], seq(0, 110)) || !slices.Equal(got[1], seq(0, 50)) || !slices.Equal(got[2], seq(0, 100)) {
		t.Fatalf("after the purge delivered %v; want 0..109, 0..49, 0..99", got)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(rewound, func(a, b iggy.PartitionRewind) int { return int(a.Partition) - int(b.Partition) })
	// Each partition is found by the path described above, or, when a poll of the idle
	// loop above was still in flight at the purge (its context ended before the reply
	// came), by that empty reply's current offset 0: which comes first is the scheduler's
	// choice, both are the rule.
	for i, want := range []uint64{109, 49, 99} {
		if len(rewound) != 3 || rewound[i].Partition != uint32(i) || (rewound[i].Current != want && rewound[i].Current != 0) {
			t.Fatalf("rewinds %+v; want partitions 0, 1, 2 at current offsets 109, 49, 99 (or 0)", rewound)
		}
	}
	for _, r := range rewound {
		if r.Position != 100 {
			t.Fatalf("rewind %+v; want position 100", r)
		}
	}
}
