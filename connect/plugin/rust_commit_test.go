package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// recordingCommitter accepts every commit and records it as "stream/topic/partition@offset".
type recordingCommitter struct {
	mu      sync.Mutex
	commits []string
}

func (c *recordingCommitter) Commit(p sdk.Partition, offset uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits = append(c.commits, fmt.Sprintf("%d/%d/%d@%d", p.StreamID, p.TopicID, p.PartitionID, offset))
	return nil
}

func (c *recordingCommitter) has(s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.commits, s)
}

func (c *recordingCommitter) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.commits)
}

// TestRustCommitHandleByName runs the Rust test plugin's committing sink, which commits the
// way a plugin built with Iggy's SDK must: by the stream and topic NAMES, through the
// ferry-commit crate, which learned their ids from iggy_sink_set_topic_ids before the first
// batch of each topic. The sink fails a batch whose announced ids differ from the ids
// appended to the raw TopicMetadata, so a successful consume proves the announcement came
// first and was right; each commit carries the ids of its own topic and names the highest
// offset written and fsynced.
func TestRustCommitHandleByName(t *testing.T) {
	lib := mustLib(t, buildRust(t))
	out := filepath.Join(t.TempDir(), "out.log")
	c := &recordingCommitter{}
	s := openSink(t, lib, sdk.SinkEnv{Key: "rustcommit", Committer: c,
		Config: []byte(fmt.Sprintf(`{"path":%q,"flush_interval_ms":5}`, out))})
	if !lib.SupportsCommit() {
		t.Fatal("the Rust test plugin does not export iggy_sink_set_commit_callback")
	}

	events := sdk.TopicMetadata{Stream: "orders", Topic: "events", StreamID: 7, TopicID: 300}
	audit := sdk.TopicMetadata{Stream: "orders", Topic: "audit", StreamID: 7, TopicID: 301}
	batch := func(topic sdk.TopicMetadata, partition uint32, first uint64, payloads ...string) {
		t.Helper()
		msgs := make([]sdk.ConsumedMessage, len(payloads))
		for i, p := range payloads {
			msgs[i] = sdk.ConsumedMessage{Offset: first + uint64(i), Payload: []byte(p)}
		}
		meta := sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: topic.StreamID, TopicID: topic.TopicID, PartitionID: partition}, Schema: sdk.SchemaText}
		if err := s.Consume(context.Background(), topic, meta, msgs); err != nil {
			t.Fatalf("consume %s/%s p%d @%d: %v", topic.Stream, topic.Topic, partition, first, err)
		}
	}
	batch(events, 2, 10, "e10", "e11", "e12")
	testkit.WaitFor(t, "commit 7/300/2@12", func() bool { return c.has("7/300/2@12") })
	batch(events, 2, 13, "e13", "e14")
	batch(audit, 0, 4, "a4", "a5")
	testkit.WaitFor(t, "commits 7/300/2@14 and 7/301/0@5", func() bool { return c.has("7/300/2@14") && c.has("7/301/0@5") })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := testkit.ReadLines(t, out); !reflect.DeepEqual(got, []string{"e10", "e11", "e12", "e13", "e14", "a4", "a5"}) &&
		!reflect.DeepEqual(got, []string{"e10", "e11", "e12", "a4", "a5", "e13", "e14"}) {
		t.Fatalf("file = %q", got)
	}
	for _, cm := range c.got() {
		if !slices.Contains([]string{"7/300/2@12", "7/300/2@14", "7/301/0@5"}, cm) {
			t.Fatalf("unexpected commit %s (all: %q)", cm, c.got())
		}
	}
}

// TestSetTopicIDsOncePerInstance: Ferry announces a topic's ids once per open instance, and
// again after a reopen (a new instance id), so the plugin's commits by name keep working
// across a restart.
func TestSetTopicIDsOncePerInstance(t *testing.T) {
	lib := mustLib(t, buildRust(t))
	dir := t.TempDir()
	topic := sdk.TopicMetadata{Stream: "s", Topic: "t", StreamID: 3, TopicID: 4}
	meta := sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: 3, TopicID: 4, PartitionID: 1}, Schema: sdk.SchemaText}
	c := &recordingCommitter{}
	s, err := lib.NewSink()
	if err != nil {
		t.Fatal(err)
	}
	for run, off := range []uint64{0, 1} {
		env := sdk.SinkEnv{Key: "reopen", Committer: c,
			Config: []byte(fmt.Sprintf(`{"path":%q,"flush_interval_ms":5}`, filepath.Join(dir, "out")))}
		if err := s.Open(context.Background(), env); err != nil {
			t.Fatal(err)
		}
		if err := s.Consume(context.Background(), topic, meta, []sdk.ConsumedMessage{{Offset: off, Payload: []byte("x")}}); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		want := fmt.Sprintf("3/4/1@%d", off)
		testkit.WaitFor(t, want, func() bool { return c.has(want) })
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
