package iggy_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

func TestStreamsAndTopics(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	ctx := testCtx(t)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := c.CreateStream(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != 0 || st.Name != "orders" {
		t.Fatalf("stream = %+v", st)
	}
	if _, err := c.CreateStream(ctx, "orders"); !errors.Is(err, wire.ErrStreamNameAlreadyExists) || !errors.Is(err, wire.ErrAlreadyExists) {
		t.Fatalf("duplicate stream: %v", err)
	}
	if _, err := c.CreateStream(ctx, "audit"); err != nil {
		t.Fatal(err)
	}
	list, err := c.GetStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"audit", "orders"}) {
		t.Fatalf("streams = %v", names)
	}
	top, err := c.CreateTopic(ctx, iggy.Name("orders"), "eu", 3)
	if err != nil {
		t.Fatal(err)
	}
	if top.ID != 0 || top.Name != "eu" || len(top.Partitions) != 3 {
		t.Fatalf("topic = %+v", top)
	}
	if err := c.CreatePartitions(ctx, iggy.Name("orders"), iggy.ID(0), 2); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTopic(ctx, iggy.ID(0), iggy.Name("eu"))
	if err != nil {
		t.Fatal(err)
	}
	if got.PartitionsCount != 5 || len(got.Partitions) != 5 || got.Partitions[4].ID != 4 {
		t.Fatalf("topic after create partitions = %+v", got.TopicHeader)
	}
	if err := c.DeletePartitions(ctx, iggy.Name("orders"), iggy.Name("eu"), 1); err != nil {
		t.Fatal(err)
	}
	topics, err := c.GetTopics(ctx, iggy.Name("orders"))
	if err != nil || len(topics) != 1 || topics[0].PartitionsCount != 4 {
		t.Fatalf("topics = %+v, %v", topics, err)
	}
	sd, err := c.GetStream(ctx, iggy.Name("orders"))
	if err != nil || sd.ID != 0 || len(sd.Topics) != 1 {
		t.Fatalf("stream details = %+v, %v", sd, err)
	}
	if err := c.DeleteTopic(ctx, iggy.Name("orders"), iggy.Name("eu")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTopic(ctx, iggy.Name("orders"), iggy.Name("eu")); !errors.Is(err, wire.ErrTopicIDNotFound) {
		t.Fatalf("deleted topic: %v", err)
	}
	if err := c.DeleteStream(ctx, iggy.Name("orders")); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetStream(ctx, iggy.Name("orders"))
	if !errors.Is(err, wire.ErrStreamIDNotFound) || !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("deleted stream: %v", err)
	}
	if want := `iggy: get stream stream "orders": StreamIdNotFound (1009)`; err.Error() != want {
		t.Fatalf("error text %q, want %q", err, want)
	}
	me, err := c.GetMe(ctx)
	if err != nil || me.UserID != 0 {
		t.Fatalf("get me = %+v, %v", me, err)
	}
}

func TestSendPollRoundTripWithHeaders(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	ctx := testCtx(t)
	setup(t, c, 2)
	msgs := payloads("m", 3)
	msgs[1].Headers = []wire.KV{
		wire.StringKV("trace", wire.StringValue("t-1")),
		wire.StringKV("n", wire.Uint64Value(42)),
	}
	msgs[2].ID = [16]byte{7}
	r, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(1), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if r != (iggy.SendResult{Partition: 1, BaseOffset: 0, Count: 3}) {
		t.Fatalf("send result = %+v", r)
	}
	r, err = c.SendMessages(ctx, sID, tID, wire.ToPartition(1), payloads("n", 2))
	if err != nil || r.BaseOffset != 3 {
		t.Fatalf("second send = %+v, %v", r, err)
	}
	pr, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: single("c"), Stream: sID, Topic: tID,
		Partition: u32(1), Strategy: wire.PollFirst(), Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Release()
	if pr.PartitionID != 1 || pr.CurrentOffset != 4 || len(pr.Messages) != 5 {
		t.Fatalf("poll = partition %d current %d count %d", pr.PartitionID, pr.CurrentOffset, len(pr.Messages))
	}
	wantPayloads := []string{"m-0", "m-1", "m-2", "n-0", "n-1"}
	for i, m := range pr.Messages {
		if m.Offset != uint64(i) || string(m.Payload) != wantPayloads[i] {
			t.Fatalf("message %d = offset %d payload %q", i, m.Offset, m.Payload)
		}
		if m.ID.IsZero() {
			t.Fatalf("message %d has id 0", i)
		}
	}
	if pr.Messages[2].ID != (wire.Uint128{Lo: 7}) {
		t.Fatalf("explicit id = %v", pr.Messages[2].ID)
	}
	hs, err := pr.Messages[1].Headers(nil)
	if err != nil || len(hs) != 2 {
		t.Fatalf("headers = %v, %v", hs, err)
	}
	if v, ok := wire.LookupKV(hs, "trace"); !ok || string(v.Raw) != "t-1" || v.Kind != wire.KindString {
		t.Fatalf("trace header = %+v", v)
	}
	if v, _ := wire.LookupKV(hs, "n"); v.Kind != wire.KindUint64 {
		t.Fatalf("n header = %+v", v)
	} else if n, _ := v.AsUint64(); n != 42 {
		t.Fatalf("n = %d", n)
	}
	if hs, _ := pr.Messages[0].Headers(nil); len(hs) != 0 {
		t.Fatalf("message 0 headers = %v", hs)
	}
	// Balanced and key partitioning resolved by the server.
	r, err = c.SendMessages(ctx, sID, tID, wire.ByKey([]byte("key-1")), payloads("k", 1))
	if err != nil || r.Partition != wire.PartitionForKey([]byte("key-1"), 2) {
		t.Fatalf("key send = %+v, %v", r, err)
	}
}
