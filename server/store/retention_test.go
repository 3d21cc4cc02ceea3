package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ferryio/ferry/internal/testkit"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Batches of 10 messages are 200 bytes (fakeBatch: 64-byte header + 136),
// so a 1000-byte segment holds 5 of them: offsets 0..49, 50..99, ...
const (
	segTestSize  = 1000
	segTestCount = 10
	segTestBytes = 200
)

func segTopic(t testing.TB, s *Store, partitions uint32, cfg TopicConfig) Topic {
	t.Helper()
	st := must[Stream](t)(s.CreateStream("s"))
	cfg.Name = "t"
	cfg.SegmentSize = segTestSize
	return must[Topic](t)(s.CreateTopic(st.ID, partitions, cfg))
}

// appendSeg appends n batches of 10 messages, moving clock by step before each.
func appendSeg(t testing.TB, s *Store, k PartitionKey, clock *fakeClock, n int, step time.Duration) {
	t.Helper()
	for range n {
		if clock != nil {
			clock.Advance(step)
		}
		if _, err := s.AppendFunc(k, segTestCount, stamper(fakeBatch(segTestCount, segTestBytes-64, 1))); err != nil {
			t.Fatal(err)
		}
	}
}

func offsetsOf(segs []Segment) [][2]uint64 {
	out := make([][2]uint64, 0, len(segs))
	for _, g := range segs {
		out = append(out, [2]uint64{g.FirstOffset, g.LastOffset})
	}
	return out
}

func wantSegments(t testing.TB, s *Store, k PartitionKey, want [][2]uint64) {
	t.Helper()
	segs := must[[]Segment](t)(s.Segments(k))
	if got := offsetsOf(segs); !reflect.DeepEqual(got, want) {
		t.Fatalf("%v segments %v, want %v", k, got, want)
	}
	st := must[PartitionStats](t)(s.Stats(k))
	if int(st.Segments) != len(want) {
		t.Fatalf("%v stats.Segments %d, want %d", k, st.Segments, len(want))
	}
	var msgs, size uint64
	for _, g := range segs {
		msgs += g.Messages()
		size += g.Size
	}
	if st.Messages != msgs || st.Bytes != size {
		t.Fatalf("%v stats %+v, segments hold %d messages %d bytes", k, st, msgs, size)
	}
	if len(want) > 0 && st.FirstOffset != want[0][0] {
		t.Fatalf("%v first offset %d, want %d", k, st.FirstOffset, want[0][0])
	}
}

func TestSegmentsRotateAtSegmentSizeAndSurviveRestart(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOpts("db", fs))
	tp := segTopic(t, s, 1, TopicConfig{})
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	wantSegments(t, s, k, [][2]uint64{})
	appendSeg(t, s, k, nil, 12, 0)
	want := [][2]uint64{{0, 49}, {50, 99}, {100, 119}}
	wantSegments(t, s, k, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOpts("db", fs))
	wantSegments(t, s, k, want)
	appendSeg(t, s, k, nil, 3, 0)
	wantSegments(t, s, k, [][2]uint64{{0, 49}, {50, 99}, {100, 149}})
}

