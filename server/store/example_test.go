package store_test

import (
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ferryio/ferry/server/store"
)

func Example() {
	s, err := store.Open(store.Options{Dir: "db", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	st, _ := s.CreateStream("orders")
	tp, _ := s.CreateTopic(st.ID, 1, store.TopicConfig{Name: "created"})
	k := store.PartitionKey{Stream: st.ID, Topic: tp.ID, Partition: 0}

	batch := make([]byte, 256+10) // stands in for an Iggy batch of 3 messages
	for range 2 {
		a, err := s.AppendFunc(k, 3, func(base, ts uint64) ([]byte, error) {
			binary.LittleEndian.PutUint64(batch[8:], base) // the server stamps the header
			binary.LittleEndian.PutUint64(batch[16:], ts)
			return batch, nil
		})
		if err != nil {
			panic(err)
		}
		fmt.Println("appended at", a.BaseOffset)
	}
	r, _ := s.Read(k, 4, 10)
	fmt.Println("current offset", r.Stats.CurrentOffset(), "batches from", r.Batches[0].BaseOffset)
	// Output:
	// appended at 0
	// appended at 3
	// current offset 5 batches from 3
}
