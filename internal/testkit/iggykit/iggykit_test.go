package iggykit

import (
	"slices"
	"testing"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

func TestProduceAndStored(t *testing.T) {
	e := Start(t)
	e.Topic("s", "t", 2)
	e.Produce("s", "t", 1, "a", "b")
	e.Fill("s", "t", 1, 2, nil)
	part := uint32(1)
	res, err := e.Dial().PollMessages(e.Ctx(), iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.Name("c")},
		Stream: iggy.Name("s"), Topic: iggy.Name("t"), Partition: &part, Strategy: wire.PollOffset(0), Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Messages {
		got = append(got, string(m.Payload))
	}
	if want := []string{"a", "b", "p1-m0", "p1-m1"}; !slices.Equal(got, want) {
		t.Fatalf("partition 1 holds %q, want %q", got, want)
	}
	if _, found := e.Stored("g", "s", "t", 1); found {
		t.Fatal("an offset is stored before any was")
	}
	if _, err := e.Admin.CreateConsumerGroup(e.Ctx(), iggy.Name("s"), iggy.Name("t"), "g"); err != nil {
		t.Fatal(err)
	}
	if err := e.Admin.JoinConsumerGroup(e.Ctx(), iggy.Name("s"), iggy.Name("t"), iggy.Name("g")); err != nil {
		t.Fatal(err)
	}
	if err := e.Admin.StoreOffset(e.Ctx(), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}, iggy.Name("s"), iggy.Name("t"), 1, 2); err != nil {
		t.Fatal(err)
	}
	e.WantStored("g", "s", "t", 1, 2)
}
