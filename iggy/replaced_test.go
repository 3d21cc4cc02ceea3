package iggy_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// TestConsumerRecreatedTopic is the regression test of "a recreated topic is silently
// skipped": a member that had polled and stored offsets 0..49 of each partition kept
// polling from 50 after the topic was deleted and created again under the same name
// (same id, a new group with the same name and generation), so the new topic's offsets
// 0..49 were never delivered. Now, while the topic is gone, Poll fails with
// TopicIdNotFound; once it is back, the member rejoins, sees the new creation time,
// reports every partition revoked and assigned again with the replacement, delivers
// exactly 0..79 of each new partition, and refuses to store an offset of the old topic.
func TestConsumerRecreatedTopic(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s)
	setup(t, c, 2)
	fill(t, c, []uint32{0, 1}, 0, 50)
	var mu sync.Mutex
	var changes []iggy.AssignmentChange
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g", BatchSize: 20,
		OnAssignmentChange: func(ch iggy.AssignmentChange) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, ch)
		}})
	got := drain(t, cn, 100)
	if !slices.Equal(got[0], seq(0, 50)) || !slices.Equal(got[1], seq(0, 50)) {
		t.Fatalf("old topic: %v", got)
	}
	for _, p := range []uint32{0, 1} {
		if err := cn.StoreOffsetIn(testCtx(t), 0, p, 49); err != nil {
			t.Fatalf("store partition %d of the old topic: %v", p, err)
		}
	}
	old, life := cn.Topic()
	if life != 0 {
		t.Fatalf("incarnation %d before any replacement", life)
	}
	if err := c.DeleteTopic(testCtx(t), sID, tID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b, err := cn.Poll(ctx); !errors.Is(err, wire.ErrTopicIDNotFound) {
		t.Fatalf("poll of the deleted topic: batch %v, error %v; want TopicIdNotFound", b, err)
	}
	created, err := c.CreateTopic(testCtx(t), sID, "t", 2)
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != old.ID || created.CreatedAt == old.CreatedAt {
		t.Fatalf("new topic id %d created_at %d, old %+v: want the id reused and a new creation time", created.ID, created.CreatedAt, old)
	}
	fill(t, c, []uint32{0, 1}, 0, 80)
	got = drain(t, cn, 160)
	if !slices.Equal(got[0], seq(0, 80)) || !slices.Equal(got[1], seq(0, 80)) {
		t.Fatalf("new topic delivered %v, want 0..79 of each partition", got)
	}
	mu.Lock()
	last := changes[len(changes)-1]
	mu.Unlock()
	want := iggy.TopicReplacement{Old: old, New: iggy.TopicIdentity{ID: created.ID, CreatedAt: created.CreatedAt}}
	if last.Replaced == nil || *last.Replaced != want || last.Incarnation != 1 ||
		!slices.Equal(last.Revoked, []uint32{0, 1}) || !slices.Equal(last.Assigned, []uint32{0, 1}) {
		t.Fatalf("last change %+v (replaced %+v), want both partitions revoked and assigned with %+v, incarnation 1", last, last.Replaced, want)
	}
	if id, life := cn.Topic(); id != want.New || life != 1 {
		t.Fatalf("Topic() = %+v, %d", id, life)
	}
	if err := cn.StoreOffsetIn(testCtx(t), 0, 0, 49); !errors.Is(err, iggy.ErrTopicReplaced) {
		t.Fatalf("store of an old topic's offset: %v, want ErrTopicReplaced", err)
	}
	if err := cn.StoreOffsetIn(testCtx(t), 1, 0, 79); err != nil {
		t.Fatalf("store of the new topic's offset: %v", err)
	}
	o, found, err := c.GetOffset(testCtx(t), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}, sID, tID, 0)
	if err != nil || !found || o.StoredOffset != 79 {
		t.Fatalf("stored offset of the new group = %+v found %v, %v; want 79", o, found, err)
	}
}

