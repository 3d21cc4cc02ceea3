package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

func mustLib(t *testing.T, path string) *Library {
	t.Helper()
	lib, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

func openSink(t *testing.T, lib *Library, env sdk.SinkEnv) *Sink {
	t.Helper()
	s, err := lib.NewSink()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func cmds(cmd ...string) []sdk.ConsumedMessage {
	out := make([]sdk.ConsumedMessage, len(cmd))
	for i, c := range cmd {
		out[i] = sdk.ConsumedMessage{Offset: uint64(i), Payload: []byte(c)}
	}
	return out
}

var (
	probeTopic = sdk.TopicMetadata{Stream: "s", Topic: "t", StreamID: 1, TopicID: 2}
	probeMeta  = sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: 3}, Schema: sdk.SchemaText}
)

// What the Rust plugin (upstream struct layouts, postcard::from_bytes) wrote for a batch.
type decodedBatch struct {
	PluginID      uint32 `json:"plugin_id"`
	Stream        string `json:"stream"`
	Topic         string `json:"topic"`
	TopicMetaLen  int    `json:"topic_meta_len"`
	PartitionID   uint32 `json:"partition_id"`
	CurrentOffset uint64 `json:"current_offset"`
	Schema        int    `json:"schema"`
	RawSchema     int    `json:"raw_schema"`
	Error         string `json:"error"`
	Messages      []struct {
		ID              string `json:"id"`
		Offset          uint64 `json:"offset"`
		Checksum        uint64 `json:"checksum"`
		Timestamp       uint64 `json:"timestamp"`
		OriginTimestamp uint64 `json:"origin_timestamp"`
		Headers         []struct {
			Key, Value struct {
				Kind  int   `json:"kind"`
				Value []int `json:"value"`
			}
		} `json:"headers"`
		Payload []byte `json:"-"`
		RawPay  []int  `json:"payload"`
	} `json:"messages"`
}

