package connect

import (
	"fmt"
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

// TestNotStoredExplicitPartition: a message that names its partition is matched against
// that partition's last message, as a keyed one is.
func TestNotStoredExplicitPartition(t *testing.T) {
	at := func(i uint32) *uint32 { return &i }
	batch := []sdk.ProducedMessage{
		{ID: sdk.MessageIDFromUint64(1), Partition: at(0)}, {ID: sdk.MessageIDFromUint64(2), Partition: at(1)},
		{ID: sdk.MessageIDFromUint64(3), Partition: at(2)}, {ID: sdk.MessageIDFromUint64(4), Partition: at(1)},
	}
	tail := sdk.Tail{Last: []*sdk.SentMessage{nil, {ID: sdk.MessageIDFromUint64(2)}}}
	var got []uint64
	for _, m := range notStored(batch, tail) {
		lo, _ := m.ID.Halves()
		got = append(got, lo)
	}
	// Partition index 2 of a 2-partition tail wraps to 0; only message 2 of partition 1 is held.
	if want := []uint64{1, 3, 4}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("notStored = %v, want %v", got, want)
	}
}
