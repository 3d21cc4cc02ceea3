package elasticsearch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func openSink(t *testing.T, cfg map[string]any, c *sdktest.Committer, onFailure sdk.OnFailure) *Sink {
	t.Helper()
	s := New()
	env := sdktest.SinkEnv(t, cfg, c)
	env.OnFailure = onFailure
	if err := s.Open(ctxT(t), env); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// TestSinkIndexesByOffsetIDsThenCommits: 3 partitions × 40 JSON messages in _bulk requests
// of at most 7 documents land as 120 documents whose ids are stream:topic:partition:offset,
// payload fields and upstream's _iggy_ fields intact (read back with curl); each batch's
// last offset is committed; the same batches indexed again by a new instance (a replay
// after a crash) leave exactly the same 120 documents.
func TestSinkIndexesByOffsetIDsThenCommits(t *testing.T) {
	url := node(t)
	index := indexName(t)
	cfg := map[string]any{"url": url, "index": index, "batch_size": 7}
	const n = 40
	ts := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	run := func() {
		c := sdktest.NewCommitter()
		s := openSink(t, cfg, c, sdk.FailureStop)
		for p := uint32(0); p < 3; p++ {
			part := sdktest.Part(p)
			c.Assign(part, 0)
			msgs := sdktest.Messages(p, 0, n, func(p uint32, o uint64) []byte {
				return fmt.Appendf(nil, "{\n  \"p\": %d, \"o\": %d, \"name\": \"m-%d-%d\"\n}", p, o, p, o)
			})
			for i := range msgs {
				msgs[i].Timestamp = uint64(ts.UnixMicro())
			}
			for i := 0; i < n; i += 20 {
				if err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, part, msgs[i:i+20]); err != nil {
					t.Fatalf("consume p%d: %v", p, err)
				}
			}
			if off, ok := c.Committed(part); !ok || off != n-1 {
				t.Fatalf("partition %d committed %d %v, want %d", p, off, ok, n-1)
			}
		}
	}
	check := func() {
		docs := search(t, url, index)
		if len(docs) != 3*n {
			t.Fatalf("%d documents, want %d", len(docs), 3*n)
		}
		for p := 0; p < 3; p++ {
			for o := 0; o < n; o++ {
				id := fmt.Sprintf("%s:%s:%d:%d", sdktest.Topic.Stream, sdktest.Topic.Topic, p, o)
				raw, ok := docs[id]
				if !ok {
					t.Fatalf("no document %s", id)
				}
				var d map[string]any
				if err := json.Unmarshal(raw, &d); err != nil {
					t.Fatal(err)
				}
				want := map[string]any{"p": float64(p), "o": float64(o), "name": fmt.Sprintf("m-%d-%d", p, o),
					"_iggy_offset": float64(o), "_iggy_stream": sdktest.Topic.Stream, "_iggy_topic": sdktest.Topic.Topic,
					"_iggy_partition": float64(p), "_iggy_timestamp": float64(ts.UnixMilli())}
				if fmt.Sprint(d) != fmt.Sprint(want) {
					t.Fatalf("document %s = %v, want %v", id, d, want)
				}
			}
		}
	}
	run()
	check()
	run()
	check()
}

// TestSinkIndexTemplate: the index is rendered per message from the stream, topic,
// partition and the message's timestamp (UTC); a non-JSON payload is upstream's
// {"data": base64, "data_type": "binary"}.
func TestSinkIndexTemplate(t *testing.T) {
	url := node(t)
	prefix := indexName(t)
	c := sdktest.NewCommitter()
	s := openSink(t, map[string]any{"url": url, "index": prefix + "-{partition}-{date:yyyy.MM.dd}"}, c, sdk.FailureStop)
	part := sdktest.Part(2)
	c.Assign(part, 0)
	msgs := sdktest.Messages(2, 0, 2, func(_ uint32, o uint64) []byte { return fmt.Appendf(nil, "raw bytes %d", o) })
	msgs[0].Timestamp = uint64(time.Date(2026, 1, 31, 23, 59, 0, 0, time.UTC).UnixMicro())
	msgs[1].Timestamp = uint64(time.Date(2026, 2, 1, 0, 0, 1, 0, time.UTC).UnixMicro())
	if err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, part, msgs); err != nil {
		t.Fatal(err)
	}
	for i, day := range []string{"2026.01.31", "2026.02.01"} {
		docs := search(t, url, prefix+"-2-"+day)
		id := fmt.Sprintf("%s:%s:2:%d", sdktest.Topic.Stream, sdktest.Topic.Topic, i)
		var d struct {
			Data     string `json:"data"`
			DataType string `json:"data_type"`
		}
		if len(docs) != 1 || json.Unmarshal(docs[id], &d) != nil {
			t.Fatalf("index %s: %v", prefix+"-2-"+day, docs)
		}
		raw, _ := base64.StdEncoding.DecodeString(d.Data)
		if string(raw) != fmt.Sprintf("raw bytes %d", i) || d.DataType != "binary" {
			t.Fatalf("document %s = %+v", id, d)
		}
	}
}