// The golden test against a real Rust plugin: every field Ferry encodes is decoded by
// postcard 1.1 with the upstream layouts, including a TopicMetadata carrying Ferry's
// appended ids that the plugin's two-field struct does not know about.
func TestRustSinkDecodesFerryBuffers(t *testing.T) {
	lib := mustLib(t, buildRust(t))
	out := filepath.Join(t.TempDir(), "decoded.jsonl")
	logs := newLogRecorder()
	s := openSink(t, lib, sdk.SinkEnv{Key: "golden", Config: []byte(fmt.Sprintf(`{"out":%q}`, out)),
		Logger: slog.New(logs).With("connector", "golden")})

	// The plugin logged from inside open, through this library's trampoline, to our logger.
	rec, ok := logs.find(fmt.Sprintf("opened sink id=%d", s.ID()))
	if !ok || rec.Level != slog.LevelInfo || rec.Attrs["connector"] != "golden" || rec.Attrs["target"] != "ferry_test_plugin" {
		t.Fatalf("open log line: %+v %v", rec, ok)
	}

	id := sdk.MessageID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	lo, hi := id.Halves()
	topic := sdk.TopicMetadata{Stream: "orders", Topic: "events", StreamID: 7, TopicID: 300}
	meta := sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: 7, TopicID: 300, PartitionID: 2}, CurrentOffset: 99, Schema: sdk.SchemaJSON}
	msgs := []sdk.ConsumedMessage{
		{ID: id, Offset: 97, Checksum: 0xdeadbeef, Timestamp: 1_700_000_000_000_000, OriginTimestamp: 1_600_000_000_000_001,
			Headers: []sdk.Header{
				{Key: sdk.String("n"), Value: sdk.HeaderField{Kind: sdk.HeaderUint32, Value: []byte{7, 0, 0, 0}}},
				{Key: sdk.String("k"), Value: sdk.String("v")},
			},
			Payload: []byte(`{"a":1}`)},
		{ID: sdk.MessageIDFromUint64(5), Offset: 98, Payload: []byte(`{}`)},
	}
	if err := s.Consume(context.Background(), topic, meta, msgs); err != nil {
		t.Fatal(err)
	}
	lines := testkit.ReadLines(t, out)
	if len(lines) != 1 {
		t.Fatalf("lines = %q", lines)
	}
	var d decodedBatch
	if err := json.Unmarshal([]byte(lines[0]), &d); err != nil {
		t.Fatal(err)
	}
	if d.Error != "" {
		t.Fatalf("plugin failed to decode: %s", d.Error)
	}
	// 7+7 bytes of names, then Ferry's ids 07 and ac 02 that the plugin never reads.
	if d.PluginID != s.ID() || d.Stream != "orders" || d.Topic != "events" || d.TopicMetaLen != 17 ||
		d.PartitionID != 2 || d.CurrentOffset != 99 || d.Schema != 0 || d.RawSchema != 0 || len(d.Messages) != 2 {
		t.Fatalf("decoded = %+v", d)
	}
	m0, m1 := d.Messages[0], d.Messages[1]
	wantID := u128String(lo, hi)
	if m0.ID != wantID || m0.Offset != 97 || m0.Checksum != 0xdeadbeef || m0.Timestamp != 1_700_000_000_000_000 ||
		m0.OriginTimestamp != 1_600_000_000_000_001 || !reflect.DeepEqual(m0.RawPay, bytesToInts(`{"a":1}`)) {
		t.Fatalf("message 0 = %+v (want id %s)", m0, wantID)
	}
	// Headers come back in BTreeMap order (k before n), kinds as 0-based indexes.
	if len(m0.Headers) != 2 ||
		m0.Headers[0].Key.Kind != 1 || !reflect.DeepEqual(m0.Headers[0].Key.Value, []int{'k'}) ||
		m0.Headers[0].Value.Kind != 1 || !reflect.DeepEqual(m0.Headers[0].Value.Value, []int{'v'}) ||
		m0.Headers[1].Key.Kind != 1 || !reflect.DeepEqual(m0.Headers[1].Key.Value, []int{'n'}) ||
		m0.Headers[1].Value.Kind != 10 || !reflect.DeepEqual(m0.Headers[1].Value.Value, []int{7, 0, 0, 0}) {
		t.Fatalf("headers = %+v", m0.Headers)
	}
	if m1.ID != "5" || m1.Offset != 98 || m1.Headers != nil || !reflect.DeepEqual(m1.RawPay, bytesToInts(`{}`)) {
		t.Fatalf("message 1 = %+v", m1)
	}

	// A batch with zero messages is passed through.
	if err := s.Consume(context.Background(), topic, meta, nil); err != nil {
		t.Fatal(err)
	}
	if lines := testkit.ReadLines(t, out); len(lines) != 2 || !strings.Contains(lines[1], `"messages":[]`) {
		t.Fatalf("empty batch: %q", lines)
	}

	// A plugin whose consume fails (returns 1) gives ErrPluginFailed.
	failing := openSink(t, lib, sdk.SinkEnv{Key: "failing", Config: []byte(fmt.Sprintf(`{"out":%q,"fail_consume":true}`, out))})
	err := failing.Consume(context.Background(), topic, meta, msgs)
	var ce *CallError
	if !errors.Is(err, ErrPluginFailed) || !errors.As(err, &ce) || ce.Code != 1 || ce.ID != failing.ID() {
		t.Fatalf("fail_consume: %v", err)
	}
	// A config the plugin cannot parse: open fails with ErrPluginRejected (-1).
	bad, _ := lib.NewSink()
	if err := bad.Open(context.Background(), sdk.SinkEnv{Key: "bad", Config: []byte("null")}); !errors.Is(err, ErrPluginRejected) {
		t.Fatalf("null config: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(context.Background(), topic, meta, msgs); !errors.Is(err, ErrClosed) {
		t.Fatalf("consume after close: %v", err)
	}
}

func u128String(lo, hi uint64) string {
	v := new(big.Int).Lsh(new(big.Int).SetUint64(hi), 64)
	return v.Or(v, new(big.Int).SetUint64(lo)).String()
}

func bytesToInts(s string) []int {
	out := make([]int, len(s))
	for i := range s {
		out[i] = int(s[i])
	}
	return out
}

// testCommitter answers by offset so one batch can provoke every return code.
type testCommitter struct {
	mu      sync.Mutex
	commits []string
}

func (c *testCommitter) Commit(p sdk.Partition, offset uint64) error {
	c.mu.Lock()
	c.commits = append(c.commits, fmt.Sprintf("%d/%d/%d@%d", p.StreamID, p.TopicID, p.PartitionID, offset))
	c.mu.Unlock()
	switch offset {
	case 20:
		return fmt.Errorf("p: %w", sdk.ErrCommitStale)
	case 30:
		return fmt.Errorf("p: %w", sdk.ErrCommitOutOfRange)
	case 40:
		return fmt.Errorf("p: %w", sdk.ErrCommitUnknownPartition)
	case 50:
		return errors.New("disk on fire")
	case 60:
		panic("committer bug")
	}
	return nil
}

func (c *testCommitter) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.commits...)
}

