package elasticsearch

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
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

// consume delivers msgs of partition p under schema, as the runtime does.
func consume(t *testing.T, s *Sink, c *sdktest.Committer, schema sdk.Schema, p sdk.Partition, msgs []sdk.ConsumedMessage) error {
	t.Helper()
	c.Deliver(p, msgs)
	return s.Consume(ctxT(t), sdktest.Topic, sdk.MessagesMetadata{Partition: p, Schema: schema, CurrentOffset: msgs[len(msgs)-1].Offset}, msgs)
}

func id(p, o int) string {
	return fmt.Sprintf("%s:%s:%d:%d", sdktest.Topic.Stream, sdktest.Topic.Topic, p, o)
}

// TestSinkIndexesByOffsetIDsThenCommits: 3 partitions × 40 JSON messages in _bulk requests
// of at most 7 documents land as 120 documents whose ids are stream:topic:partition:offset,
// payload fields and upstream's _iggy_ fields intact (read back with curl); each batch's
// last offset is committed; the same batches indexed again by a new instance (a replay
// after a crash) leave exactly the same 120 documents (_count unchanged).
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
				if off, ok := c.Committed(part); !ok || off != uint64(i+19) {
					t.Fatalf("partition %d committed %d %v, want %d", p, off, ok, i+19)
				}
			}
		}
	}
	check := func() {
		docs := search(t, url, index)
		if len(docs) != 3*n || count(t, url, index) != 3*n {
			t.Fatalf("%d documents (_count %d), want %d", len(docs), count(t, url, index), 3*n)
		}
		for p := 0; p < 3; p++ {
			for o := 0; o < n; o++ {
				raw, ok := docs[id(p, o)]
				if !ok {
					t.Fatalf("no document %s", id(p, o))
				}
				var d map[string]any
				if err := json.Unmarshal(raw, &d); err != nil {
					t.Fatal(err)
				}
				want := map[string]any{"p": float64(p), "o": float64(o), "name": fmt.Sprintf("m-%d-%d", p, o),
					"_iggy_offset": float64(o), "_iggy_stream": sdktest.Topic.Stream, "_iggy_topic": sdktest.Topic.Topic,
					"_iggy_partition": float64(p), "_iggy_timestamp": float64(ts.UnixMilli()),
					"_iggy_headers": map[string]any{"offset": float64(o)}}
				if fmt.Sprint(d) != fmt.Sprint(want) {
					t.Fatalf("document %s = %v, want %v", id(p, o), d, want)
				}
			}
		}
	}
	run()
	check()
	run()
	check()
}

