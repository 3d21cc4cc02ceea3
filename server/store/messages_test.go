package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
)

// appendN appends batches of the given counts to k with AppendFunc.
func appendN(t testing.TB, s *Store, k PartitionKey, counts ...uint32) []Appended {
	t.Helper()
	var out []Appended
	for i, c := range counts {
		out = append(out, must[Appended](t)(s.AppendFunc(k, c, stamper(fakeBatch(c, 100, byte(i))))))
	}
	return out
}

func TestAppendAssignsOffsets(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 2)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	got := appendN(t, s, k, 3, 1, 5)
	wantBase := []uint64{0, 3, 4}
	for i, a := range got {
		if a.BaseOffset != wantBase[i] {
			t.Fatalf("append %d base offset %d, want %d", i, a.BaseOffset, wantBase[i])
		}
		if i > 0 && a.BaseTimestamp < got[i-1].BaseTimestamp {
			t.Fatalf("timestamps decrease: %d then %d", got[i-1].BaseTimestamp, a.BaseTimestamp)
		}
	}
	st := must[PartitionStats](t)(s.Stats(k))
	want := PartitionStats{NextOffset: 9, Messages: 9, Bytes: 3 * 164, LastTimestamp: got[2].BaseTimestamp, Segments: 1}
	if st != want || st.CurrentOffset() != 8 {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	// The other partition is untouched and numbers from 0.
	k1 := PartitionKey{tp.StreamID, tp.ID, 1}
	if a := appendN(t, s, k1, 2)[0]; a.BaseOffset != 0 {
		t.Fatalf("partition 1 base offset %d", a.BaseOffset)
	}
	want2 := Totals{Messages: 11, Bytes: 4 * 164}
	if tt := must[Totals](t)(s.TopicTotals(tp.StreamID, tp.ID)); tt != want2 {
		t.Fatalf("TopicTotals = %+v, want %+v", tt, want2)
	}
	if st := must[Totals](t)(s.StreamTotals(tp.StreamID)); st != want2 {
		t.Fatalf("StreamTotals = %+v, want %+v", st, want2)
	}
	if (PartitionStats{}).CurrentOffset() != 0 {
		t.Fatal("empty CurrentOffset != 0")
	}
}

