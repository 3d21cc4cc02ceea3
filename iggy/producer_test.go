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

func newProducer(t testing.TB, c *iggy.Client, cfg iggy.ProducerConfig) *iggy.Producer {
	t.Helper()
	p, err := c.NewProducer(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// counts returns the number of messages in each of n partitions.
func counts(t testing.TB, c *iggy.Client, n uint32) []uint64 {
	t.Helper()
	top, err := c.GetTopic(testCtx(t), sID, tID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, n)
	for _, p := range top.Partitions {
		out[p.ID] = p.MessagesCount
	}
	return out
}

func TestProducerSendBalancedAndBatches(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 3)
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID, BatchCount: 4})
	// 12 messages in batches of 4, round-robin: one batch per partition.
	if err := p.Send(testCtx(t), payloads("m", 12)); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, c, 3); !slices.Equal(got, []uint64{4, 4, 4}) {
		t.Fatalf("counts = %v", got)
	}
	_, err := c.NewProducer(testCtx(t), iggy.ProducerConfig{Stream: sID, Topic: iggy.Name("nope")})
	if !errors.Is(err, wire.ErrTopicIDNotFound) {
		t.Fatalf("producer on missing topic: %v", err)
	}
}

func TestProducerKeys(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 3)
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID,
		KeyFunc: func(m iggy.Message) []byte { return m.Payload[:5] }})
	var msgs []iggy.Message
	for i := range 6 {
		msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, "key-%d:%d", i%2, i)})
	}
	if err := p.Send(testCtx(t), msgs); err != nil {
		t.Fatal(err)
	}
	want := make([]uint64, 3)
	want[wire.PartitionForKey([]byte("key-0"), 3)] += 3
	want[wire.PartitionForKey([]byte("key-1"), 3)] += 3
	if got := counts(t, c, 3); !slices.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	// A fixed key: XXH32("key-1") % 3 = 1 (reference vector).
	pk := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID, Partitioning: wire.ByKey([]byte("key-1"))})
	if err := pk.Send(testCtx(t), payloads("k", 2)); err != nil {
		t.Fatal(err)
	}
	want[1] += 2
	if got := counts(t, c, 3); !slices.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
}

// TestProducerMessageKeys: a message's own Key picks its partition (before KeyFunc and a
// balanced producer's round robin); a message without one goes to the first partition.
func TestProducerMessageKeys(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 3)
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID})
	var msgs []iggy.Message
	for i := range 6 {
		msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, "m%d", i), Key: fmt.Appendf(nil, "key-%d", i%2)})
	}
	msgs = append(msgs, iggy.Message{Payload: []byte("unkeyed")})
	if err := p.Send(testCtx(t), msgs); err != nil {
		t.Fatal(err)
	}
	want := make([]uint64, 3)
	want[wire.PartitionForKey([]byte("key-0"), 3)] += 3
	want[wire.PartitionForKey([]byte("key-1"), 3)] += 3
	want[0]++
	if got := counts(t, c, 3); !slices.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	if got := p.Partitions(); len(got) != 3 {
		t.Fatalf("Partitions() = %v, want 3 ids", got)
	}
}

// TestProducerMessagePartition: a message's own Partition sends it to that partition index
// (modulo the partition count), before its Key and the producer's partitioning.
func TestProducerMessagePartition(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 3)
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID, Partitioning: wire.ToPartition(0)})
	at := func(i uint32) *uint32 { return &i }
	msgs := []iggy.Message{
		{Payload: []byte("to 2"), Partition: at(2)},
		{Payload: []byte("to 1, keyed"), Partition: at(1), Key: []byte("key-0")},
		{Payload: []byte("to 4 = 1"), Partition: at(4)},
		{Payload: []byte("to 2 again"), Partition: at(2)},
	}
	if err := p.Send(testCtx(t), msgs); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(t, c, 3), []uint64{0, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	r, err := c.PollMessages(testCtx(t), iggy.PollRequest{Consumer: single("c"), Stream: sID, Topic: tID, Partition: u32(2), Strategy: wire.PollFirst(), Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 2 || string(r.Messages[0].Payload) != "to 2" || string(r.Messages[1].Payload) != "to 2 again" {
		t.Fatalf("partition 2 holds %d messages, want \"to 2\", \"to 2 again\" in order", len(r.Messages))
	}
	r.Release()
}

func TestProducerProduceFlushLinger(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 1)
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID, Partitioning: wire.ToPartition(0),
		BatchCount: 10, Linger: 20 * time.Millisecond})
	ctx := testCtx(t)
	for i := range 25 {
		if err := p.Produce(ctx, iggy.Message{Payload: fmt.Appendf(nil, "m-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: single("c"), Stream: sID, Topic: tID, Partition: u32(0), Strategy: wire.PollFirst(), Count: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 25 {
		t.Fatalf("got %d messages", len(r.Messages))
	}
	for i, m := range r.Messages {
		if string(m.Payload) != fmt.Sprintf("m-%d", i) || m.Offset != uint64(i) {
			t.Fatalf("message %d = %d %q", i, m.Offset, m.Payload)
		}
	}
	r.Release()
	// Linger alone sends a partial batch.
	if err := p.Produce(ctx, iggy.Message{Payload: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "linger send", func() bool { return counts(t, c, 1)[0] == 26 })
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Produce(ctx, iggy.Message{Payload: []byte("x")}); !errors.Is(err, iggy.ErrClosed) {
		t.Fatalf("produce after close: %v", err)
	}
}

func TestProducerOversized(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s, iggy.WithMaxFrameSize(256<<10))
	setup(t, c, 1)
	p := newProducer(t, c, iggy.ProducerConfig{Stream: sID, Topic: tID})
	msgs := payloads("ok", 2)
	msgs = append(msgs, iggy.Message{Payload: make([]byte, 300<<10)})
	err := p.Send(testCtx(t), msgs)
	if !errors.Is(err, iggy.ErrTooLarge) || iggy.Retriable(err) {
		t.Fatalf("oversized send: %v", err)
	}
	t.Log(err)
	if got := counts(t, c, 1); got[0] != 0 {
		t.Fatalf("something was sent: %v", got)
	}
	if err := p.Produce(testCtx(t), msgs[2]); !errors.Is(err, iggy.ErrTooLarge) {
		t.Fatalf("oversized produce: %v", err)
	}
	// Many messages that fit one by one are split to respect the frame limit.
	big := make([]iggy.Message, 8)
	for i := range big {
		big[i].Payload = make([]byte, 100<<10)
	}
	if err := p.Send(testCtx(t), big); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, c, 1); got[0] != 8 {
		t.Fatalf("count = %v", got)
	}
}