// TestSinkDocumentShapes: upstream's shapes by the stream's schema: a text payload is
// {"text", "data_type": "text"}, raw bytes that are JSON are the document, raw bytes that
// are not are {"data": base64, "data_type": "raw"}; a payload's own _iggy_offset gives
// way to the metadata; typed headers are JSON values; a JSON array is refused by the
// cluster and rejected alone.
func TestSinkDocumentShapes(t *testing.T) {
	url := node(t)
	index := indexName(t)
	c := sdktest.NewCommitter()
	s := openSink(t, map[string]any{"url": url, "index": index}, c, sdk.FailureDeadLetter)
	part := sdktest.Part(1)
	c.Assign(part, 0)
	f64 := make([]byte, 8)
	binary.LittleEndian.PutUint64(f64, math.Float64bits(2.5))
	i16 := make([]byte, 2)
	binary.LittleEndian.PutUint16(i16, uint16(0xfffe)) // -2
	msg := func(o uint64, payload string, h ...sdk.Header) sdk.ConsumedMessage {
		return sdk.ConsumedMessage{Offset: o, Timestamp: 5_000_000, Payload: []byte(payload), Headers: h}
	}
	if err := consume(t, s, c, sdk.SchemaText, part, []sdk.ConsumedMessage{msg(0, "héllo \"q\"")}); err != nil {
		t.Fatal(err)
	}
	err := consume(t, s, c, sdk.SchemaRaw, part, []sdk.ConsumedMessage{
		msg(1, `{"a":[1,2],"_iggy_offset":99}`,
			sdk.Header{Key: sdk.String("f"), Value: sdk.HeaderField{Kind: sdk.HeaderFloat64, Value: f64}},
			sdk.Header{Key: sdk.String("i"), Value: sdk.HeaderField{Kind: sdk.HeaderInt16, Value: i16}},
			sdk.Header{Key: sdk.String("b"), Value: sdk.HeaderField{Kind: sdk.HeaderBool, Value: []byte{1}}},
			sdk.Header{Key: sdk.String("r"), Value: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: []byte{0, 255}}}),
		msg(2, "\x00\x01not json"),
		msg(3, `[1,2,3]`),
	})
	if got := sdktest.Rejected(err); fmt.Sprint(got) != "[3]" {
		t.Fatalf("rejected %v (%v), want [3]", got, err)
	}
	if off, ok := c.Committed(part); !ok || off != 2 {
		t.Fatalf("committed %d %v, want 2 (below the rejected message; the runtime resolves it)", off, ok)
	}
	docs := search(t, url, index)
	meta := func(o int) string {
		return fmt.Sprintf(`"_iggy_offset":%d,"_iggy_partition":1,"_iggy_stream":"stream","_iggy_timestamp":5000,"_iggy_topic":"topic"`, o)
	}
	for o, want := range map[int]string{
		0: `{` + meta(0) + `,"data_type":"text","text":"héllo \"q\""}`,
		1: `{"_iggy_headers":{"b":true,"f":2.5,"i":-2,"r":"AP8="},` + meta(1) + `,"a":[1,2]}`,
		2: `{"_iggy_offset":2,"_iggy_partition":1,"_iggy_stream":"stream","_iggy_timestamp":5000,"_iggy_topic":"topic","data":"` +
			base64.StdEncoding.EncodeToString([]byte("\x00\x01not json")) + `","data_type":"raw"}`,
	} {
		var v any
		if err := json.Unmarshal(docs[id(1, o)], &v); err != nil {
			t.Fatalf("document %d: %v: %s", o, err, docs[id(1, o)])
		}
		got, _ := json.Marshal(v) // keys sorted
		if string(got) != want {
			t.Fatalf("document %d = %s\nwant         %s", o, got, want)
		}
	}
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
}

// TestSinkIndexTemplate: the index is rendered per message from the stream, topic,
// partition and the message's timestamp (UTC).
func TestSinkIndexTemplate(t *testing.T) {
	url := node(t)
	prefix := indexName(t)
	c := sdktest.NewCommitter()
	s := openSink(t, map[string]any{"url": url, "index": prefix + "-{topic}-{partition}-{date:yyyy.MM.dd}"}, c, sdk.FailureStop)
	part := sdktest.Part(2)
	c.Assign(part, 0)
	msgs := sdktest.Messages(2, 0, 2, sdktest.JSONPayload)
	msgs[0].Timestamp = uint64(time.Date(2026, 1, 31, 23, 59, 0, 0, time.UTC).UnixMicro())
	msgs[1].Timestamp = uint64(time.Date(2026, 2, 1, 0, 0, 1, 0, time.UTC).UnixMicro())
	if err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, part, msgs); err != nil {
		t.Fatal(err)
	}
	for i, day := range []string{"2026.01.31", "2026.02.01"} {
		index := prefix + "-topic-2-" + day
		docs := search(t, url, index)
		var d struct{ O int }
		if len(docs) != 1 || json.Unmarshal(docs[id(2, i)], &d) != nil || d.O != i {
			t.Fatalf("index %s: %v", index, docs)
		}
	}
}

