package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/webhooktest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func receiver(t *testing.T, schedule func(n int, r *webhooktest.Request) webhooktest.Answer) *webhooktest.Receiver {
	rc := webhooktest.Start("", schedule)
	t.Cleanup(rc.Close)
	return rc
}

func open(t *testing.T, cfg map[string]any, c *sdktest.Committer, fail sdk.OnFailure) *Sink {
	t.Helper()
	s := New()
	env := sdktest.SinkEnv(t, cfg, c)
	env.OnFailure = fail
	if err := s.Open(ctxT(t), env); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// consume delivers msgs of partition 0 with schema, recorded in c first.
func consume(t *testing.T, s *Sink, c *sdktest.Committer, schema sdk.Schema, msgs []sdk.ConsumedMessage) error {
	p := sdktest.Part(0)
	if c != nil {
		c.Deliver(p, msgs)
	}
	return s.Consume(ctxT(t), sdktest.Topic, sdk.MessagesMetadata{Partition: p, Schema: schema}, msgs)
}

func messages(n int, payload func(o uint64) string) []sdk.ConsumedMessage {
	msgs := sdktest.Messages(0, 0, uint64(n), func(_ uint32, o uint64) []byte { return []byte(payload(o)) })
	for i := range msgs {
		msgs[i].ID = sdk.MessageIDFromUint64(uint64(0xabc0 + i))
		msgs[i].Timestamp = 1_700_000_000_000_000 + uint64(i)
		msgs[i].Checksum = 99
		msgs[i].OriginTimestamp = 1_600_000_000_000_000
		msgs[i].Headers = nil
	}
	return msgs
}

func jsonMsg(o uint64) string { return fmt.Sprintf(`{"n":%d}`, o) }

// TestBodiesAsUpstream: each batch mode's requests have upstream http_sink's body shape and
// Content-Type, and each carries its idempotency key.
func TestBodiesAsUpstream(t *testing.T) {
	stream, topic := sdktest.Topic.Stream, sdktest.Topic.Topic
	meta := func(o int) string {
		return fmt.Sprintf(`"metadata":{"iggy_id":"%032x","iggy_offset":%d,"iggy_timestamp":%d,"iggy_stream":%q,"iggy_topic":%q,"iggy_partition_id":0}`,
			0xabc0+o, o, 1_700_000_000_000_000+o, stream, topic)
	}
	key := func(first, last int) string {
		return fmt.Sprintf("%s/%s/0/%d-%d/%d", stream, topic, first, last, 1_700_000_000_000_000+first)
	}
	cases := []struct {
		name   string
		cfg    map[string]any
		schema sdk.Schema
		ctype  string
		bodies []string
		keys   []string
	}{
		{"individual", map[string]any{}, sdk.SchemaJSON, "application/json",
			[]string{`{` + meta(0) + `,"payload":{"n":0}}`, `{` + meta(1) + `,"payload":{"n":1}}`}, []string{key(0, 0), key(1, 1)}},
		{"ndjson", map[string]any{"batch_mode": "ndjson"}, sdk.SchemaJSON, "application/x-ndjson",
			[]string{`{` + meta(0) + `,"payload":{"n":0}}` + "\n" + `{` + meta(1) + `,"payload":{"n":1}}` + "\n"}, []string{key(0, 1)}},
		{"json_array", map[string]any{"batch_mode": "json_array"}, sdk.SchemaJSON, "application/json",
			[]string{`[{` + meta(0) + `,"payload":{"n":0}},{` + meta(1) + `,"payload":{"n":1}}]`}, []string{key(0, 1)}},
		{"raw", map[string]any{"batch_mode": "raw"}, sdk.SchemaRaw, "application/octet-stream",
			[]string{`{"n":0}`, `{"n":1}`}, []string{key(0, 0), key(1, 1)}},
		{"no metadata, raw schema", map[string]any{"batch_mode": "json_array", "include_metadata": false}, sdk.SchemaRaw, "application/json",
			[]string{`[{"data":"eyJuIjowfQ==","iggy_payload_encoding":"base64"},{"data":"eyJuIjoxfQ==","iggy_payload_encoding":"base64"}]`}, []string{key(0, 1)}},
		{"text, checksum, origin", map[string]any{"batch_mode": "single", "include_checksum": true, "include_origin_timestamp": true, "idempotency_header": "X-Key"}, sdk.SchemaText, "application/json",
			[]string{`{` + strings.TrimSuffix(meta(0), "}") + `,"iggy_checksum":99,"iggy_origin_timestamp":1600000000000000},"payload":"{\"n\":0}"}`,
				`{` + strings.TrimSuffix(meta(1), "}") + `,"iggy_checksum":99,"iggy_origin_timestamp":1600000000000000},"payload":"{\"n\":1}"}`}, []string{key(0, 0), key(1, 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			header := "Idempotency-Key"
			if h, ok := tc.cfg["idempotency_header"].(string); ok {
				header = h
			}
			rc := webhooktest.Start(header, nil)
			defer rc.Close()
			cfg := map[string]any{"url": rc.URL() + "/ingest", "headers": map[string]string{"Authorization": "Bearer t"}}
			for k, v := range tc.cfg {
				cfg[k] = v
			}
			s := open(t, cfg, nil, sdk.FailureStop)
			if err := consume(t, s, nil, tc.schema, messages(2, jsonMsg)); err != nil {
				t.Fatal(err)
			}
			reqs := rc.Requests()
			if len(reqs) != len(tc.bodies) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.bodies))
			}
			for i, r := range reqs {
				if string(r.Body) != tc.bodies[i] {
					t.Errorf("request %d body\n%s\nwant\n%s", i, r.Body, tc.bodies[i])
				}
				if r.Method != "POST" || r.Path != "/ingest" || r.Header.Get("Content-Type") != tc.ctype || r.Header.Get("Authorization") != "Bearer t" {
					t.Errorf("request %d: %s %s, Content-Type %q, Authorization %q", i, r.Method, r.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"))
				}
				if r.Key != tc.keys[i] {
					t.Errorf("request %d key %q, want %q", i, r.Key, tc.keys[i])
				}
			}
		})
	}
}