// TestStoreAcrossReconnectToReplacedTopic: the member's connection dies (the server is
// replaced by one on the same address whose topic "t" is new, with messages 0..79) while
// the member still holds an offset of the old topic. The store of that offset reconnects,
// the rejoin finds the topic replaced, and the store is not sent (ErrTopicReplaced): the
// new group stores nothing, and Poll then delivers exactly 0..79 of the new topic.
// Without that, the old offset 49 would have been stored into the new group (the member
// joined it on reconnecting) and the new topic's 0..49 skipped.
func TestStoreAcrossReconnectToReplacedTopic(t *testing.T) {
	s := servertest.Start(t, servertest.WithDataDir(t.TempDir()))
	// No background sync: the store is the first request after the server went away.
	c := dial(t, s, iggy.WithReconnect(10*time.Millisecond, 100*time.Millisecond, 0),
		iggy.WithHeartbeat(time.Hour), iggy.WithAssignmentSync(time.Hour))
	setup(t, c, 1)
	fill(t, c, []uint32{0}, 0, 50)
	cn := newConsumer(t, c, iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	if got := drain(t, cn, 50); !slices.Equal(got[0], seq(0, 50)) {
		t.Fatalf("old topic: %v", got)
	}
	addr := s.Addr()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	servertest.Start(t, servertest.WithDataDir(t.TempDir()), servertest.WithConfig(func(c *server.Config) { c.Addr = addr }))
	setup(t, c, 1)
	fill(t, c, []uint32{0}, 0, 80)
	if err := cn.StoreOffsetIn(testCtx(t), 0, 0, 49); !errors.Is(err, iggy.ErrTopicReplaced) {
		t.Fatalf("store of the old topic's offset across the reconnect: %v, want ErrTopicReplaced", err)
	}
	if o, found, err := c.GetOffset(testCtx(t), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("g")}, sID, tID, 0); err != nil || found {
		t.Fatalf("the new group's offset: %+v found %v, %v; want none", o, found, err)
	}
	if got := drain(t, cn, 80); !slices.Equal(got[0], seq(0, 80)) {
		t.Fatalf("new topic delivered %v, want 0..79", got)
	}
}

// TestSeekBeforeReplacementReported: the member found its topic replaced (a Resync
// rejoined) but has not reported it yet when the caller, still thinking of the old topic,
// seeks partition 0 to 40 (as the runtime gives back a batch it polled while paused). The
// seek belongs to the old assignment and does not move the new one: Poll delivers
// exactly 0..79 of the new topic.
func TestSeekBeforeReplacementReported(t *testing.T) {
	s := servertest.Start(t)
	c := dial(t, s, iggy.WithHeartbeat(time.Hour), iggy.WithAssignmentSync(time.Hour))
	setup(t, c, 1)
	fill(t, c, []uint32{0}, 0, 50)
	cfg, log := watched(iggy.ConsumerConfig{Stream: sID, Topic: tID, Group: "g"})
	cn := newConsumer(t, c, cfg)
	if got := drain(t, cn, 50); !slices.Equal(got[0], seq(0, 50)) {
		t.Fatalf("old topic: %v", got)
	}
	if err := c.DeleteTopic(testCtx(t), sID, tID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(testCtx(t), sID, "t", 1); err != nil {
		t.Fatal(err)
	}
	fill(t, c, []uint32{0}, 0, 80)
	if err := cn.Resync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, life := cn.Topic(); life != 1 {
		t.Fatalf("incarnation %d after the resync, want 1", life)
	}
	cn.Seek(0, 40)
	if got := drain(t, cn, 80); !slices.Equal(got[0], seq(0, 80)) {
		t.Fatalf("new topic delivered %v, want 0..79", got)
	}
	log.want(t, "the whole run", change(nil, []uint32{0}), change([]uint32{0}, []uint32{0}))
}