func TestCommitCallbackCodes(t *testing.T) {
	lib := mustLib(t, probe(t, "probe_sink"))
	out := filepath.Join(t.TempDir(), "out")
	cfg := []byte(fmt.Sprintf(`{"out":%q}`, out))
	ca, cb := &testCommitter{}, &testCommitter{}
	a := openSink(t, lib, sdk.SinkEnv{Key: "a", Config: cfg, Committer: ca})
	b := openSink(t, lib, sdk.SinkEnv{Key: "b", Config: cfg, Committer: cb})
	if a.ID() == 0 || b.ID() <= a.ID() {
		t.Fatalf("ids a=%d b=%d: want increasing, non-zero", a.ID(), b.ID())
	}
	err := a.Consume(context.Background(), probeTopic, probeMeta, cmds(
		"commit 1 2 3 10", "commit 1 2 3 20", "commit 1 2 3 30", "commit 1 2 3 40", "commit 1 2 3 50", "commit 1 2 3 60"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"commit 0", "commit -2", "commit -3", "commit -1", "commit -4", "commit -4"}
	if got := testkit.ReadLines(t, out); !reflect.DeepEqual(got, want) {
		t.Fatalf("codes = %q, want %q", got, want)
	}
	if got := ca.got(); !reflect.DeepEqual(got, []string{"1/2/3@10", "1/2/3@20", "1/2/3@30", "1/2/3@40", "1/2/3@50", "1/2/3@60"}) {
		t.Fatalf("committer saw %q", got)
	}
	// After a's close its routing is gone: a commit in a's name (sent by b's consume, the
	// plugin keeps the callback) returns -1 and reaches nobody.
	aID := a.ID()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Consume(context.Background(), probeTopic, probeMeta, cmds(fmt.Sprintf("commit-as %d 1 2 3 70", aID), "commit 1 2 3 71")); err != nil {
		t.Fatal(err)
	}
	if got := testkit.ReadLines(t, out)[6:]; !reflect.DeepEqual(got, []string{"commit -1", "commit 0"}) {
		t.Fatalf("after close = %q", got)
	}
	if len(ca.got()) != 6 || !reflect.DeepEqual(cb.got(), []string{"1/2/3@71"}) {
		t.Fatalf("a saw %q, b saw %q", ca.got(), cb.got())
	}
	if code := commit(aID, sdk.Partition{}, 1); code != commitUnknown {
		t.Fatalf("direct commit after close = %d", code)
	}
}

func TestSinkControlledRefusedWithoutSymbol(t *testing.T) {
	path := probe(t, "probe_nocommit", "NO_COMMIT")
	lib := mustLib(t, path)
	if lib.SupportsCommit() {
		t.Fatal("SupportsCommit = true")
	}
	s, _ := lib.NewSink()
	err := s.Open(context.Background(), sdk.SinkEnv{Key: "k", Config: []byte(`{"out":"/dev/null"}`), Committer: &testCommitter{}})
	if !errors.Is(err, ErrCommitUnsupported) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), SymSinkSetCommit) {
		t.Fatalf("err = %v", err)
	}
	if s.ID() != 0 {
		t.Fatal("refused sink is open")
	}
	// Without a Committer the same plugin runs unchanged.
	openSink(t, lib, sdk.SinkEnv{Key: "k", Config: []byte(`{"out":"/dev/null"}`)})
}

