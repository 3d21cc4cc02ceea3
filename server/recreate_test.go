package server_test

import (
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

// TestRecreatedTopicIsNew pins what a deleted and re-created topic looks like, as on
// upstream Iggy (where a topic's groups live inside it): the new topic reuses the lowest
// free id (the old one) with a new creation time; the old topic's group, its member and
// its stored offsets are gone (sync answers "not a member", the offset is absent, the
// group's name is free); a group created again starts at id 0 with generation 1 after one
// join, so neither the id nor the generation tells it from the old one.
func TestRecreatedTopicIsNew(t *testing.T) {
	s := servertest.Start(t)
	a := login(t, s)
	st, tp := setup(t, a, 1)
	old, _, err := wire.DecodeTopicDetails(a.must(wire.GetTopicRequest{Stream: st, Topic: tp}))
	if err != nil {
		t.Fatal(err)
	}
	a.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"})
	a.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	before, _ := a.sync(st, tp, "g")
	for range 3 {
		a.send(st, tp, wire.ToPartition(0), "m")
	}
	a.must(wire.StoreConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: 2})

	a.must(wire.DeleteTopicRequest{Stream: st, Topic: tp})
	if _, found := a.sync(st, tp, "g"); found {
		t.Fatal("sync after the delete found an assignment")
	}
	a.wantErr(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")}, wire.ErrTopicIDNotFound)
	nt, _, err := wire.DecodeTopicDetails(a.must(wire.CreateTopicRequest{Stream: st, PartitionsCount: 1, Name: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if nt.ID != old.ID || nt.CreatedAt <= old.CreatedAt {
		t.Fatalf("new topic id %d created_at %d; old id %d created_at %d: want the same id, a later creation time", nt.ID, nt.CreatedAt, old.ID, old.CreatedAt)
	}
	if _, found := a.sync(st, tp, "g"); found {
		t.Fatal("the old member is a member of the new topic's group")
	}
	if p := a.must(wire.GetConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")}); len(p) != 0 {
		t.Fatalf("the old group outlived its topic: %x", p)
	}
	if p := a.must(wire.GetConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0)}); len(p) != 0 {
		t.Fatalf("the old group's offset outlived its topic: %x", p)
	}
	gd, _, err := wire.DecodeGroupDetails(a.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"}))
	if err != nil || gd.ID != 0 {
		t.Fatalf("group created again: %+v %v; want id 0", gd, err)
	}
	a.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	after, _ := a.sync(st, tp, "g")
	if after.Generation != before.Generation || after.Generation != 1 {
		t.Fatalf("generation %d after the re-join, %d before: want 1 both", after.Generation, before.Generation)
	}
}