func TestRetentionExpiryRemovesWholeExpiredSegments(t *testing.T) {
	clock := newFakeClock()
	o := testOpts("db", vfs.NewMem())
	o.Now = clock.Now
	s := mustOpen(t, o)
	tp := segTopic(t, s, 1, TopicConfig{MessageExpiry: uint64(time.Minute.Microseconds())})
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	// Segment 0's newest batch at +5s, segment 1's at +10s, the active one's at +12s.
	appendSeg(t, s, k, clock, 12, time.Second)

	clock.Advance(time.Minute - 8*time.Second) // now +64s: segment 0 is 59s old
	if r := must[Removed](t)(s.EnforceRetention(clock.Now())); r != (Removed{}) {
		t.Fatalf("removed %+v before anything expired", r)
	}
	clock.Advance(time.Second) // +65s: segment 0 is exactly 60s old
	r := must[Removed](t)(s.EnforceRetention(clock.Now()))
	if r != (Removed{Segments: 1, Messages: 50, Bytes: 5 * segTestBytes}) {
		t.Fatalf("removed %+v, want segment 0", r)
	}
	wantSegments(t, s, k, [][2]uint64{{50, 99}, {100, 119}})

	clock.Advance(time.Hour) // everything is expired, but the active segment stays
	r = must[Removed](t)(s.EnforceRetention(clock.Now()))
	if r != (Removed{Segments: 1, Messages: 50, Bytes: 5 * segTestBytes}) {
		t.Fatalf("removed %+v, want segment 1 only", r)
	}
	wantSegments(t, s, k, [][2]uint64{{100, 119}})

	// Reading below the retained range starts at the first retained message.
	res := must[ReadResult](t)(s.Read(k, 0, 5))
	if len(res.Batches) != 1 || res.Batches[0].BaseOffset != 100 {
		t.Fatalf("read from 0: %d batches, first %+v", len(res.Batches), res.Batches)
	}
	if off, found, err := s.OffsetForTimestamp(k, 0); err != nil || !found || off != 100 {
		t.Fatalf("offset for timestamp 0 = %d %v %v, want 100", off, found, err)
	}
	st := must[PartitionStats](t)(s.Stats(k))
	if st.NextOffset != 120 || st.CurrentOffset() != 119 {
		t.Fatalf("stats after removal %+v", st)
	}
	// Appends go on at the next offset.
	appendSeg(t, s, k, clock, 3, time.Second)
	wantSegments(t, s, k, [][2]uint64{{100, 149}})
}

func TestRetentionMaxTopicSizeRemovesOldestSegmentsOfTheTopic(t *testing.T) {
	clock := newFakeClock()
	o := testOpts("db", vfs.NewMem())
	o.Now = clock.Now
	s := mustOpen(t, o)
	// 4 full segments of 1000 bytes fit; the topic holds 2×2 full + 2 active.
	tp := segTopic(t, s, 2, TopicConfig{MaxTopicSize: 4000})
	k0 := PartitionKey{tp.StreamID, tp.ID, 0}
	k1 := PartitionKey{tp.StreamID, tp.ID, 1}
	appendSeg(t, s, k0, clock, 11, time.Second) // 0..49, 50..99, 100..109: 2200 bytes
	appendSeg(t, s, k1, clock, 12, time.Second) // 0..49, 50..99, 100..119: 2400 bytes
	// 4600 > 4000: the topic's oldest segment (partition 0's first) goes.
	r := must[Removed](t)(s.EnforceRetention(clock.Now()))
	if r != (Removed{Segments: 1, Messages: 50, Bytes: 1000}) {
		t.Fatalf("removed %+v", r)
	}
	wantSegments(t, s, k0, [][2]uint64{{50, 99}, {100, 109}})
	wantSegments(t, s, k1, [][2]uint64{{0, 49}, {50, 99}, {100, 119}})

	// 100..149 and 150..159: 4600 again. Partition 0's 50..99 (newest
	// message at +10s) is older than partition 1's 0..49 (+16s).
	appendSeg(t, s, k0, clock, 5, time.Second)
	r = must[Removed](t)(s.EnforceRetention(clock.Now()))
	if r != (Removed{Segments: 1, Messages: 50, Bytes: 1000}) {
		t.Fatalf("removed %+v", r)
	}
	wantSegments(t, s, k0, [][2]uint64{{100, 149}, {150, 159}})
	wantSegments(t, s, k1, [][2]uint64{{0, 49}, {50, 99}, {100, 119}})

	// Far above the limit with only active segments left: they stay.
	if err := s.UpdateTopic(tp.StreamID, tp.ID, TopicConfig{Name: "t", MaxTopicSize: 1, SegmentSize: segTestSize}); err != nil {
		t.Fatal(err)
	}
	r = must[Removed](t)(s.EnforceRetention(clock.Now()))
	if r != (Removed{Segments: 3, Messages: 150, Bytes: 3000}) {
		t.Fatalf("removed %+v", r)
	}
	wantSegments(t, s, k0, [][2]uint64{{150, 159}})
	wantSegments(t, s, k1, [][2]uint64{{100, 119}})
}