// TestHeadersInTheEnvelope: user headers become iggy_headers, values as text, raw ones in
// base64.
func TestHeadersInTheEnvelope(t *testing.T) {
	rc := receiver(t, nil)
	s := open(t, map[string]any{"url": rc.URL()}, nil, sdk.FailureStop)
	msgs := messages(1, jsonMsg)
	msgs[0].Headers = []sdk.Header{
		{Key: sdk.String("device"), Value: sdk.String("d1")},
		{Key: sdk.String("n"), Value: sdk.Uint64(7)},
		{Key: sdk.String("ok"), Value: sdk.HeaderField{Kind: sdk.HeaderBool, Value: []byte{1}}},
		{Key: sdk.String("neg"), Value: sdk.HeaderField{Kind: sdk.HeaderInt32, Value: []byte{0xfe, 0xff, 0xff, 0xff}}},
		{Key: sdk.String("bin"), Value: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: []byte{0, 1, 2}}},
	}
	if err := consume(t, s, nil, sdk.SchemaJSON, msgs); err != nil {
		t.Fatal(err)
	}
	var env struct {
		Metadata struct {
			Headers map[string]any `json:"iggy_headers"`
		}
	}
	if err := json.Unmarshal(rc.Requests()[0].Body, &env); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(env.Metadata.Headers)
	want := `{"bin":{"data":"AAEC","iggy_header_encoding":"base64"},"device":"d1","n":"7","neg":"-2","ok":"true"}`
	if string(got) != want {
		t.Fatalf("iggy_headers %s, want %s", got, want)
	}
}