func TestAppendErrors(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 1)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	tests := []struct {
		name string
		k    PartitionKey
		b    Batch
		want error
	}{
		{"count 0", k, Batch{Count: 0, Data: []byte{1}}, ErrInvalidBatch},
		{"empty data", k, Batch{Count: 1}, ErrInvalidBatch},
		{"wrong base offset", k, Batch{BaseOffset: 1, Count: 1, Data: []byte{1}}, ErrOffsetMismatch},
		{"missing stream", PartitionKey{9, 0, 0}, Batch{Count: 1, Data: []byte{1}}, ErrStreamNotFound},
		{"missing topic", PartitionKey{tp.StreamID, 9, 0}, Batch{Count: 1, Data: []byte{1}}, ErrTopicNotFound},
		{"missing partition", PartitionKey{tp.StreamID, tp.ID, 1}, Batch{Count: 1, Data: []byte{1}}, ErrPartitionNotFound},
	}
	for _, tt := range tests {
		_, err := s.Append(tt.k, tt.b)
		if !errorsIs(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	must[Appended](t)(s.Append(k, Batch{BaseOffset: 0, BaseTimestamp: 100, Count: 2, Data: []byte{1}}))
	_, err := s.Append(k, Batch{BaseOffset: 2, BaseTimestamp: 99, Count: 1, Data: []byte{1}})
	wantErr(t, err, ErrOffsetMismatch)
	stampErr := fmt.Errorf("boom")
	_, err = s.AppendFunc(k, 1, func(uint64, uint64) ([]byte, error) { return nil, stampErr })
	wantErr(t, err, stampErr)
	if st := must[PartitionStats](t)(s.Stats(k)); st.NextOffset != 2 || st.Messages != 2 {
		t.Fatalf("failed appends changed stats: %+v", st)
	}
}

func TestReadRanges(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 1)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	// batches: [0..2] [3] [4..8] [9..10]
	appendN(t, s, k, 3, 1, 5, 2)
	tests := []struct {
		start uint64
		max   uint32
		bases []uint64
	}{
		{0, 1, []uint64{0}},
		{0, 3, []uint64{0}},
		{0, 4, []uint64{0, 3}},
		{1, 1, []uint64{0}},
		{2, 2, []uint64{0, 3}},
		{3, 1, []uint64{3}},
		{4, 5, []uint64{4}},
		{5, 100, []uint64{4, 9}},
		{8, 2, []uint64{4, 9}},
		{10, 1, []uint64{9}},
		{0, 1000, []uint64{0, 3, 4, 9}},
		{11, 10, nil},     // past the end
		{1 << 40, 1, nil}, // far past the end
		{0, 0, nil},       // count 0
	}
	for _, tt := range tests {
		r := must[ReadResult](t)(s.Read(k, tt.start, tt.max))
		var bases []uint64
		for _, b := range r.Batches {
			bases = append(bases, b.BaseOffset)
			if got := binary.LittleEndian.Uint64(b.Data[8:]); got != b.BaseOffset {
				t.Fatalf("batch %d stamped with offset %d", b.BaseOffset, got)
			}
			if got := binary.LittleEndian.Uint32(b.Data[48:]); got != b.Count {
				t.Fatalf("batch %d count %d, index says %d", b.BaseOffset, got, b.Count)
			}
			if got := binary.LittleEndian.Uint64(b.Data[16:]); got != b.BaseTimestamp {
				t.Fatalf("batch %d timestamp %d, index says %d", b.BaseOffset, got, b.BaseTimestamp)
			}
		}
		if fmtSlice(bases) != fmtSlice(tt.bases) {
			t.Errorf("Read(%d, %d) bases = %v, want %v", tt.start, tt.max, bases, tt.bases)
		}
		if r.Stats.NextOffset != 11 || r.Stats.Messages != 11 {
			t.Errorf("Read(%d, %d) stats = %+v", tt.start, tt.max, r.Stats)
		}
	}
	// Returned data is the caller's: mutating it changes nothing stored.
	r := must[ReadResult](t)(s.Read(k, 0, 1))
	want := bytes.Clone(r.Batches[0].Data)
	r.Batches[0].Data[70] ^= 0xff
	if r2 := must[ReadResult](t)(s.Read(k, 0, 1)); !bytes.Equal(r2.Batches[0].Data, want) {
		t.Fatal("stored data changed through a returned slice")
	}
	// Empty partition.
	check(t, s.PurgeTopic(tp.StreamID, tp.ID))
	if r := must[ReadResult](t)(s.Read(k, 0, 10)); len(r.Batches) != 0 || r.Stats != (PartitionStats{}) {
		t.Fatalf("read after purge = %+v", r)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 1)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	// batches at offsets 0 (ts 100, 2 msgs), 2 (ts 200), 3 (ts 200), 4 (ts 350)
	for _, b := range []Batch{{0, 2, 100, []byte{1}}, {2, 1, 200, []byte{2}}, {3, 1, 200, []byte{3}}, {4, 1, 350, []byte{4}}} {
		must[Appended](t)(s.Append(k, b))
	}
	tests := []struct {
		ts    uint64
		want  uint64
		found bool
	}{
		{0, 0, true}, {100, 0, true}, {101, 2, true}, {200, 2, true}, {201, 4, true}, {350, 4, true}, {351, 0, false},
	}
	for _, tt := range tests {
		got, found, err := s.OffsetForTimestamp(k, tt.ts)
		check(t, err)
		if got != tt.want || found != tt.found {
			t.Errorf("OffsetForTimestamp(%d) = %d,%v want %d,%v", tt.ts, got, found, tt.want, tt.found)
		}
	}
	_, _, err := s.OffsetForTimestamp(PartitionKey{tp.StreamID, tp.ID, 5}, 0)
	wantErr(t, err, ErrPartitionNotFound)
}

