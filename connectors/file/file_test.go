package file

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Committer that checks, at each commit, that the committed offset's line is
// already in the file (read from disk).
type recorder struct {
	t    *testing.T
	path string
	mu   sync.Mutex
	got  []string
}

func (r *recorder) Commit(p sdk.Partition, offset uint64) error {
	data, err := os.ReadFile(r.path)
	if err != nil {
		r.t.Errorf("read: %v", err)
	}
	needle := `"partition":` + itoa(uint64(p.PartitionID)) + `,"offset":` + itoa(offset) + `,`
	if !strings.Contains(string(data), needle) {
		r.t.Errorf("commit of p%d/%d before its line is in the file", p.PartitionID, offset)
	}
	r.mu.Lock()
	r.got = append(r.got, "p"+itoa(uint64(p.PartitionID))+"@"+itoa(offset))
	r.mu.Unlock()
	return nil
}

func (r *recorder) commits() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

var topic = sdk.TopicMetadata{Stream: "orders", Topic: "eu", StreamID: 1, TopicID: 2}

func part(id uint32) sdk.MessagesMetadata {
	return sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: id}, Schema: sdk.SchemaJSON}
}

func msgs(offsets ...uint64) []sdk.ConsumedMessage {
	out := make([]sdk.ConsumedMessage, len(offsets))
	for i, o := range offsets {
		out[i] = sdk.ConsumedMessage{Offset: o, ID: sdk.MessageIDFromUint64(o), Payload: []byte(`{"n":` + itoa(o) + `}`)}
	}
	return out
}

func open(t *testing.T, cfg string, c sdk.Committer) *Sink {
	t.Helper()
	s := New()
	if err := s.Open(context.Background(), sdk.SinkEnv{Key: "f", Config: []byte(cfg), Committer: c}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExactLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s := open(t, `{"path":"`+path+`"}`, nil)
	ctx := context.Background()
	m := []sdk.ConsumedMessage{{
		ID: sdk.MessageIDFromUint64(0xabc), Offset: 7, Timestamp: 1700000000000001, OriginTimestamp: 1700000000000000,
		Headers: []sdk.Header{{Key: sdk.String("trace"), Value: sdk.String("a<b")}, {Key: sdk.String("n"), Value: sdk.Uint64(1)}},
		Payload: []byte("{ \"a\" : [1, 2.50, \"<x>\"] }"),
	}, {Offset: 8, Payload: []byte("not json")}}
	if err := s.Consume(ctx, topic, part(3), m); err != nil {
		t.Fatal(err)
	}
	text := part(3)
	text.Schema = sdk.SchemaText
	raw := part(4)
	raw.Schema = sdk.SchemaRaw
	if err := s.Consume(ctx, topic, text, []sdk.ConsumedMessage{{Offset: 9, Payload: []byte("héllo\n")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, topic, raw, []sdk.ConsumedMessage{{Offset: 0, Payload: []byte{0, 1, 2, 255}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"stream":"orders","topic":"eu","partition":3,"offset":7,"id":"00000000000000000000000000000abc","timestamp":1700000000000001,"origin_timestamp":1700000000000000,"headers":[{"key":"trace","kind":"string","value":"a<b"},{"key":"n","kind":"uint64","value":"AQAAAAAAAAA="}],"payload":{"a":[1,2.50,"<x>"]}}
{"stream":"orders","topic":"eu","partition":3,"offset":8,"id":"00000000000000000000000000000000","timestamp":0,"origin_timestamp":0,"headers":[],"payload":"bm90IGpzb24="}
{"stream":"orders","topic":"eu","partition":3,"offset":9,"id":"00000000000000000000000000000000","timestamp":0,"origin_timestamp":0,"headers":[],"payload":"héllo\n"}
{"stream":"orders","topic":"eu","partition":4,"offset":0,"id":"00000000000000000000000000000000","timestamp":0,"origin_timestamp":0,"headers":[],"payload":"AAEC/w=="}
`
	if string(got) != want {
		t.Fatalf("file content:\n%s\nwant:\n%s", got, want)
	}
	if err := s.Consume(ctx, topic, part(3), msgs(10)); err == nil {
		t.Fatal("Consume after Close succeeded")
	}
}

func TestSinkControlledCommitsOnlyAfterFsync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	rec := &recorder{t: t, path: path}
	s := open(t, `{"path":"`+path+`","flush_interval":"1h"}`, rec)
	ctx := context.Background()
	for _, b := range []struct {
		p    uint32
		offs []uint64
	}{{0, []uint64{0, 1, 2}}, {1, []uint64{5}}, {0, []uint64{3, 4}}} {
		if err := s.Consume(ctx, topic, part(b.p), msgs(b.offs...)); err != nil {
			t.Fatal(err)
		}
	}
	if c := rec.commits(); len(c) != 0 {
		t.Fatalf("commits before any fsync: %v", c)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if c := strings.Join(sorted(rec.commits()), ","); c != "p0@4,p1@5" {
		t.Fatalf("commits after fsync = %s", c)
	}
	if err := s.Sync(); err != nil { // nothing new: no commit
		t.Fatal(err)
	}
	if err := s.Consume(ctx, topic, part(1), msgs(6, 7)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c := strings.Join(sorted(rec.commits()), ","); c != "p0@4,p1@5,p1@7" {
		t.Fatalf("commits after Close = %s", c)
	}
}

func TestPeriodicFsyncCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	rec := &recorder{t: t, path: path}
	s := open(t, `{"path":"`+path+`","flush_interval":"5ms"}`, rec)
	defer s.Close(context.Background())
	if err := s.Consume(context.Background(), topic, part(2), msgs(41, 42)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the flush to commit once", func() bool { return len(rec.commits()) == 1 })
	if c := rec.commits(); c[0] != "p2@42" {
		t.Fatalf("commits = %v", c)
	}
}

func TestFsyncEachBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	rec := &recorder{t: t, path: path}
	s := open(t, `{"path":"`+path+`","flush_interval":"1h","fsync_each_batch":true}`, rec)
	defer s.Close(context.Background())
	if err := s.Consume(context.Background(), topic, part(0), msgs(0, 1)); err != nil {
		t.Fatal(err)
	}
	if c := rec.commits(); len(c) != 1 || c[0] != "p0@1" {
		t.Fatalf("commits = %v", c)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []string{`null`, `{"path":""}`, `{"path":"x","flush_interval":"soon"}`, `{"path":"x","colour":1}`} {
		if err := New().Open(context.Background(), sdk.SinkEnv{Config: []byte(cfg)}); err == nil {
			t.Errorf("Open(%s) succeeded", cfg)
		}
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }
