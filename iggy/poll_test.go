package iggy_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

func TestPollingStrategies(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	ctx := testCtx(t)
	setup(t, c, 1)
	// Two batches appended at different times: offsets 0..4 and 5..9.
	if _, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(0), payloads("a", 5)); err != nil {
		t.Fatal(err)
	}
	// mid is a timestamp strictly between the two batches' (stamped in microseconds).
	now := func() uint64 { return uint64(time.Now().UnixMicro()) }
	sent := now()
	testkit.WaitFor(t, "the clock to pass the first batch", func() bool { return now() > sent })
	mid := now()
	testkit.WaitFor(t, "the clock to pass mid", func() bool { return now() > mid })
	if _, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(0), payloads("b", 5)); err != nil {
		t.Fatal(err)
	}
	poll := func(st wire.PollingStrategy, count uint32, auto bool) []uint64 {
		t.Helper()
		r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: single("c"), Stream: sID, Topic: tID,
			Partition: u32(0), Strategy: st, Count: count, AutoCommit: auto})
		if err != nil {
			t.Fatalf("poll %+v: %v", st, err)
		}
		defer r.Release()
		if r.CurrentOffset != 9 {
			t.Fatalf("current offset %d", r.CurrentOffset)
		}
		return offsetsOf(r.Messages)
	}
	cases := []struct {
		name  string
		st    wire.PollingStrategy
		count uint32
		auto  bool
		want  []uint64
	}{
		{"offset", wire.PollOffset(3), 4, false, []uint64{3, 4, 5, 6}},
		{"offset beyond end", wire.PollOffset(10), 4, false, []uint64{}},
		{"first", wire.PollFirst(), 2, false, []uint64{0, 1}},
		{"last", wire.PollLast(), 3, false, []uint64{7, 8, 9}},
		{"timestamp", wire.PollTimestamp(mid), 100, false, []uint64{5, 6, 7, 8, 9}},
		{"next without stored offset", wire.PollNext(), 2, true, []uint64{0, 1}},
		{"next after auto-commit", wire.PollNext(), 3, true, []uint64{2, 3, 4}},
		{"next again", wire.PollNext(), 100, false, []uint64{5, 6, 7, 8, 9}},
		{"next without auto-commit repeats", wire.PollNext(), 1, false, []uint64{5}},
	}
	for _, tc := range cases {
		if got := poll(tc.st, tc.count, tc.auto); !slices.Equal(got, tc.want) {
			t.Errorf("%s: offsets %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestConsumerOffsets(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	ctx := testCtx(t)
	setup(t, c, 2)
	if _, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(1), payloads("a", 10)); err != nil {
		t.Fatal(err)
	}
	cons := single("reader")
	if _, found, err := c.GetOffset(ctx, cons, sID, tID, 1); err != nil || found {
		t.Fatalf("initial offset: found %v, %v", found, err)
	}
	if err := c.StoreOffset(ctx, cons, sID, tID, 1, 6); err != nil {
		t.Fatal(err)
	}
	got, found, err := c.GetOffset(ctx, cons, sID, tID, 1)
	if err != nil || !found || got != (iggy.ConsumerOffset{PartitionID: 1, CurrentOffset: 9, StoredOffset: 6}) {
		t.Fatalf("offset = %+v %v %v", got, found, err)
	}
	// Next continues after the stored offset.
	r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: cons, Stream: sID, Topic: tID, Partition: u32(1), Strategy: wire.PollNext(), Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := offsetsOf(r.Messages); !slices.Equal(got, []uint64{7, 8, 9}) {
		t.Fatalf("next after store = %v", got)
	}
	r.Release()
	// Stored offsets may move backwards; beyond the end is refused.
	if err := c.StoreOffset(ctx, cons, sID, tID, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.StoreOffset(ctx, cons, sID, tID, 1, 10); !errors.Is(err, wire.ErrInvalidOffset) {
		t.Fatalf("store beyond end: %v", err)
	}
	if err := c.StoreOffset(ctx, cons, sID, tID, 0, 0); !errors.Is(err, wire.ErrInvalidOffset) {
		t.Fatalf("store on empty partition: %v", err)
	}
	if err := c.DeleteOffset(ctx, cons, sID, tID, 1); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.GetOffset(ctx, cons, sID, tID, 1); err != nil || found {
		t.Fatalf("after delete: found %v, %v", found, err)
	}
	if err := c.DeleteOffset(ctx, cons, sID, tID, 1); !errors.Is(err, wire.ErrConsumerOffsetNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	// A numeric consumer id is a different consumer.
	if _, found, _ := c.GetOffset(ctx, wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)}, sID, tID, 1); found {
		t.Fatal("numeric consumer sees an offset")
	}
}

func TestConsumerGroupJoinLeave(t *testing.T) {
	s := servertest.Start(t)
	a := dial(t, s)
	b := dial(t, s)
	ctx := testCtx(t)
	setup(t, a, 4)
	g, err := a.CreateConsumerGroup(ctx, sID, tID, "g")
	if err != nil || g.ID != 0 || g.Name != "g" || g.MembersCount != 0 {
		t.Fatalf("create group = %+v, %v", g, err)
	}
	if _, err := a.CreateConsumerGroup(ctx, sID, tID, "g"); !errors.Is(err, wire.ErrConsumerGroupNameAlreadyExists) {
		t.Fatalf("duplicate group: %v", err)
	}
	gid := iggy.Name("g")
	if err := a.JoinConsumerGroup(ctx, sID, tID, gid); err != nil {
		t.Fatal(err)
	}
	sa, err := a.SyncConsumerGroup(ctx, sID, tID, gid)
	if err != nil || !slices.Equal(sa.Partitions, []uint32{0, 1, 2, 3}) {
		t.Fatalf("first member = %+v, %v", sa, err)
	}
	if err := b.JoinConsumerGroup(ctx, sID, tID, gid); err != nil {
		t.Fatal(err)
	}
	sa, _ = a.SyncConsumerGroup(ctx, sID, tID, gid)
	sb, _ := b.SyncConsumerGroup(ctx, sID, tID, gid)
	// Cooperative join: A keeps [0,1], B gets [3,2].
	if !slices.Equal(sa.Partitions, []uint32{0, 1}) || !slices.Equal(sb.Partitions, []uint32{3, 2}) {
		t.Fatalf("after join: a %v b %v", sa.Partitions, sb.Partitions)
	}
	if sb.Generation <= 1 || sa.Generation != sb.Generation {
		t.Fatalf("generations a %d b %d", sa.Generation, sb.Generation)
	}
	det, err := a.GetConsumerGroup(ctx, sID, tID, gid)
	if err != nil || det.MembersCount != 2 || len(det.Members) != 2 {
		t.Fatalf("group details = %+v, %v", det, err)
	}
	// A group poll of an owned partition works; of a foreign one it gets the sentinel.
	if _, err := a.SendMessages(ctx, sID, tID, wire.ToPartition(2), payloads("x", 2)); err != nil {
		t.Fatal(err)
	}
	group := wire.Consumer{Kind: wire.ConsumerGroup, ID: gid}
	r, err := b.PollMessages(ctx, iggy.PollRequest{Consumer: group, Stream: sID, Topic: tID, Partition: u32(2), Strategy: wire.PollNext(), Count: 10, AutoCommit: true})
	if err != nil || r.PartitionID != 2 || len(r.Messages) != 2 {
		t.Fatalf("member poll = %+v, %v", r, err)
	}
	r.Release()
	r, err = a.PollMessages(ctx, iggy.PollRequest{Consumer: group, Stream: sID, Topic: tID, Partition: u32(2), Strategy: wire.PollNext(), Count: 10})
	if err != nil || r.PartitionID != wire.ResyncPartition || len(r.Messages) != 0 {
		t.Fatalf("foreign poll = %+v, %v", r, err)
	}
	r.Release()
	if o, found, err := a.GetOffset(ctx, group, sID, tID, 2); err != nil || !found || o.StoredOffset != 1 {
		t.Fatalf("group offset = %+v %v %v", o, found, err)
	}
	if err := b.LeaveConsumerGroup(ctx, sID, tID, gid); err != nil {
		t.Fatal(err)
	}
	if err := b.LeaveConsumerGroup(ctx, sID, tID, gid); !errors.Is(err, wire.ErrConsumerGroupMemberNotFound) {
		t.Fatalf("leave twice: %v", err)
	}
	if _, err := b.SyncConsumerGroup(ctx, sID, tID, gid); !errors.Is(err, wire.ErrConsumerGroupMemberNotFound) {
		t.Fatalf("sync after leave: %v", err)
	}
	sa, _ = a.SyncConsumerGroup(ctx, sID, tID, gid)
	if !slices.Equal(sa.Partitions, []uint32{0, 1, 2, 3}) {
		t.Fatalf("after leave a = %v", sa.Partitions)
	}
	if err := a.DeleteConsumerGroup(ctx, sID, tID, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetConsumerGroup(ctx, sID, tID, gid); !errors.Is(err, wire.ErrConsumerGroupIDNotFound) {
		t.Fatalf("deleted group: %v", err)
	}
}