func TestConsumerOffsets(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 2)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	c := Consumer{KindConsumer, 7}
	wantErr(t, s.StoreConsumerOffset(k, c, 0), ErrOffsetOutOfRange) // empty partition
	appendN(t, s, k, 5)
	wantErr(t, s.StoreConsumerOffset(k, c, 5), ErrOffsetOutOfRange)
	wantErr(t, s.StoreConsumerOffset(k, Consumer{3, 1}, 0), ErrInvalidConsumer)
	wantErr(t, s.StoreConsumerOffset(k, Consumer{KindGroup, 0}, 0), ErrGroupNotFound)
	wantErr(t, s.StoreConsumerOffset(PartitionKey{tp.StreamID, tp.ID, 9}, c, 0), ErrPartitionNotFound)
	if _, found, err := s.ConsumerOffset(k, c); err != nil || found {
		t.Fatalf("offset before store: found=%v err=%v", found, err)
	}
	check(t, s.StoreConsumerOffset(k, c, 4))
	check(t, s.StoreConsumerOffset(k, c, 1)) // may move backwards
	if got := must[uint64](t)(s.AdvanceConsumerOffset(k, c, 0)); got != 1 {
		t.Fatalf("Advance to 0 over 1 = %d, want 1", got)
	}
	if got := must[uint64](t)(s.AdvanceConsumerOffset(k, c, 3)); got != 3 {
		t.Fatalf("Advance to 3 = %d", got)
	}
	if off, found, err := s.ConsumerOffset(k, c); err != nil || !found || off != 3 {
		t.Fatalf("ConsumerOffset = %d,%v,%v want 3", off, found, err)
	}
	// Kinds and partitions are separate key spaces.
	g := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g"))
	gc := Consumer{KindGroup, g.ID}
	if _, found, _ := s.ConsumerOffset(k, Consumer{KindGroup, 7}); found {
		t.Fatal("group offset visible under consumer id")
	}
	check(t, s.StoreConsumerOffset(k, gc, 2))
	check(t, s.DeleteConsumerOffset(k, c))
	wantErr(t, s.DeleteConsumerOffset(k, c), ErrConsumerOffsetNotFound)
	// DeleteGroup drops the group's offsets.
	check(t, s.DeleteGroup(tp.StreamID, tp.ID, g.ID))
	g2 := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g"))
	if _, found, _ := s.ConsumerOffset(k, Consumer{KindGroup, g2.ID}); found {
		t.Fatal("new group sees an offset")
	}
	// Purge clears offsets.
	check(t, s.StoreConsumerOffset(k, c, 4))
	check(t, s.PurgeStream(tp.StreamID))
	if _, found, _ := s.ConsumerOffset(k, c); found {
		t.Fatal("offset survived purge")
	}
}

func TestPurgeAndDeletePartitionData(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 3)
	keys := []PartitionKey{{tp.StreamID, tp.ID, 0}, {tp.StreamID, tp.ID, 1}, {tp.StreamID, tp.ID, 2}}
	for _, k := range keys {
		appendN(t, s, k, 2, 3)
		check(t, s.StoreConsumerOffset(k, Consumer{KindConsumer, 1}, 4))
	}
	// Delete the highest partition, recreate it: empty, offsets from 0.
	check(t, s.DeletePartitions(tp.StreamID, tp.ID, 1))
	_, err := s.Stats(keys[2])
	wantErr(t, err, ErrPartitionNotFound)
	must[[]Partition](t)(s.CreatePartitions(tp.StreamID, tp.ID, 1))
	if st := must[PartitionStats](t)(s.Stats(keys[2])); st != (PartitionStats{}) {
		t.Fatalf("recreated partition stats %+v", st)
	}
	if _, found, _ := s.ConsumerOffset(keys[2], Consumer{KindConsumer, 1}); found {
		t.Fatal("recreated partition has an offset")
	}
	if _, found, _ := s.OffsetForTimestamp(keys[2], 0); found {
		t.Fatal("recreated partition has a timestamp index")
	}
	// Other partitions kept everything.
	if st := must[PartitionStats](t)(s.Stats(keys[1])); st.NextOffset != 5 {
		t.Fatalf("partition 1 stats %+v", st)
	}
	// Purge resets to 0 and appends start over.
	check(t, s.PurgeTopic(tp.StreamID, tp.ID))
	if a := appendN(t, s, keys[0], 1)[0]; a.BaseOffset != 0 || a.Stats.Messages != 1 {
		t.Fatalf("append after purge = %+v", a)
	}
	if r := must[ReadResult](t)(s.Read(keys[0], 0, 100)); len(r.Batches) != 1 || r.Batches[0].Count != 1 {
		t.Fatalf("read after purge = %+v", r.Batches)
	}
}

func TestConcurrentAppendsGapFree(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 2)
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			k := PartitionKey{tp.StreamID, tp.ID, uint32(w % 2)}
			for range each {
				if _, err := s.AppendFunc(k, 2, stamper(fakeBatch(2, 10, byte(w)))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() { // readers and metadata reads run alongside
		for range each {
			_, _ = s.Read(PartitionKey{tp.StreamID, tp.ID, 0}, 0, 10)
			_, _ = s.Topics(tp.StreamID)
		}
	})
	wg.Wait()
	for p := range uint32(2) {
		k := PartitionKey{tp.StreamID, tp.ID, p}
		r := must[ReadResult](t)(s.Read(k, 0, 1000))
		if len(r.Batches) != 2*each || r.Stats.NextOffset != 4*each {
			t.Fatalf("partition %d: %d batches, stats %+v", p, len(r.Batches), r.Stats)
		}
		for i, b := range r.Batches {
			if b.BaseOffset != uint64(2*i) || binary.LittleEndian.Uint64(b.Data[8:]) != b.BaseOffset {
				t.Fatalf("partition %d batch %d at offset %d", p, i, b.BaseOffset)
			}
		}
	}
}
