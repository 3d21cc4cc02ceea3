package server_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

func groupOf(name string) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerGroup, ID: wire.NamedID(name)}
}

func (c *tclient) sync(st, tp wire.Identifier, g string) (wire.SyncAssignment, bool) {
	c.t.Helper()
	a, found, err := wire.DecodeSyncAssignment(c.must(wire.SyncConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID(g)}))
	if err != nil {
		c.t.Fatal(err)
	}
	return a, found
}

func members(t *testing.T, c *tclient, st, tp wire.Identifier, g string) map[uint32][]uint32 {
	t.Helper()
	d, found, err := wire.DecodeGroupDetails(c.must(wire.GetConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID(g)}))
	if err != nil || !found {
		t.Fatalf("group %s: %v %v", g, found, err)
	}
	out := map[uint32][]uint32{}
	for _, m := range d.Members {
		out[m.ID] = m.Partitions
	}
	return out
}

func TestConsumerGroupAssignments(t *testing.T) {
	s := servertest.Start(t)
	a := login(t, s)
	st, tp := setup(t, a, 4)
	gd, _, err := wire.DecodeGroupDetails(a.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"}))
	if err != nil || gd.ID != 0 || gd.PartitionsCount != 4 || gd.MembersCount != 0 {
		t.Fatalf("create group %+v %v", gd, err)
	}
	a.wantErr(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"}, wire.ErrConsumerGroupNameAlreadyExists)
	a.wantErr(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("nope")}, wire.ErrConsumerGroupIDNotFound)
	a.wantErr(wire.JoinConsumerGroupRequest{Stream: st, Topic: wire.NamedID("nope"), Group: wire.NamedID("g")}, wire.ErrTopicIDNotFound)
	if _, found := a.sync(st, tp, "g"); found {
		t.Fatal("sync before join found an assignment")
	}
	a.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	a.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NumericID(0)}) // no-op
	sa, _ := a.sync(st, tp, "g")
	if !reflect.DeepEqual(sa.Partitions, []uint32{0, 1, 2, 3}) || sa.Generation != 1 {
		t.Fatalf("A alone: %+v", sa)
	}
	b := login(t, s)
	b.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	sa, _ = a.sync(st, tp, "g")
	sb, _ := b.sync(st, tp, "g")
	if !reflect.DeepEqual(sa.Partitions, []uint32{0, 1}) || !reflect.DeepEqual(sb.Partitions, []uint32{3, 2}) || sb.Generation != 2 {
		t.Fatalf("cooperative join: A %+v B %+v, want A [0 1] B [3 2]", sa, sb)
	}
	if got := members(t, a, st, tp, "g"); !reflect.DeepEqual(got, map[uint32][]uint32{0: {0, 1}, 1: {3, 2}}) {
		t.Fatalf("group details %v", got)
	}
	groups, _ := wire.DecodeGroups(a.must(wire.GetConsumerGroupsRequest{Stream: st, Topic: tp}))
	if len(groups) != 1 || groups[0].MembersCount != 2 || groups[0].Name != "g" {
		t.Fatalf("groups %+v", groups)
	}
	me, _ := wire.DecodeClientDetails(b.must(wire.GetMeRequest{}))
	if !reflect.DeepEqual(me.ConsumerGroups, []wire.ClientGroup{{StreamID: 0, TopicID: 0, GroupID: 0}}) {
		t.Fatalf("GetMe groups %+v", me.ConsumerGroups)
	}

	// Group polls: owned partition works and auto-commits the group's offset; others get
	// the re-sync sentinel; no partition flag is an empty poll for partition 0.
	a.send(st, tp, wire.ToPartition(3), "p3a", "p3b")
	a.send(st, tp, wire.ToPartition(0), "p0")
	got := b.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(3), Strategy: wire.PollNext(), Count: 10, AutoCommit: true})
	if !reflect.DeepEqual(got.offsets, []uint64{0, 1}) {
		t.Fatalf("B polls 3: %+v", got)
	}
	if got := b.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(3), Strategy: wire.PollNext(), Count: 10}); len(got.offsets) != 0 {
		t.Fatalf("group next after auto-commit: %v", got.offsets)
	}
	if got := b.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollNext(), Count: 10}); got.head.PartitionID != wire.ResyncPartition {
		t.Fatalf("B polls A's partition: %+v", got.head)
	}
	if got := b.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Strategy: wire.PollNext(), Count: 10}); got.head.PartitionID != 0 || len(got.offsets) != 0 {
		t.Fatalf("group poll without partition: %+v", got.head)
	}
	if got := b.poll(wire.PollMessagesRequest{Consumer: groupOf("zz"), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollNext(), Count: 10}); got.head.PartitionID != wire.ResyncPartition {
		t.Fatalf("missing group poll: %+v", got.head)
	}
	// Group offsets need ownership to store; anyone may read them.
	a.wantErr(wire.StoreConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(3), Offset: 0}, wire.ErrResourceNotFound)
	a.must(wire.StoreConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: 0})
	info, found, _ := wire.DecodeConsumerOffsetInfo(a.must(wire.GetConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(3)}))
	if !found || info.StoredOffset != 1 {
		t.Fatalf("group offset on 3: %+v %v", info, found)
	}

	// A third member (fair 1, rem 1): A keeps 2 partitions (it uses the remainder), B's
	// last partition is surplus.
	c := login(t, s)
	c.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	if got := members(t, a, st, tp, "g"); !reflect.DeepEqual(got, map[uint32][]uint32{0: {0, 1}, 1: {3}, 2: {2}}) {
		t.Fatalf("third member: %v", got)
	}
	// Leave → full rebalance in member-id order; leaving twice → 5006.
	b.must(wire.LeaveConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	b.wantErr(wire.LeaveConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")}, wire.ErrConsumerGroupMemberNotFound)
	if got := members(t, a, st, tp, "g"); !reflect.DeepEqual(got, map[uint32][]uint32{0: {0, 2}, 2: {1, 3}}) {
		t.Fatalf("after leave: %v", got)
	}
	// A new member takes the lowest free id (1).
	b.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	if got := members(t, a, st, tp, "g"); len(got[1]) != 1 {
		t.Fatalf("rejoin: %v", got)
	}
	// Disconnect → full rebalance.
	_ = c.nc.Close()
	testkit.WaitFor(t, "disconnected member removed", func() bool { return len(members(t, a, st, tp, "g")) == 2 })
	if got := members(t, a, st, tp, "g"); !reflect.DeepEqual(got, map[uint32][]uint32{0: {0, 2}, 1: {1, 3}}) {
		t.Fatalf("after disconnect: %v", got)
	}
	// New partitions trigger a full rebalance.
	a.must(wire.CreatePartitionsRequest{Stream: st, Topic: tp, PartitionsCount: 1})
	if got := members(t, a, st, tp, "g"); !reflect.DeepEqual(got, map[uint32][]uint32{0: {0, 2, 4}, 1: {1, 3}}) {
		t.Fatalf("after create partitions: %v", got)
	}
	// Delete group.
	a.must(wire.DeleteConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	a.wantErr(wire.DeleteConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")}, wire.ErrConsumerGroupIDNotFound)
	if p := a.must(wire.GetConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")}); len(p) != 0 {
		t.Fatal("deleted group still found")
	}
	a.wantErr(wire.GetConsumerGroupsRequest{Stream: wire.NamedID("x"), Topic: tp}, wire.ErrStreamIDNotFound)
	a.wantErr(wire.GetConsumerGroupRequest{Stream: st, Topic: wire.NamedID("x"), Group: wire.NamedID("g")}, wire.ErrTopicIDNotFound)
	// Group ids are never reused.
	gd, _, _ = wire.DecodeGroupDetails(a.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"}))
	if gd.ID != 1 {
		t.Fatalf("recreated group id %d, want 1", gd.ID)
	}
}

// TestPendingRevocation: a surplus partition the group polled past its committed offset
// stays with its owner (for commits, not polls) until the owner commits what it polled.
func TestPendingRevocation(t *testing.T) {
	s := servertest.Start(t, servertest.WithRebalancingTimeout(time.Hour))
	a := login(t, s)
	st, tp := setup(t, a, 2)
	a.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"})
	a.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	a.send(st, tp, wire.ToPartition(1), "x", "y")
	got := a.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Strategy: wire.PollNext(), Count: 10})
	if len(got.offsets) != 2 {
		t.Fatalf("poll %v", got.offsets)
	}
	b := login(t, s)
	b.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	sa, _ := a.sync(st, tp, "g")
	sb, _ := b.sync(st, tp, "g")
	if !reflect.DeepEqual(sa.Partitions, []uint32{0}) || len(sb.Partitions) != 0 {
		t.Fatalf("pending: A %v B %v", sa.Partitions, sb.Partitions)
	}
	if got := members(t, a, st, tp, "g"); !reflect.DeepEqual(got[0], []uint32{0, 1}) {
		t.Fatalf("A still owns 1 for commits: %v", got)
	}
	if got := a.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Strategy: wire.PollNext(), Count: 10}); got.head.PartitionID != wire.ResyncPartition {
		t.Fatalf("pending partition polled: %+v", got.head)
	}
	a.must(wire.StoreConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Offset: 0})
	if sb, _ := b.sync(st, tp, "g"); len(sb.Partitions) != 0 {
		t.Fatalf("moved before full commit: %v", sb.Partitions)
	}
	a.must(wire.StoreConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Offset: 1})
	sb, _ = b.sync(st, tp, "g")
	if !reflect.DeepEqual(sb.Partitions, []uint32{1}) || sb.Generation != 3 {
		t.Fatalf("after commit B %+v", sb)
	}
	got = b.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Strategy: wire.PollNext(), Count: 10})
	if len(got.offsets) != 0 {
		t.Fatalf("B re-read committed data: %v", got.offsets)
	}
}

