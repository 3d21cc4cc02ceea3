package connect

import (
	"slices"
	"testing"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// TestProducerHonoursPartitionAndOriginTimestamp: a source message's Partition sends it to
// that partition of the real server (before its PartitionKey), its OriginTimestamp is the
// one Iggy stores, and the tail finds each at its partition's index.
func TestProducerHonoursPartitionAndOriginTimestamp(t *testing.T) {
	e := newIggyEnv(t)
	e.Topic("s", "t", 3)
	be := &iggyBackend{c: e.Dial()}
	p, err := be.newProducer(bg(t), producerConfig{Stream: "s", Topic: "t", BatchLength: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.close(bg(t)) }()
	msgs := []sdk.ProducedMessage{
		{ID: sdk.MessageIDFromUint64(1), Payload: []byte("a"), Partition: sdk.PartitionAt(2), OriginTimestamp: 1_000_001},
		{ID: sdk.MessageIDFromUint64(2), Payload: []byte("b"), Partition: sdk.PartitionAt(2), PartitionKey: []byte("k"), OriginTimestamp: 1_000_002},
		{ID: sdk.MessageIDFromUint64(3), Payload: []byte("c"), Partition: sdk.PartitionAt(1), OriginTimestamp: 1_000_003},
	}
	if err := p.send(bg(t), msgs); err != nil {
		t.Fatal(err)
	}
	type got struct {
		payload string
		origin  uint64
	}
	read := func(part uint32) []got {
		r, err := e.Admin.PollMessages(bg(t), iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(0)},
			Stream: iggy.Name("s"), Topic: iggy.Name("t"), Partition: &part, Strategy: wire.PollOffset(0), Count: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		var out []got
		for _, m := range r.Messages {
			out = append(out, got{string(m.Payload), m.OriginTimestamp})
		}
		return out
	}
	if g := read(0); len(g) != 0 {
		t.Fatalf("partition 0 = %v, want nothing", g)
	}
	if g, want := read(1), []got{{"c", 1_000_003}}; !slices.Equal(g, want) {
		t.Fatalf("partition 1 = %v, want %v", g, want)
	}
	if g, want := read(2), []got{{"a", 1_000_001}, {"b", 1_000_002}}; !slices.Equal(g, want) {
		t.Fatalf("partition 2 = %v, want %v", g, want)
	}
	tail, err := p.tail(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if tail.Last[2] == nil || tail.Last[2].ID != sdk.MessageIDFromUint64(2) {
		t.Fatalf("tail of partition 2 = %+v, want message 2", tail.Last)
	}
	if out := notStored(msgs, tail); len(out) != 0 {
		t.Fatalf("notStored after the send = %d messages, want 0", len(out))
	}
}