func TestRetentionKeepsSegmentsAStoredOffsetHasNotPassed(t *testing.T) {
	clock := newFakeClock()
	o := testOpts("db", vfs.NewMem())
	o.Now = clock.Now
	s := mustOpen(t, o)
	tp := segTopic(t, s, 1, TopicConfig{MessageExpiry: 1})
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	appendSeg(t, s, k, clock, 16, time.Second) // 0..49, 50..99, 100..149, 150..159
	c := Consumer{Kind: KindConsumer, ID: 7}
	if err := s.StoreConsumerOffset(k, c, 30); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if r := must[Removed](t)(s.EnforceRetention(clock.Now())); r != (Removed{}) {
		t.Fatalf("removed %+v past stored offset 30", r)
	}
	// The consumer read through 99: segments 0 and 1 may go, 2 may not.
	if err := s.StoreConsumerOffset(k, c, 99); err != nil {
		t.Fatal(err)
	}
	g := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g"))
	if err := s.StoreConsumerOffset(k, Consumer{Kind: KindGroup, ID: g.ID}, 120); err != nil {
		t.Fatal(err)
	}
	r := must[Removed](t)(s.EnforceRetention(clock.Now()))
	if r.Segments != 2 || r.Messages != 100 {
		t.Fatalf("removed %+v, want segments 0 and 1", r)
	}
	wantSegments(t, s, k, [][2]uint64{{100, 149}, {150, 159}})
	// The consumer resumes at its stored offset + 1, the first retained message.
	if off, found, err := s.ConsumerOffset(k, c); err != nil || !found || off != 99 {
		t.Fatalf("stored offset %d %v %v", off, found, err)
	}
	res := must[ReadResult](t)(s.Read(k, 100, 10))
	if len(res.Batches) != 1 || res.Batches[0].BaseOffset != 100 {
		t.Fatalf("read at 100: %+v", res.Batches)
	}
}

// TestRetentionReclaimsDisk writes 8 MiB of incompressible batches in 1 MiB
// segments on disk, expires all but the active segment and checks that the
// directory shrinks by at least the removed bytes' worth, then that a purge
// gives back the rest.
func TestRetentionReclaimsDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 8 MiB")
	}
	clock := newFakeClock()
	dir := t.TempDir()
	o := testOpts(dir, nil)
	o.Now = clock.Now
	s := mustOpen(t, o)
	st := must[Stream](t)(s.CreateStream("s"))
	tp := must[Topic](t)(s.CreateTopic(st.ID, 1, TopicConfig{Name: "t", SegmentSize: 1 << 20, MessageExpiry: uint64(time.Minute.Microseconds())}))
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	rng := rand.New(rand.NewPCG(3, 4))
	const batches = 64 // 64 × 128 KiB = 8 MiB, 8 segments
	for range batches {
		clock.Advance(time.Millisecond)
		data := make([]byte, 128<<10)
		for i := 64; i < len(data); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8 && i+j < len(data); j++ {
				data[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := s.AppendFunc(k, 100, stamper(data)); err != nil {
			t.Fatal(err)
		}
	}
	if n := must[PartitionStats](t)(s.Stats(k)).Segments; n != 8 {
		t.Fatalf("%d segments, want 8", n)
	}
	if err := s.db.Flush(); err != nil { // the data is on disk, not only in the log
		t.Fatal(err)
	}
	before := diskUsage(t, dir)
	clock.Advance(time.Hour)
	r := must[Removed](t)(s.EnforceRetention(clock.Now()))
	if r.Segments != 7 || r.Bytes != 7<<20 {
		t.Fatalf("removed %+v, want 7 segments of 1 MiB", r)
	}
	// Pebble deletes the files a compaction made obsolete in the background.
	after := duBelow(t, dir, before-int64(r.Bytes)*9/10)
	t.Logf("disk: %d bytes before removal, %d after", before, after)
	if err := s.PurgeTopic(tp.StreamID, tp.ID); err != nil {
		t.Fatal(err)
	}
	purged := duBelow(t, dir, after-(1<<20)*9/10)
	t.Logf("disk after purge: %d bytes", purged)
	wantSegments(t, s, k, [][2]uint64{})
}

// duBelow waits up to 10 s for the disk usage of dir to fall to limit or
// below and returns it.
func duBelow(t *testing.T, dir string, limit int64) int64 {
	t.Helper()
	var du int64
	testkit.WaitFor(t, fmt.Sprintf("the disk usage of %s to fall to %d bytes", dir, limit), func() bool {
		du = diskUsage(t, dir)
		return du <= limit
	})
	return du
}