func TestConsumeReturnCodes(t *testing.T) {
	lib := mustLib(t, probe(t, "probe_sink"))
	s := openSink(t, lib, sdk.SinkEnv{Key: "codes", Config: []byte(fmt.Sprintf(`{"out":%q}`, filepath.Join(t.TempDir(), "o")))})
	if err := s.Consume(context.Background(), probeTopic, probeMeta, cmds("fail")); !errors.Is(err, ErrPluginFailed) {
		t.Fatalf("fail: %v", err)
	}
	if err := s.Consume(context.Background(), probeTopic, probeMeta, cmds("reject")); !errors.Is(err, ErrPluginRejected) {
		t.Fatalf("reject: %v", err)
	}
	if err := s.Consume(context.Background(), probeTopic, sdk.MessagesMetadata{Schema: "xml"}, nil); err == nil {
		t.Fatal("unknown schema accepted")
	}
	if err := s.Open(context.Background(), sdk.SinkEnv{}); !errors.Is(err, ErrAlreadyOpen) {
		t.Fatalf("second open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Consume(ctx, probeTopic, probeMeta, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	// open returning 1 (the plugin's own open failed) → ErrPluginFailed, instance released.
	f, _ := lib.NewSink()
	if err := f.Open(context.Background(), sdk.SinkEnv{Config: []byte(`{"out":"/dev/null","fail_open":1}`)}); !errors.Is(err, ErrPluginFailed) {
		t.Fatalf("fail_open: %v", err)
	}
}

func TestPluginLogLevelsAndAttribution(t *testing.T) {
	lib := mustLib(t, probe(t, "probe_log"))
	out := filepath.Join(t.TempDir(), "o")
	logs := newLogRecorder()
	s := openSink(t, lib, sdk.SinkEnv{Key: "one", Config: []byte(fmt.Sprintf(`{"out":%q}`, out)), Logger: slog.New(logs).With("connector", "one")})
	if err := s.Consume(context.Background(), probeTopic, probeMeta, cmds("log 0 lvl-trace", "log 1 lvl-debug", "log 2 lvl-info", "log 3 lvl-warn", "log 4 lvl-error", "log 9 lvl-other")); err != nil {
		t.Fatal(err)
	}
	for msg, lvl := range map[string]slog.Level{"lvl-trace": LevelTrace, "lvl-debug": slog.LevelDebug, "lvl-info": slog.LevelInfo,
		"lvl-warn": slog.LevelWarn, "lvl-error": slog.LevelError, "lvl-other": slog.LevelError} {
		rec, ok := logs.find(msg)
		if !ok || rec.Level != lvl || rec.Attrs["connector"] != "one" || rec.Attrs["target"] != "probe" {
			t.Fatalf("%s: %+v %v", msg, rec, ok)
		}
	}
	// Two live instances of one library: the line cannot be attributed to one of them; it
	// goes to the default logger naming the library and both keys.
	def := newLogRecorder()
	old := slog.Default()
	slog.SetDefault(slog.New(def))
	defer slog.SetDefault(old)
	openSink(t, lib, sdk.SinkEnv{Key: "two", Config: []byte(fmt.Sprintf(`{"out":%q}`, out))})
	if err := s.Consume(context.Background(), probeTopic, probeMeta, cmds("log 2 shared-line")); err != nil {
		t.Fatal(err)
	}
	rec, ok := def.find("shared-line")
	if !ok || rec.Attrs["plugin"] != lib.Path() || rec.Attrs["connectors"] != "[one two]" {
		t.Fatalf("shared: %+v %v", rec, ok)
	}
}

// Close waits for an in-flight Consume before calling iggy_sink_close; a Close whose ctx ends
// first leaves the sink open and usable.
func TestCloseWaitsForInflightConsume(t *testing.T) {
	lib := mustLib(t, probe(t, "probe_sink"))
	out := filepath.Join(t.TempDir(), "o")
	s := openSink(t, lib, sdk.SinkEnv{Key: "slow", Config: []byte(fmt.Sprintf(`{"out":%q}`, out))})
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		done <- s.Consume(context.Background(), probeTopic, probeMeta, cmds("sleep 300"))
	}()
	<-started
	testkit.WaitFor(t, "consume in flight", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.inflight == 1 })
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Close(short); !errors.Is(err, context.DeadlineExceeded) || s.ID() == 0 {
		t.Fatalf("close with short ctx: %v (id %d)", err, s.ID())
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Close returned only after the plugin's consume returned: it wrote "slept" just before.
	// (Consume's Go caller may get its result a moment after Close returns: it is not
	// what Close waits for.)
	if got := testkit.ReadLines(t, out); !reflect.DeepEqual(got, []string{"slept"}) {
		t.Fatalf("Close returned while the plugin's consume was still running: out = %q", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not return")
	}
}

// Re-encoding a batch into the per-topic buffers allocates nothing per message.
func TestConsumeAllocations(t *testing.T) {
	lib := mustLib(t, buildC(t, "example_null_sink", "../../examples/plugins/c/null_sink.c"))
	s := openSink(t, lib, sdk.SinkEnv{Key: "alloc", Config: []byte("null"), Logger: slog.New(slog.DiscardHandler)})
	msgs := make([]sdk.ConsumedMessage, 1000)
	for i := range msgs {
		msgs[i] = sdk.ConsumedMessage{Offset: uint64(i), Headers: []sdk.Header{{Key: sdk.String("k"), Value: sdk.String("v")}}, Payload: []byte("payload")}
	}
	ctx := context.Background()
	if err := s.Consume(ctx, probeTopic, probeMeta, msgs); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if err := s.Consume(ctx, probeTopic, probeMeta, msgs); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 { // per batch of 1000 messages; cgo call bookkeeping only
		t.Fatalf("%v allocations per 1000-message Consume", allocs)
	}
}
