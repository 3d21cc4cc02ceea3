package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ferryio/ferry/internal/plugintest"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// highestCommitter keeps the highest offset committed per partition.
type highestCommitter struct {
	mu   sync.Mutex
	high map[sdk.Partition]uint64
	n    int
}

func (c *highestCommitter) Commit(p sdk.Partition, off uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.high == nil {
		c.high = map[sdk.Partition]uint64{}
	}
	if prev, ok := c.high[p]; ok && off <= prev {
		return sdk.ErrCommitStale
	}
	c.high[p] = off
	c.n++
	return nil
}

func (c *highestCommitter) get(p sdk.Partition) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.high[p]
	return v, ok
}

func batch(prefix string, from, n int) []sdk.ConsumedMessage {
	out := make([]sdk.ConsumedMessage, n)
	for i := range out {
		out[i] = sdk.ConsumedMessage{Offset: uint64(from + i), Payload: []byte(fmt.Sprintf("%s-%d", prefix, from+i))}
	}
	return out
}

// The committing example commits only after fsync, with the ids it learned from Ferry's
// TopicMetadata extension and the partition from MessagesMetadata.
func TestCommittingSinkExample(t *testing.T) {
	lib := mustLib(t, buildC(t, "example_committing_sink", "../../examples/plugins/c/committing_sink.c"))
	if !lib.SupportsCommit() || lib.Version() != "0.1.0-committing-sink" {
		t.Fatalf("commit %v version %q", lib.SupportsCommit(), lib.Version())
	}
	file := filepath.Join(t.TempDir(), "out.log")
	c := &highestCommitter{}
	s := openSink(t, lib, sdk.SinkEnv{Key: "durable", Config: []byte(fmt.Sprintf(`{"path":%q,"flush_interval_ms":20}`, file)), Committer: c})
	topic := sdk.TopicMetadata{Stream: "st", Topic: "tp", StreamID: 5, TopicID: 6}
	p0 := sdk.Partition{StreamID: 5, TopicID: 6, PartitionID: 0}
	p1 := sdk.Partition{StreamID: 5, TopicID: 6, PartitionID: 1}
	ctx := context.Background()
	if err := s.Consume(ctx, topic, sdk.MessagesMetadata{Partition: p0, CurrentOffset: 100, Schema: sdk.SchemaText}, batch("p0", 0, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, topic, sdk.MessagesMetadata{Partition: p1, CurrentOffset: 100, Schema: sdk.SchemaText}, batch("p1", 0, 3)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "commits of both partitions", func() bool {
		a, okA := c.get(p0)
		b, okB := c.get(p1)
		return okA && okB && a == 4 && b == 2
	})
	// Everything committed is in the file.
	lines := testkit.ReadLines(t, file)
	if len(lines) != 8 || lines[0] != "p0-0" || lines[4] != "p0-4" || lines[7] != "p1-2" {
		t.Fatalf("file = %q", lines)
	}
	// Messages consumed just before close are flushed, fsynced and committed by close.
	if err := s.Consume(ctx, topic, sdk.MessagesMetadata{Partition: p0, CurrentOffset: 100, Schema: sdk.SchemaText}, batch("p0", 5, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.get(p0); v != 6 {
		t.Fatalf("p0 committed %d after close, want 6", v)
	}
	if lines := testkit.ReadLines(t, file); len(lines) != 10 || lines[9] != "p0-6" {
		t.Fatalf("file after close = %q", lines)
	}
}

func TestNullSinkExample(t *testing.T) {
	lib := mustLib(t, buildC(t, "example_null_sink", "../../examples/plugins/c/null_sink.c"))
	s := openSink(t, lib, sdk.SinkEnv{Key: "null", Config: []byte("null")})
	if err := s.Consume(context.Background(), probeTopic, probeMeta, batch("x", 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

func cHeapInUse(t *testing.T) uint64 {
	t.Helper()
	n, ok := plugintest.CHeapInUse()
	if !ok {
		t.Skip("the C allocator's figures cannot be read here (glibc's mallinfo2)")
	}
	return n
}

// goHeapInUse is the Go heap's live bytes after a full collection.
func goHeapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Load/open/consume/close 1000 times: libraries are deduplicated, instances released, so
// neither file descriptors nor memory grow.
func TestLoadOpenCloseNoLeak(t *testing.T) {
	path := buildC(t, "example_null_sink", "../../examples/plugins/c/null_sink.c")
	rust := buildRust(t)
	msgs := batch("m", 0, 10)
	// Every cgo call of the cycles runs on this one OS thread: a new thread's first call
	// allocates that thread's malloc cache and the plugin's thread-local state, which would
	// read as growth.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cycle := func() {
		for _, p := range []string{path, rust} {
			lib, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			s, err := lib.NewSink()
			if err != nil {
				t.Fatal(err)
			}
			cfg := []byte(`{"out":"/dev/null"}`)
			if err := s.Open(context.Background(), sdk.SinkEnv{Key: "loop", Config: cfg, Logger: slog.New(slog.DiscardHandler)}); err != nil {
				t.Fatal(err)
			}
			if err := s.Consume(context.Background(), probeTopic, probeMeta, msgs); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Warm up: allocator arenas, thread caches and the Go heap settle during the first few
	// hundred cycles.
	for i := 0; i < 1000; i++ {
		cycle()
	}
	fds, cHeap, goHeap := fdCount(t), cHeapInUse(t), goHeapInUse()
	for i := 0; i < 1000; i++ {
		cycle()
	}
	if got := fdCount(t); got != fds {
		t.Fatalf("fd count %d -> %d", fds, got)
	}
	// Bytes still allocated, not the resident size: the resident size moves with the
	// allocator's caching and the race detector's shadow memory, this only with memory that
	// was allocated and never freed. One instance kept per cycle would be at least 2000
	// allocations of some tens of bytes; the slack covers the thread caches of the OS threads
	// cgo calls happen to run on.
	const slack = 32 << 10
	if got := cHeapInUse(t); got > cHeap+slack {
		t.Fatalf("C heap in use grew %d -> %d bytes over 1000 cycles", cHeap, got)
	}
	if got := goHeapInUse(); got > goHeap+slack {
		t.Fatalf("Go heap in use grew %d -> %d bytes over 1000 cycles", goHeap, got)
	}
	libsMu.Lock()
	n := 0
	for k := range libs {
		if k == path || k == rust {
			n++
		}
	}
	libsMu.Unlock()
	if n != 2 {
		t.Fatalf("%d cached entries for the two libraries", n)
	}
}