// TestSinkMappingConflictRejectsThatMessageAlone: with a mapping that makes "n" a long, the
// one message whose n is not a number is refused by the cluster (400) and returned alone
// as rejected; the others are indexed. Under dead_letter and under stop only the offsets
// below it are committed (the runtime resolves the rest once on_failure handled it); a
// batch whose first message is refused commits nothing.
func TestSinkMappingConflictRejectsThatMessageAlone(t *testing.T) {
	url := node(t)
	mapping := map[string]any{"mappings": map[string]any{"properties": map[string]any{"n": map[string]any{"type": "long"}}}}
	for _, tc := range []struct {
		fail sdk.OnFailure
		bad  uint64
	}{{sdk.FailureDeadLetter, 4}, {sdk.FailureStop, 4}, {sdk.FailureDeadLetter, 0}} {
		index := indexName(t)
		c := sdktest.NewCommitter()
		s := openSink(t, map[string]any{"url": url, "index": index, "batch_size": 3, "index_mapping": mapping}, c, tc.fail)
		part := sdktest.Part(0)
		c.Assign(part, 0)
		msgs := sdktest.Messages(0, 0, 10, func(_ uint32, o uint64) []byte {
			if o == tc.bad {
				return []byte(`{"n":"not a number"}`)
			}
			return fmt.Appendf(nil, `{"n":%d}`, o)
		})
		err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, part, msgs)
		if got := sdktest.Rejected(err); fmt.Sprint(got) != fmt.Sprintf("[%d]", tc.bad) {
			t.Fatalf("%s: rejected %v (%v), want [%d]", tc.fail, got, err, tc.bad)
		}
		if want := fmt.Sprintf("offset %d: index %s: 400 ", tc.bad, index); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "parse") {
			t.Fatalf("%s: error %q names neither the offset, the index nor the cause", tc.fail, err)
		}
		off, ok := c.Committed(part)
		if tc.bad == 0 && ok || tc.bad > 0 && (!ok || off != tc.bad-1) {
			t.Fatalf("%s: committed %d %v with offset %d refused", tc.fail, off, ok, tc.bad)
		}
		var got []string
		for id := range search(t, url, index) {
			got = append(got, id[strings.LastIndexByte(id, ':')+1:])
		}
		sort.Slice(got, func(i, j int) bool { return len(got[i]) < len(got[j]) || len(got[i]) == len(got[j]) && got[i] < got[j] })
		var want []string
		for o := uint64(0); o < 10; o++ {
			if o != tc.bad {
				want = append(want, fmt.Sprint(o))
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: indexed offsets %v, want %v", tc.fail, got, want)
		}
	}
}

// TestSinkRetriesItemsRefusedForNow: an index with the read_only_allow_delete block (the
// cluster's answer to a full disk) refuses its items with 429 while the other index of
// the same _bulk request takes its own: the sink sends only the refused items again
// (sdk.Retry), they land once the block is lifted, and only then is the batch committed.
// A block that stays past max_attempts fails the batch (no rejection: nothing is wrong
// with the messages) and commits nothing.
func TestSinkRetriesItemsRefusedForNow(t *testing.T) {
	url := node(t)
	prefix := indexName(t)
	day1, day2 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 5, 2, 12, 0, 0, 0, time.UTC)
	a, b := prefix+"-2026.05.01", prefix+"-2026.05.02"
	block := func(index string, on bool) {
		v := "null"
		if on {
			v = "true"
		}
		if out, err := curl(url+"/"+index+"/_settings", "PUT", `{"index.blocks.read_only_allow_delete":`+v+`}`); err != nil || !strings.Contains(string(out), `"acknowledged":true`) {
			t.Fatalf("block %s %v: %v %s", index, on, err, out)
		}
	}
	for _, index := range []string{a, b} {
		if _, err := curl(url+"/"+index, "PUT", ""); err != nil {
			t.Fatal(err)
		}
	}
	block(b, true)
	t.Cleanup(func() { block(b, false) })
	msgs := sdktest.Messages(0, 0, 6, sdktest.JSONPayload)
	for i := range msgs {
		msgs[i].Timestamp = uint64(day1.UnixMicro())
		if i%2 == 1 {
			msgs[i].Timestamp = uint64(day2.UnixMicro())
		}
	}
	part := sdktest.Part(0)

	c := sdktest.NewCommitter()
	s := openSink(t, map[string]any{"url": url, "index": prefix + "-{date:yyyy.MM.dd}", "retry_backoff": "1ms", "max_attempts": 3}, c, sdk.FailureStop)
	c.Assign(part, 0)
	var retries []sdk.RetryEvent
	s.retry.OnRetry = func(e sdk.RetryEvent) {
		retries = append(retries, e)
		if len(retries) == 1 { // after the first answer: a's items in, b's refused
			if na, nb := count(t, url, a), count(t, url, b); na != 3 || nb != 0 {
				t.Errorf("after the first _bulk: %d documents in %s, %d in %s, want 3 and 0", na, a, nb, b)
			}
		}
		if len(retries) == 2 {
			block(b, false)
		}
	}
	if err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, part, msgs); err != nil {
		t.Fatal(err)
	}
	if len(retries) != 2 || !strings.Contains(retries[0].Err.Error(), "3 of the _bulk items refused for now") ||
		!strings.Contains(retries[0].Err.Error(), "offset 1: index "+b+": 429 cluster_block_exception") {
		t.Fatalf("retries %v, want two of the three items of %s refused with 429", retries, b)
	}
	if off, ok := c.Committed(part); !ok || off != 5 {
		t.Fatalf("committed %d %v, want 5", off, ok)
	}
	if na, nb := count(t, url, a), count(t, url, b); na != 3 || nb != 3 {
		t.Fatalf("%d documents in %s, %d in %s, want 3 and 3", na, a, nb, b)
	}

	block(b, true)
	c = sdktest.NewCommitter()
	s = openSink(t, map[string]any{"url": url, "index": prefix + "-{date:yyyy.MM.dd}", "retry_backoff": "1ms", "max_attempts": 2}, c, sdk.FailureStop)
	c.Assign(part, 6)
	more := sdktest.Messages(0, 6, 2, sdktest.JSONPayload)
	more[0].Timestamp, more[1].Timestamp = uint64(day2.UnixMicro()), uint64(day2.UnixMicro())
	err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, part, more)
	if err == nil || sdktest.Rejected(err) != nil || !strings.Contains(err.Error(), "2 of the _bulk items refused for now") {
		t.Fatalf("a block past max_attempts: %v, want the batch failed", err)
	}
	if off, ok := c.Committed(part); ok {
		t.Fatalf("committed %d with the batch refused", off)
	}
}