func TestRevocationTimeout(t *testing.T) {
	s := servertest.Start(t, servertest.WithRebalancingTimeout(100*time.Millisecond))
	a := login(t, s)
	st, tp := setup(t, a, 2)
	a.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"})
	a.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	a.send(st, tp, wire.ToPartition(1), "x")
	a.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Strategy: wire.PollNext(), Count: 10})
	b := login(t, s)
	b.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	testkit.WaitFor(t, "revocation timeout", func() bool {
		sb, _ := b.sync(st, tp, "g")
		return reflect.DeepEqual(sb.Partitions, []uint32{1})
	})
}

func TestHeartbeatEviction(t *testing.T) {
	s := servertest.Start(t, servertest.WithHeartbeatInterval(100*time.Millisecond))
	a := login(t, s)
	st, tp := setup(t, a, 2)
	a.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"})
	b := login(t, s)
	b.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	idle := login(t, s) // logged in but not a member: never evicted
	// a keeps pinging; b goes silent and is evicted with an unsolicited Eviction 13.
	hdr, _, err := b.readFrame()
	if err != nil {
		t.Fatalf("waiting for eviction: %v", err)
	}
	ev, err := wire.DecodeEvictionHeader(hdr)
	if err != nil || ev.Reason != wire.EvictionStaleClient || ev.Client != b.client {
		t.Fatalf("eviction %+v %v", ev, err)
	}
	if got := members(t, a, st, tp, "g"); len(got) != 0 {
		t.Fatalf("evicted member still in group: %v", got)
	}
	// The session is gone: reads need a login again.
	b.wantErr(wire.GetStreamsRequest{}, wire.ErrUnauthenticated)
	if _, err := idle.call(wire.PingRequest{}); err != nil {
		t.Fatalf("idle non-member was evicted: %v", err)
	}
	var ee *wire.EvictionError
	if _, err := idle.call(wire.GetStreamsRequest{}); errors.As(err, &ee) {
		t.Fatalf("idle non-member: %v", err)
	}
}
