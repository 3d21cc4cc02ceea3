package connect

import (
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// TestNotStored: before a retry, a source with unique ids loses, per partition, the
// messages up to the one Iggy holds last; other partitions, unkeyed messages and a last
// message that is not from this batch leave the batch as it is.
func TestNotStored(t *testing.T) {
	msg := func(id uint64, key string) sdk.ProducedMessage {
		return sdk.ProducedMessage{ID: sdk.MessageIDFromUint64(id), PartitionKey: []byte(key), Payload: []byte{byte(id)}}
	}
	// Keys "a…" go to partition 0, "b…" to partition 1.
	part := func(k []byte) int {
		if k[0] == 'a' {
			return 0
		}
		return 1
	}
	batch := []sdk.ProducedMessage{msg(1, "a1"), msg(2, "b1"), msg(3, "a2"), msg(4, "b2"), msg(5, "a3"), msg(6, "")}
	ids := func(ms []sdk.ProducedMessage) []uint64 {
		var out []uint64
		for _, m := range ms {
			lo, _ := m.ID.Halves()
			out = append(out, lo)
		}
		return out
	}
	last := func(id uint64) *sdk.SentMessage { return &sdk.SentMessage{ID: sdk.MessageIDFromUint64(id)} }
	for _, tc := range []struct {
		name string
		tail []*sdk.SentMessage
		want []uint64
	}{
		{"nothing stored", []*sdk.SentMessage{nil, nil}, []uint64{1, 2, 3, 4, 5, 6}},
		{"partition 0 up to 3", []*sdk.SentMessage{last(3), nil}, []uint64{2, 4, 5, 6}},
		{"both partitions", []*sdk.SentMessage{last(5), last(2)}, []uint64{4, 6}},
		{"a last message of an earlier batch", []*sdk.SentMessage{last(99), last(4)}, []uint64{1, 3, 5, 6}},
	} {
		got := ids(notStored(batch, sdk.Tail{Last: tc.tail, PartitionOf: part}))
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}

// TestNotStoredExplicitPartition: messages with a Partition are matched against that
// partition's last message (Tail.IndexOf), ahead of their key.
func TestNotStoredExplicitPartition(t *testing.T) {
	msg := func(id uint64, part uint32) sdk.ProducedMessage {
		return sdk.ProducedMessage{ID: sdk.MessageIDFromUint64(id), Partition: sdk.PartitionID(part), PartitionKey: []byte("x"), Payload: []byte{1}}
	}
	batch := []sdk.ProducedMessage{msg(1, 5), msg(2, 6), msg(3, 5), msg(4, 6)}
	tail := sdk.Tail{Partitions: []uint32{5, 6}, Last: []*sdk.SentMessage{{ID: sdk.MessageIDFromUint64(3)}, nil},
		PartitionOf: func([]byte) int { return 1 }}
	out := notStored(batch, tail)
	if len(out) != 2 || out[0].ID != sdk.MessageIDFromUint64(2) || out[1].ID != sdk.MessageIDFromUint64(4) {
		t.Fatalf("notStored = %+v, want messages 2 and 4", out)
	}
}
