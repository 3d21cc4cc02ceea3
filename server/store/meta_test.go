package store

import (
	"bytes"
	"testing"
)

func TestStreamIDAllocation(t *testing.T) {
	tests := []struct {
		name   string
		create []string
		delete []uint32
		then   string
		wantID uint32
	}{
		{"first is 0", nil, nil, "a", 0},
		{"sequential", []string{"a", "b"}, nil, "c", 2},
		{"reuse lowest free", []string{"a", "b", "c"}, []uint32{1}, "d", 1},
		{"reuse 0", []string{"a", "b"}, []uint32{0}, "c", 0},
		{"two holes take lowest", []string{"a", "b", "c", "d"}, []uint32{2, 1}, "e", 1},
		{"reuse a deleted name", []string{"a"}, []uint32{0}, "a", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openMem(t)
			for i, n := range tt.create {
				if got := must[Stream](t)(s.CreateStream(n)); got.ID != uint32(i) || got.Name != n || got.CreatedAt == 0 {
					t.Fatalf("CreateStream(%q) = %+v", n, got)
				}
			}
			for _, id := range tt.delete {
				check(t, s.DeleteStream(id))
			}
			if got := must[Stream](t)(s.CreateStream(tt.then)); got.ID != tt.wantID {
				t.Fatalf("CreateStream(%q).ID = %d, want %d", tt.then, got.ID, tt.wantID)
			}
		})
	}
}