// TestRetryAfterAndSameKey: a 503 with Retry-After: 1 is waited (one second, although
// retry_delay is 1ms) and the retry carries the same key and body; a 408 and a 429 are
// retried too; the offset is committed only after the success.
func TestRetryAfterAndSameKey(t *testing.T) {
	rc := receiver(t, func(n int, _ *webhooktest.Request) webhooktest.Answer {
		switch n {
		case 1:
			return webhooktest.Answer{Status: 503, RetryAfter: "1"}
		case 2:
			return webhooktest.Answer{Status: 408}
		case 3:
			return webhooktest.Answer{Status: 429}
		}
		return webhooktest.Answer{}
	})
	c := sdktest.NewCommitter()
	c.Assign(sdktest.Part(0), 0)
	s := open(t, map[string]any{"url": rc.URL(), "batch_mode": "ndjson", "retry_delay": "1ms", "max_retry_delay": "2ms"}, c, sdk.FailureStop)
	if err := consume(t, s, c, sdk.SchemaJSON, messages(3, jsonMsg)); err != nil {
		t.Fatal(err)
	}
	reqs := rc.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for _, r := range reqs[1:] {
		if r.Key != reqs[0].Key || string(r.Body) != string(reqs[0].Body) {
			t.Fatalf("request %d: key %q and body differ from the first's %q", r.N, r.Key, reqs[0].Key)
		}
	}
	if waited := reqs[1].Arrived.Sub(reqs[0].Arrived); waited < time.Second {
		t.Fatalf("the retry came %v after a Retry-After: 1", waited)
	}
	if off, ok := c.Committed(sdktest.Part(0)); !ok || off != 2 {
		t.Fatalf("committed %d %v, want 2", off, ok)
	}
}

// TestNothingCommittedBeforeSuccess: a receiver that keeps failing makes Consume fail
// after max_retries with nothing committed; the retry of the batch carries the same key.
func TestNothingCommittedBeforeSuccess(t *testing.T) {
	failing := true
	rc := receiver(t, func(int, *webhooktest.Request) webhooktest.Answer {
		if failing {
			return webhooktest.Answer{Status: 500}
		}
		return webhooktest.Answer{Status: 202}
	})
	c := sdktest.NewCommitter()
	c.Assign(sdktest.Part(0), 0)
	s := open(t, map[string]any{"url": rc.URL(), "batch_mode": "json_array", "max_retries": 2, "retry_delay": "1ms"}, c, sdk.FailureStop)
	err := consume(t, s, c, sdk.SchemaJSON, messages(3, jsonMsg))
	if err == nil || !strings.Contains(err.Error(), "POST "+rc.URL()+": status 500") || errors.Is(err, sdk.ErrPermanent) {
		t.Fatalf("consume returned %v, want a transient status 500 naming the URL", err)
	}
	if n := len(rc.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (max_retries 2)", n)
	}
	if _, ok := c.Committed(sdktest.Part(0)); ok {
		t.Fatal("committed after a failure")
	}
	failing = false
	if err := consume(t, s, c, sdk.SchemaJSON, messages(3, jsonMsg)); err != nil {
		t.Fatal(err)
	}
	if off, ok := c.Committed(sdktest.Part(0)); !ok || off != 2 {
		t.Fatalf("committed %d %v, want 2", off, ok)
	}
	reqs := rc.Requests()
	if reqs[3].Key != reqs[0].Key || reqs[3].Status != 202 {
		t.Fatalf("the batch's retry: key %q status %d, want %q 202", reqs[3].Key, reqs[3].Status, reqs[0].Key)
	}
}