// TestSinkMappingConflictRejectsThatMessageAlone: with a mapping that makes "n" a long, the
// one message whose n is not a number is refused by the cluster (400) and returned alone
// as rejected; the others are indexed. Under dead_letter the batch's last offset is
// committed; under stop only what comes before the refused message.
func TestSinkMappingConflictRejectsThatMessageAlone(t *testing.T) {
	url := node(t)
	for _, tc := range []struct {
		fail sdk.OnFailure
		want uint64
	}{{sdk.FailureDeadLetter, 9}, {sdk.FailureStop, 3}} {
		index := indexName(t)
		c := sdktest.NewCommitter()
		s := openSink(t, map[string]any{"url": url, "index": index,
			"index_mapping": map[string]any{"mappings": map[string]any{"properties": map[string]any{"n": map[string]any{"type": "long"}}}}}, c, tc.fail)
		part := sdktest.Part(0)
		c.Assign(part, 0)
		msgs := sdktest.Messages(0, 0, 10, func(_ uint32, o uint64) []byte {
			if o == 4 {
				return []byte(`{"n":"not a number"}`)
			}
			return fmt.Appendf(nil, `{"n":%d}`, o)
		})
		err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, part, msgs)
		if got := sdktest.Rejected(err); fmt.Sprint(got) != "[4]" {
			t.Fatalf("%s: rejected %v (%v), want [4]", tc.fail, got, err)
		}
		if !strings.Contains(err.Error(), "offset 4: index "+index+": 400 ") || !strings.Contains(err.Error(), "parsing") {
			t.Fatalf("%s: error %q names neither the offset, the index nor the cause", tc.fail, err)
		}
		if off, ok := c.Committed(part); !ok || off != tc.want {
			t.Fatalf("%s: committed %d %v, want %d", tc.fail, off, ok, tc.want)
		}
		docs := search(t, url, index)
		var ids []string
		for id := range docs {
			ids = append(ids, id[strings.LastIndexByte(id, ':')+1:])
		}
		sort.Strings(ids)
		if strings.Join(ids, ",") != "0,1,2,3,5,6,7,8,9" {
			t.Fatalf("%s: indexed offsets %v", tc.fail, ids)
		}
	}
}

