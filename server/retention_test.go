package server_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
	"github.com/ferryio/ferry/server/store"
)

// fakeClock is the server's clock in retention tests: it moves only by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

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

// startRetention starts a server on a fake clock with the background cleaner off:
// the test runs each pass with EnforceRetention.
func startRetention(t *testing.T) (*server.Server, *fakeClock) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.Now = clock.Now
		c.RetentionInterval = -1
	}))
	return s, clock
}

// A batch of 10 messages of 12 KiB is ~121 KiB: a 1 MiB segment closes after 9
// batches, so segments hold offsets 0..89, 90..179, 180...
var bigPayloads = func() []string {
	out := make([]string, 10)
	for i := range out {
		out[i] = strings.Repeat(string(rune('a'+i)), 12<<10)
	}
	return out
}()

func createRetentionTopic(c *tclient, opts ...wire.KV) (wire.Identifier, wire.Identifier) {
	c.must(wire.CreateStreamRequest{Name: "s"})
	opts = append(opts, wire.StringKV(wire.OptSegmentSize, wire.Uint64Value(1<<20)))
	c.must(wire.CreateTopicRequest{Stream: wire.NamedID("s"), PartitionsCount: 1, Name: "t", Options: opts})
	return wire.NamedID("s"), wire.NamedID("t")
}

func sendBig(c *tclient, clock *fakeClock, st, tp wire.Identifier, batches int) {
	for range batches {
		clock.Advance(time.Second)
		c.send(st, tp, wire.ToPartition(0), bigPayloads...)
	}
}

func partitionOf(t *testing.T, c *tclient, st, tp wire.Identifier) wire.PartitionResponse {
	t.Helper()
	d, found, err := wire.DecodeTopicDetails(c.must(wire.GetTopicRequest{Stream: st, Topic: tp}))
	if err != nil || !found || len(d.Partitions) != 1 {
		t.Fatalf("get topic: %v %v %+v", found, err, d)
	}
	return d.Partitions[0]
}

func enforce(t *testing.T, s *server.Server, want store.Removed) {
	t.Helper()
	r, err := s.EnforceRetention(context.Background())
	if err != nil || r.Segments != want.Segments || r.Messages != want.Messages {
		t.Fatalf("retention removed %+v (%v), want %d segments, %d messages", r, err, want.Segments, want.Messages)
	}
}

func span(first, last uint64) []uint64 {
	out := make([]uint64, 0, last-first+1)
	for o := first; o <= last; o++ {
		out = append(out, o)
	}
	return out
}

// TestRetentionExpiryWithConsumers: message_expiry removes whole segments, never past
// the group's stored offset; the group resumes past a removed segment, polls below
// the retained range get its first message, and a stored offset below it still works.
func TestRetentionExpiryWithConsumers(t *testing.T) {
	s, clock := startRetention(t)
	c := login(t, s)
	st, tp := createRetentionTopic(c, wire.StringKV(wire.OptMessageExpiry, wire.Uint64Value(uint64(time.Minute.Microseconds()))))
	sendBig(c, clock, st, tp, 20) // offsets 0..199
	if p := partitionOf(t, c, st, tp); p.SegmentsCount != 3 || p.MessagesCount != 200 || p.CurrentOffset != 199 {
		t.Fatalf("before retention %+v", p)
	}
	c.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"})
	c.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	groupNext := func(count uint32) []uint64 {
		return c.poll(wire.PollMessagesRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0),
			Strategy: wire.PollNext(), Count: count, AutoCommit: true}).offsets
	}
	if got := groupNext(90); !reflect.DeepEqual(got, span(0, 89)) {
		t.Fatalf("group polled %v", got)
	}

	clock.Advance(time.Hour) // every segment is expired
	// Segment 0 goes; segment 1 holds offsets the group has not read; the active stays.
	enforce(t, s, store.Removed{Segments: 1, Messages: 90})
	if p := partitionOf(t, c, st, tp); p.SegmentsCount != 2 || p.MessagesCount != 110 || p.CurrentOffset != 199 {
		t.Fatalf("after removing segment 0 %+v", p)
	}
	for _, strategy := range []wire.PollingStrategy{wire.PollOffset(0), wire.PollFirst(), wire.PollOffset(89)} {
		got := c.poll(wire.PollMessagesRequest{Consumer: single(5), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: strategy, Count: 3})
		if !reflect.DeepEqual(got.offsets, []uint64{90, 91, 92}) || got.head.CurrentOffset != 199 {
			t.Fatalf("poll %+v: %v (current %d)", strategy, got.offsets, got.head.CurrentOffset)
		}
	}
	// The group resumes at its stored offset + 1, the first message of segment 1.
	if got := groupNext(90); !reflect.DeepEqual(got, span(90, 179)) {
		t.Fatalf("group resumed at %v", got)
	}
	enforce(t, s, store.Removed{Segments: 1, Messages: 90})
	if p := partitionOf(t, c, st, tp); p.SegmentsCount != 1 || p.MessagesCount != 20 {
		t.Fatalf("after removing segment 1 %+v", p)
	}
	// A consumer whose stored offset is below the retained range resumes at its start.
	late := wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NamedID("late")}
	c.must(wire.StoreConsumerOffsetRequest{Consumer: late, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: 10})
	got := c.poll(wire.PollMessagesRequest{Consumer: late, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollNext(), Count: 5, AutoCommit: true})
	if !reflect.DeepEqual(got.offsets, span(180, 184)) {
		t.Fatalf("late consumer polled %v", got.offsets)
	}
	// The active segment is never removed, however old.
	clock.Advance(24 * time.Hour)
	enforce(t, s, store.Removed{})
	sendBig(c, clock, st, tp, 1)
	if p := partitionOf(t, c, st, tp); p.SegmentsCount != 1 || p.MessagesCount != 30 || p.CurrentOffset != 209 {
		t.Fatalf("after a new send %+v", p)
	}
}

// TestRetentionMaxTopicSize: above max_topic_size the oldest segments go until the
// topic fits; purge empties the topic and keeps one (empty) segment.
func TestRetentionMaxTopicSize(t *testing.T) {
	s, clock := startRetention(t)
	c := login(t, s)
	st, tp := createRetentionTopic(c, wire.StringKV(wire.OptMaxTopicSize, wire.Uint64Value(2<<20)))
	sendBig(c, clock, st, tp, 25) // 0..89, 90..179, 180..249: ~2.9 MiB
	enforce(t, s, store.Removed{Segments: 1, Messages: 90})
	p := partitionOf(t, c, st, tp)
	if p.SegmentsCount != 2 || p.MessagesCount != 160 || p.CurrentOffset != 249 || p.SizeBytes > 2<<20 {
		t.Fatalf("after retention %+v", p)
	}
	got := c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollFirst(), Count: 1})
	if !reflect.DeepEqual(got.offsets, []uint64{90}) {
		t.Fatalf("first retained %v", got.offsets)
	}
	enforce(t, s, store.Removed{}) // within the limit now
	c.must(wire.PurgeTopicRequest{Stream: st, Topic: tp})
	if p := partitionOf(t, c, st, tp); p.SegmentsCount != 1 || p.MessagesCount != 0 || p.SizeBytes != 0 {
		t.Fatalf("after purge %+v", p)
	}
}

func TestRetentionIntervalDefault(t *testing.T) {
	if server.DefaultRetentionInterval != time.Minute {
		t.Fatalf("default retention interval %v, Iggy's is 1 minute", server.DefaultRetentionInterval)
	}
}