func TestStreamErrors(t *testing.T) {
	s := openMem(t)
	must[Stream](t)(s.CreateStream("a"))
	must[Stream](t)(s.CreateStream("b"))
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate name", second(s.CreateStream("a")), ErrStreamExists},
		{"names are case-sensitive", second(s.CreateStream("A")), nil},
		{"empty name", second(s.CreateStream("")), ErrInvalidName},
		{"long name", second(s.CreateStream(string(bytes.Repeat([]byte("x"), 256)))), ErrInvalidName},
		{"rename to own name", s.UpdateStream(0, "a"), nil},
		{"rename to other's name", s.UpdateStream(0, "b"), ErrStreamExists},
		{"rename missing", s.UpdateStream(9, "z"), ErrStreamNotFound},
		{"delete missing", s.DeleteStream(9), ErrStreamNotFound},
		{"purge missing", s.PurgeStream(9), ErrStreamNotFound},
		{"get missing", second(s.Stream(9)), ErrStreamNotFound},
		{"get missing name", second(s.StreamByName("nope")), ErrStreamNotFound},
		{"topic in missing stream", second(s.CreateTopic(9, 1, TopicConfig{Name: "t"})), ErrStreamNotFound},
		{"topics of missing stream", second(s.Topics(9)), ErrStreamNotFound},
	}
	for _, tt := range tests {
		if tt.want == nil && tt.err != nil || tt.want != nil && !errorsIs(tt.err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	check(t, s.UpdateStream(0, "renamed"))
	if got := must[Stream](t)(s.StreamByName("renamed")); got.ID != 0 {
		t.Fatalf("StreamByName(renamed) = %+v", got)
	}
	got := must[[]Stream](t)(s.Streams())
	if len(got) != 3 || got[0].Name != "renamed" || got[1].Name != "b" || got[2].Name != "A" {
		t.Fatalf("Streams() = %+v", got)
	}
}

func second[T any](_ T, err error) error { return err }

func TestTopicCRUD(t *testing.T) {
	s := openMem(t)
	st := must[Stream](t)(s.CreateStream("s"))
	cfg := TopicConfig{Name: "t0", MessageExpiry: 5, MaxTopicSize: 7, Compression: 2, Options: []byte{1, 2, 3}}
	t0 := must[Topic](t)(s.CreateTopic(st.ID, 3, cfg))
	if t0.ID != 0 || t0.StreamID != st.ID || t0.Name != "t0" || t0.MessageExpiry != 5 || t0.MaxTopicSize != 7 ||
		t0.Compression != 2 || !bytes.Equal(t0.Options, []byte{1, 2, 3}) || len(t0.Partitions) != 3 {
		t.Fatalf("CreateTopic = %+v", t0)
	}
	for i, p := range t0.Partitions {
		if p.ID != uint32(i) || p.CreatedAt != t0.CreatedAt {
			t.Fatalf("partition %d = %+v", i, p)
		}
	}
	must[Topic](t)(s.CreateTopic(st.ID, 0, TopicConfig{Name: "t1"}))
	must[Topic](t)(s.CreateTopic(st.ID, 1, TopicConfig{Name: "t2"}))
	wantErr(t, second(s.CreateTopic(st.ID, 1, TopicConfig{Name: "t1"})), ErrTopicExists)
	wantErr(t, second(s.CreateTopic(st.ID, 1001, TopicConfig{Name: "big"})), ErrPartitionsCount)
	check(t, s.DeleteTopic(st.ID, 1))
	wantErr(t, s.DeleteTopic(st.ID, 1), ErrTopicNotFound)
	if got := must[Topic](t)(s.CreateTopic(st.ID, 0, TopicConfig{Name: "t3"})); got.ID != 1 {
		t.Fatalf("topic after delete got id %d, want 1", got.ID)
	}
	upd := TopicConfig{Name: "t0b", MessageExpiry: 0, MaxTopicSize: 9, Compression: 1}
	check(t, s.UpdateTopic(st.ID, 0, upd))
	wantErr(t, s.UpdateTopic(st.ID, 0, TopicConfig{Name: "t2"}), ErrTopicExists)
	wantErr(t, s.UpdateTopic(st.ID, 9, upd), ErrTopicNotFound)
	got := must[Topic](t)(s.TopicByName(st.ID, "t0b"))
	if got.ID != 0 || got.MessageExpiry != 0 || got.MaxTopicSize != 9 || got.Compression != 1 || len(got.Options) != 0 || len(got.Partitions) != 3 {
		t.Fatalf("after update: %+v", got)
	}
	wantErr(t, second(s.TopicByName(st.ID, "t0")), ErrTopicNotFound)
	wantErr(t, second(s.Topic(st.ID, 7)), ErrTopicNotFound)
	names := []string{}
	for _, tp := range must[[]Topic](t)(s.Topics(st.ID)) {
		names = append(names, tp.Name)
	}
	if want := "[t0b t3 t2]"; fmtSlice(names) != want {
		t.Fatalf("Topics = %v, want %s", names, want)
	}
	// Topic ids are per stream.
	st2 := must[Stream](t)(s.CreateStream("s2"))
	if got := must[Topic](t)(s.CreateTopic(st2.ID, 0, TopicConfig{Name: "t0b"})); got.ID != 0 {
		t.Fatalf("first topic of second stream id = %d", got.ID)
	}
}

func TestPartitionsCreateDelete(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 2)
	added := must[[]Partition](t)(s.CreatePartitions(tp.StreamID, tp.ID, 3))
	if len(added) != 3 || added[0].ID != 2 || added[2].ID != 4 {
		t.Fatalf("CreatePartitions = %+v", added)
	}
	wantErr(t, second(s.CreatePartitions(tp.StreamID, tp.ID, 0)), ErrPartitionsCount)
	wantErr(t, second(s.CreatePartitions(tp.StreamID, tp.ID, 1001)), ErrPartitionsCount)
	wantErr(t, s.DeletePartitions(tp.StreamID, tp.ID, 6), ErrPartitionsCount)
	wantErr(t, s.DeletePartitions(tp.StreamID, tp.ID, 0), ErrPartitionsCount)
	check(t, s.DeletePartitions(tp.StreamID, tp.ID, 2))
	if got := partitionIDs(must[Topic](t)(s.Topic(tp.StreamID, tp.ID))); got != "[0 1 2]" {
		t.Fatalf("after delete 2: %s", got)
	}
	check(t, s.DeletePartitions(tp.StreamID, tp.ID, 3))
	if got := partitionIDs(must[Topic](t)(s.Topic(tp.StreamID, tp.ID))); got != "[]" {
		t.Fatalf("after delete all: %s", got)
	}
	added = must[[]Partition](t)(s.CreatePartitions(tp.StreamID, tp.ID, 1))
	if added[0].ID != 0 {
		t.Fatalf("partition of empty topic got id %d, want 0", added[0].ID)
	}
}