// TestSinkErrors: an unreachable URL and a missing index with create_index_if_not_exists
// off are clear errors at Open, naming the address and the index; a wrong key is refused
// by the config.
func TestSinkErrors(t *testing.T) {
	url := node(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	index := indexName(t)
	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"url": dead, "index": "x", "max_attempts": 2, "retry_backoff": "1ms"}, "GET " + dead + "/: cannot reach the cluster"},
		{map[string]any{"url": url, "index": index, "create_index_if_not_exists": false}, fmt.Sprintf("index %q does not exist at %s and plugin_config.create_index_if_not_exists is false", index, url)},
		{map[string]any{"url": url, "index": "x-{nope}"}, "plugin_config.index: unknown placeholder {nope} at byte 2"},
		{map[string]any{"url": url, "index": "x", "username": "u"}, "password"},
	} {
		err := New().Open(ctxT(t), sdktest.SinkEnv(t, tc.cfg, nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("open %v: %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	if code := status(t, url+"/"+index, "HEAD"); code != 404 {
		t.Fatalf("index %s: HEAD %d after a refused open, want 404 (nothing created)", index, code)
	}
}

// TestSinkPreflight: ferry check --connect's checks against the node: reachable and the
// index existing (or creatable) passes; an unreachable URL and a missing index with
// create_index_if_not_exists off fail, nothing created.
func TestSinkPreflight(t *testing.T) {
	url := node(t)
	index := indexName(t)
	pre := func(cfg map[string]any) []error { return New().Preflight(ctxT(t), sdktest.Config(t, cfg)) }
	if errs := pre(map[string]any{"url": url, "index": index}); len(errs) != 0 {
		t.Fatalf("creatable index: %v", errs)
	}
	errs := pre(map[string]any{"url": url, "index": index, "create_index_if_not_exists": false})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "does not exist") {
		t.Fatalf("missing index, create off: %v", errs)
	}
	if code := status(t, url+"/"+index, "HEAD"); code != 404 {
		t.Fatalf("preflight created index %s (HEAD %d)", index, code)
	}
	if _, err := curl(url+"/"+index, "PUT", ""); err != nil {
		t.Fatal(err)
	}
	if errs := pre(map[string]any{"url": url, "index": index, "create_index_if_not_exists": false}); len(errs) != 0 {
		t.Fatalf("existing index: %v", errs)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	if errs := pre(map[string]any{"url": dead, "index": index}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "cannot reach the cluster") {
		t.Fatalf("unreachable: %v", errs)
	}
}

// TestSinkCrashAtEveryStep: the kit's harness, a crash at every step against the node:
// each message once in the index (non-JSON payloads, read back from the documents' data).
func TestSinkCrashAtEveryStep(t *testing.T) {
	url := node(t)
	var index string
	cfg := map[string]any{"url": url, "batch_size": 4}
	h := sdktest.SinkHarness{
		New:            func() sdk.Sink { return New() },
		Config:         cfg,
		SinkControlled: true,
		Guarantee:      sdktest.ExactlyOnce,
		Messages:       12,
		Batch:          5,
		Payload:        func(p uint32, o uint64) []byte { return fmt.Appendf(nil, "bytes p%d o%d", p, o) },
		Reset: func(context.Context) error {
			index = indexName(t)
			cfg["index"] = index
			return nil
		},
		Read: func(context.Context) ([]sdktest.Record, error) {
			var out []sdktest.Record
			if status(t, url+"/"+index, "HEAD") == 404 {
				return nil, nil
			}
			for id, raw := range search(t, url, index) {
				var d struct {
					Data      string `json:"data"`
					Partition uint32 `json:"_iggy_partition"`
					Offset    uint64 `json:"_iggy_offset"`
				}
				if err := json.Unmarshal(raw, &d); err != nil {
					return nil, err
				}
				if !strings.HasSuffix(id, fmt.Sprintf(":%d:%d", d.Partition, d.Offset)) {
					return nil, fmt.Errorf("document %s holds partition %d offset %d", id, d.Partition, d.Offset)
				}
				payload, err := base64.StdEncoding.DecodeString(d.Data)
				if err != nil {
					return nil, err
				}
				out = append(out, sdktest.Record{Partition: d.Partition, Offset: d.Offset, Payload: payload})
			}
			return out, nil
		},
	}
	h.CrashAtEveryStep(t)
}

// TestParseBulk: a _bulk answer's items in order, their statuses and errors as "type:
// reason (caused by …)"; an answer with fewer items than documents is an error.
func TestParseBulk(t *testing.T) {
	raw := `{"took":3,"errors":true,"items":[{"index":{"_index":"a","_id":"1","status":201}},
{"index":{"_index":"a","_id":"2","status":429,"error":{"type":"es_rejected_execution_exception","reason":"queue full"}}},
{"index":{"_index":"a","_id":"3","status":400,"error":{"type":"document_parsing_exception","reason":"failed to parse field [n]","caused_by":{"type":"illegal_argument_exception","reason":"For input string"}}}}]}`
	res, err := parseBulk([]byte(raw), 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []result{{"a", 201, ""}, {"a", 429, "es_rejected_execution_exception: queue full"},
		{"a", 400, "document_parsing_exception: failed to parse field [n] (caused by illegal_argument_exception: For input string)"}}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", res, want)
	}
	if _, err := parseBulk([]byte(raw), 4); err == nil || !strings.Contains(err.Error(), "3 items for 4 documents") {
		t.Fatalf("short answer: %v", err)
	}
}
