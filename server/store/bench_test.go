package store

import (
	"fmt"
	"testing"
)

// BenchmarkAppend appends 1000-message batches of ~100 KB and ~1 MB to one
// partition on disk, syncing every batch (always) or on an interval.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval} {
		for _, size := range []int{100 << 10, 1 << 20} {
			name := fmt.Sprintf("%s/%dKB", map[FsyncPolicy]string{FsyncAlways: "always", FsyncInterval: "interval"}[policy], size>>10)
			b.Run(name, func(b *testing.B) {
				o := testOpts(b.TempDir(), nil)
				o.Fsync = policy
				s := mustOpen(b, o)
				tp := setupTopic(b, s, 1)
				k := PartitionKey{tp.StreamID, tp.ID, 0}
				data := fakeBatch(1000, size-64, 1)
				b.SetBytes(int64(len(data)))
				b.ResetTimer()
				for b.Loop() {
					if _, err := s.AppendFunc(k, 1000, stamper(data)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRead reads one 1000-message batch at a time from a partition of
// 64 batches (~100 KB and ~1 MB each), copying it out of Pebble.
func BenchmarkRead(b *testing.B) {
	for _, size := range []int{100 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			o := testOpts(b.TempDir(), nil)
			o.Fsync = FsyncInterval
			s := mustOpen(b, o)
			tp := setupTopic(b, s, 1)
			k := PartitionKey{tp.StreamID, tp.ID, 0}
			const batches = 64
			for range batches {
				if _, err := s.AppendFunc(k, 1000, stamper(fakeBatch(1000, size-64, 1))); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			i := 0
			for b.Loop() {
				r, err := s.Read(k, uint64(i%batches)*1000, 1000)
				if err != nil || len(r.Batches) != 1 {
					b.Fatalf("read: %v, %d batches", err, len(r.Batches))
				}
				i++
			}
		})
	}
}