func partitionIDs(tp Topic) string {
	ids := []uint32{}
	for _, p := range tp.Partitions {
		ids = append(ids, p.ID)
	}
	return fmtSlice(ids)
}

func TestGroupIDsNeverReused(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 1)
	sid, tid := tp.StreamID, tp.ID
	steps := []struct {
		op     string // "create" or "delete"
		arg    string
		id     uint32
		wantID uint32
		want   error
	}{
		{op: "create", arg: "g0", wantID: 0},
		{op: "create", arg: "g1", wantID: 1},
		{op: "create", arg: "g1", want: ErrGroupExists},
		{op: "delete", id: 0},
		{op: "delete", id: 0, want: ErrGroupNotFound},
		{op: "create", arg: "g0", wantID: 2},
		{op: "delete", id: 2},
		{op: "delete", id: 1},
		{op: "create", arg: "g3", wantID: 3},
	}
	for i, st := range steps {
		switch st.op {
		case "create":
			g, err := s.CreateGroup(sid, tid, st.arg)
			if st.want != nil {
				wantErr(t, err, st.want)
				continue
			}
			check(t, err)
			if g.ID != st.wantID || g.Name != st.arg {
				t.Fatalf("step %d: CreateGroup(%q) = %+v, want id %d", i, st.arg, g, st.wantID)
			}
		case "delete":
			err := s.DeleteGroup(sid, tid, st.id)
			if st.want != nil {
				wantErr(t, err, st.want)
				continue
			}
			check(t, err)
		}
	}
	// The sequence survives a reopen on disk too: see TestReopenRecoversEverything.
	if g := must[Group](t)(s.GroupByName(sid, tid, "g3")); g.ID != 3 {
		t.Fatalf("GroupByName = %+v", g)
	}
	wantErr(t, second(s.Group(sid, tid, 0)), ErrGroupNotFound)
	wantErr(t, second(s.Groups(sid, 9)), ErrTopicNotFound)
	if gs := must[[]Group](t)(s.Groups(sid, tid)); len(gs) != 1 || gs[0].ID != 3 {
		t.Fatalf("Groups = %+v", gs)
	}
}

func TestDeleteStreamRemovesEverything(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 2)
	k := PartitionKey{tp.StreamID, tp.ID, 1}
	must[Appended](t)(s.AppendFunc(k, 3, stamper(fakeBatch(3, 10, 1))))
	g := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g"))
	check(t, s.StoreConsumerOffset(k, Consumer{KindGroup, g.ID}, 2))
	check(t, s.DeleteStream(tp.StreamID))
	// Same ids again: nothing of the old stream may show through.
	tp2 := setupTopic(t, s, 2)
	if tp2.StreamID != tp.StreamID || tp2.ID != tp.ID {
		t.Fatalf("recreated ids %d/%d", tp2.StreamID, tp2.ID)
	}
	if st := must[PartitionStats](t)(s.Stats(k)); st != (PartitionStats{}) {
		t.Fatalf("stats after recreate = %+v", st)
	}
	if r := must[ReadResult](t)(s.Read(k, 0, 10)); len(r.Batches) != 0 {
		t.Fatalf("read after recreate: %d batches", len(r.Batches))
	}
	if g2 := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g")); g2.ID != 0 {
		t.Fatalf("group id in recreated topic = %d, want 0", g2.ID)
	}
	if _, found, err := s.ConsumerOffset(k, Consumer{KindGroup, 0}); err != nil || found {
		t.Fatalf("offset after recreate: found=%v err=%v", found, err)
	}
}