// TestSinkOpenErrors: an unreachable URL, a missing index with create_index_if_not_exists
// off, an unknown placeholder, a user without a password and a run that is not
// sink_controlled are clear errors at Open, naming the address, the index or the key;
// nothing is created.
func TestSinkOpenErrors(t *testing.T) {
	url := node(t)
	dead := deadURL(t)
	index := indexName(t)
	for _, tc := range []struct {
		cfg  map[string]any
		c    *sdktest.Committer
		want string
	}{
		{map[string]any{"url": dead, "index": "x", "max_attempts": 2, "retry_backoff": "1ms"}, sdktest.NewCommitter(),
			"elasticsearch sink: GET " + dead + "/: cannot reach the cluster (plugin_config.url)"},
		{map[string]any{"url": url, "index": index, "create_index_if_not_exists": false}, sdktest.NewCommitter(),
			fmt.Sprintf("index %q does not exist at %s and plugin_config.create_index_if_not_exists is false", index, url)},
		{map[string]any{"url": url, "index": "x-{nope}"}, sdktest.NewCommitter(), "plugin_config.index: unknown placeholder {nope} at byte 2"},
		{map[string]any{"url": url, "index": "x", "username": "u"}, sdktest.NewCommitter(), "password"},
		{map[string]any{"url": url, "index": "x"}, nil, `offset_commit = "sink_controlled" is required`},
	} {
		err := New().Open(ctxT(t), sdktest.SinkEnv(t, tc.cfg, tc.c))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("open %v: %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	if code := status(t, url+"/"+index, "HEAD"); code != 404 {
		t.Fatalf("index %s: HEAD %d after a refused open, want 404 (nothing created)", index, code)
	}
}

// authProxy is the node behind HTTP authentication, as a cluster with security on
// answers (the OpenSearch security plugin and Elasticsearch's are not installable here):
// a request with the Basic credentials u/pw or the API key passes to the node, any
// other is answered 401 with Elasticsearch's error body.
func authProxy(t *testing.T, node, user, pw, apiKey string) string {
	t.Helper()
	target, _ := url.Parse(node)
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if ok && u == user && p == pw || r.Header.Get("Authorization") == "ApiKey "+apiKey {
			rp.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, `{"error":{"root_cause":[{"type":"security_exception","reason":"unable to authenticate user [%s] for REST request [%s]"}],"type":"security_exception","reason":"unable to authenticate user [%s] for REST request [%s]"},"status":401}`, u, r.URL.Path, u, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSinkCredentials: the credentials reach the cluster (basic and API key: documents
// land through a proxy that checks them); wrong ones are a permanent error at Open that
// names the user and the keys, never the password; Preflight says the same.
func TestSinkCredentials(t *testing.T) {
	url := node(t)
	const pw, key = "s3cret-pw", "aWQ6a2V5LXNlY3JldA=="
	proxy := authProxy(t, url, "ferry", pw, key)
	for _, auth := range []map[string]any{{"username": "ferry", "password": pw}, {"api_key": key}} {
		index := indexName(t)
		cfg := map[string]any{"url": proxy, "index": index}
		for k, v := range auth {
			cfg[k] = v
		}
		c := sdktest.NewCommitter()
		s := openSink(t, cfg, c, sdk.FailureStop)
		c.Assign(sdktest.Part(0), 0)
		if err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, sdktest.Part(0), sdktest.Messages(0, 0, 3, sdktest.JSONPayload)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, url, index); n != 3 {
			t.Fatalf("%v: %d documents, want 3", auth, n)
		}
		if errs := New().Preflight(ctxT(t), sdktest.Config(t, cfg)); len(errs) != 0 {
			t.Fatalf("preflight %v: %v", auth, errs)
		}
	}
	for _, tc := range []struct {
		auth map[string]any
		want string
	}{
		{map[string]any{"username": "ferry", "password": "wrong-pw"}, `401: the cluster refused the credentials of user "ferry" (plugin_config.username and password, or api_key): security_exception: unable to authenticate user [ferry]`},
		{map[string]any{"api_key": "d3Jvbmc="}, `401: the cluster refused the credentials (plugin_config.username and password, or api_key)`},
		{map[string]any{}, `401: the cluster refused the credentials (plugin_config.username and password, or api_key)`},
	} {
		cfg := map[string]any{"url": proxy, "index": "x"}
		for k, v := range tc.auth {
			cfg[k] = v
		}
		err := New().Open(ctxT(t), sdktest.SinkEnv(t, cfg, sdktest.NewCommitter()))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sdk.ErrPermanent) || strings.Contains(err.Error(), "wrong-pw") {
			t.Fatalf("open %v: %v, want a permanent error with %q", tc.auth, err, tc.want)
		}
		if errs := New().Preflight(ctxT(t), sdktest.Config(t, cfg)); len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Fatalf("preflight %v: %v", tc.auth, errs)
		}
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
	if want := fmt.Sprintf("index %q does not exist at %s and plugin_config.create_index_if_not_exists is false", index, url); len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
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
	dead := deadURL(t)
	if errs := pre(map[string]any{"url": dead, "index": index}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "GET "+dead+"/: cannot reach the cluster") {
		t.Fatalf("unreachable: %v", errs)
	}
	if errs := pre(map[string]any{"url": url, "index": index + "-{date:yyyy}", "create_index_if_not_exists": false}); len(errs) != 0 {
		t.Fatalf("a template index (not checked): %v", errs)
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

// TestSinkBulkChunks: batch_size and max_bulk_bytes cut the _bulk requests (counted by a
// proxy in front of the node); a document larger than max_bulk_bytes goes alone.
func TestSinkBulkChunks(t *testing.T) {
	url := node(t)
	target, _ := neturl(url)
	var sizes []int
	var bulks atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_bulk" {
			bulks.Add(1)
			sizes = append(sizes, int(r.ContentLength))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	index := indexName(t)
	c := sdktest.NewCommitter()
	s := openSink(t, map[string]any{"url": srv.URL, "index": index, "batch_size": 4, "max_bulk_bytes": 2048}, c, sdk.FailureStop)
	c.Assign(sdktest.Part(0), 0)
	msgs := sdktest.Messages(0, 0, 10, func(_ uint32, o uint64) []byte {
		if o == 5 {
			return fmt.Appendf(nil, `{"big":%q}`, strings.Repeat("x", 3000))
		}
		return sdktest.JSONPayload(0, o)
	})
	if err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, sdktest.Part(0), msgs); err != nil {
		t.Fatal(err)
	}
	// 0-3 (batch_size), 4 (5 would pass 2048 bytes), 5 alone, 6-9
	if bulks.Load() != 4 || count(t, url, index) != 10 {
		t.Fatalf("%d _bulk requests of %v bytes, %d documents; want 4 requests, 10 documents", bulks.Load(), sizes, count(t, url, index))
	}
}

func neturl(s string) (*url.URL, error) { return url.Parse(s) }

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

// deadURL is an address where nothing listens.
func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	return dead
}