// TestPermanentRefusals: a 4xx other than 408/429 is not retried. In individual mode it
// rejects that message alone: under skip the rest is sent and committed, under stop
// nothing at or past it is sent or committed. In a batch mode the batch is permanent, and
// so is a body over max_payload_size_bytes.
func TestPermanentRefusals(t *testing.T) {
	refuse2 := func(_ int, r *webhooktest.Request) webhooktest.Answer {
		if strings.Contains(string(r.Body), `"n":2`) {
			return webhooktest.Answer{Status: 422}
		}
		return webhooktest.Answer{}
	}
	for _, tc := range []struct {
		fail      sdk.OnFailure
		committed uint64
		requests  int
	}{{sdk.FailureSkip, 4, 5}, {sdk.FailureDeadLetter, 4, 5}, {sdk.FailureStop, 1, 3}} {
		rc := receiver(t, refuse2)
		c := sdktest.NewCommitter()
		c.Assign(sdktest.Part(0), 0)
		s := open(t, map[string]any{"url": rc.URL()}, c, tc.fail)
		err := consume(t, s, c, sdk.SchemaJSON, messages(5, jsonMsg))
		if got := sdktest.Rejected(err); fmt.Sprint(got) != "[2]" || !strings.Contains(err.Error(), "offset 2: POST "+rc.URL()+": status 422") {
			t.Fatalf("%s: consume returned %v, want offset 2 rejected with status 422", tc.fail, err)
		}
		if off, ok := c.Committed(sdktest.Part(0)); !ok || off != tc.committed {
			t.Fatalf("%s: committed %d %v, want %d", tc.fail, off, ok, tc.committed)
		}
		if n := len(rc.Requests()); n != tc.requests {
			t.Fatalf("%s: %d requests, want %d", tc.fail, n, tc.requests)
		}
	}

	rc := receiver(t, func(int, *webhooktest.Request) webhooktest.Answer { return webhooktest.Answer{Status: 404} })
	s := open(t, map[string]any{"url": rc.URL(), "batch_mode": "ndjson"}, nil, sdk.FailureStop)
	if err := consume(t, s, nil, sdk.SchemaJSON, messages(3, jsonMsg)); !errors.Is(err, sdk.ErrPermanent) || len(rc.Requests()) != 1 {
		t.Fatalf("a 404 in ndjson: %v after %d requests, want permanent after 1", err, len(rc.Requests()))
	}
	small := open(t, map[string]any{"url": rc.URL(), "batch_mode": "ndjson", "max_payload_size_bytes": 100}, nil, sdk.FailureStop)
	if err := consume(t, small, nil, sdk.SchemaJSON, messages(3, jsonMsg)); !errors.Is(err, sdk.ErrPermanent) || !strings.Contains(err.Error(), "over max_payload_size_bytes (100)") {
		t.Fatalf("an oversized body: %v", err)
	}
}

// TestCrashAtEveryStep: sdktest's harness, a crash at every step, a receiver that refuses
// every fifth request: after deduplication by the idempotency key every message exactly once.
func TestCrashAtEveryStep(t *testing.T) {
	for _, mode := range []string{"ndjson", "individual"} {
		t.Run(mode, func(t *testing.T) {
			rc := receiver(t, func(n int, _ *webhooktest.Request) webhooktest.Answer {
				if n%5 == 0 {
					return webhooktest.Answer{Status: 503}
				}
				return webhooktest.Answer{}
			})
			sdktest.SinkHarness{
				New:            func() sdk.Sink { return New() },
				Config:         map[string]any{"url": rc.URL(), "batch_mode": mode, "retry_delay": "1ms"},
				SinkControlled: true,
				Guarantee:      sdktest.ExactlyOnce,
				Reset:          func(context.Context) error { rc.Reset(); return nil },
				Read: func(context.Context) ([]sdktest.Record, error) {
					var recs []sdktest.Record
					for _, body := range rc.Accepted() {
						for line := range strings.Lines(string(body)) {
							var env struct {
								Metadata struct {
									Partition uint32 `json:"iggy_partition_id"`
									Offset    uint64 `json:"iggy_offset"`
								}
								Payload json.RawMessage
							}
							if err := json.Unmarshal([]byte(line), &env); err != nil {
								return nil, fmt.Errorf("%q: %w", line, err)
							}
							recs = append(recs, sdktest.Record{Partition: env.Metadata.Partition, Offset: env.Metadata.Offset, Payload: env.Payload})
						}
					}
					return recs, nil
				},
			}.CrashAtEveryStep(t)
			t.Logf("last run: %d requests, %d replays answered as duplicates", len(rc.Requests()), rc.Replays())
		})
	}
}

// TestUnreachable: an unreachable URL fails the health check at open, and a send, naming
// the URL; the password of a URL is never shown.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	url := "http://user:hunter2@" + addr + "/hook"
	s := New()
	err = s.Open(ctxT(t), sdktest.SinkEnv(t, map[string]any{"url": url, "health_check_enabled": true}, nil))
	if err == nil || !strings.Contains(err.Error(), "health check HEAD "+sdk.RedactURL(url)) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("open: %v", err)
	}
	s = open(t, map[string]any{"url": url, "max_retries": 0}, nil, sdk.FailureStop)
	err = consume(t, s, nil, sdk.SchemaJSON, messages(1, jsonMsg))
	if err == nil || !strings.Contains(err.Error(), "POST "+sdk.RedactURL(url)) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("consume: %v", err)
	}
}
