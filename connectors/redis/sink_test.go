package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// redisURL is the server of scripts/redis.sh (FERRY_REDIS_URL): the test is skipped
// without it and fails when it is set and Redis does not answer.
func redisURL(t testing.TB) (string, *goredis.Client) {
	t.Helper()
	url := os.Getenv("FERRY_REDIS_URL")
	if url == "" {
		t.Skip(`FERRY_REDIS_URL is not set (eval "$(bash scripts/redis.sh start)")`)
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at FERRY_REDIS_URL does not answer: %v", err)
	}
	return url, c
}

// readStreams reads every entry of the streams matching pattern: the partition and offset
// from the entry id (<offset+1>-<partition>) or, for ids Redis assigned, from the payload.
func readStreams(ctx context.Context, c *goredis.Client, pattern string) ([]sdktest.Record, error) {
	keys, err := c.Keys(ctx, pattern).Result()
	if err != nil {
		return nil, err
	}
	var out []sdktest.Record
	for _, k := range keys {
		entries, err := c.XRange(ctx, k, "-", "+").Result()
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			payload, _ := e.Values["payload"].(string)
			var po struct{ P, O uint64 }
			if err := json.Unmarshal([]byte(payload), &po); err != nil {
				return nil, fmt.Errorf("%s %s: %w", k, e.ID, err)
			}
			out = append(out, sdktest.Record{Partition: uint32(po.P), Offset: po.O, Payload: []byte(payload)})
			ms, seq, _ := strings.Cut(e.ID, "-")
			if !strings.HasSuffix(k, ":auto") && (ms != strconv.FormatUint(po.O+1, 10) || seq != strconv.FormatUint(po.P, 10) || !strings.HasSuffix(k, ":"+seq)) {
				return nil, fmt.Errorf("%s: entry %s holds partition %d offset %d", k, e.ID, po.P, po.O)
			}
		}
	}
	return out, nil
}

// TestSinkExactlyOnceCrashAtEveryStep: with {partition} in stream_key the entry ids come
// from the offsets, so a replay after a crash at any step is refused by Redis: each
// message once, in both commit modes that store.
func TestSinkExactlyOnceCrashAtEveryStep(t *testing.T) {
	url, c := redisURL(t)
	for _, sc := range []bool{true, false} {
		t.Run(fmt.Sprintf("sink_controlled=%v", sc), func(t *testing.T) {
			prefix := fmt.Sprintf("eo%v", sc)
			sdktest.SinkHarness{
				New:            func() sdk.Sink { return New() },
				Config:         map[string]any{"url": url, "stream_key": prefix + ":{stream}:{topic}:{partition}"},
				SinkControlled: sc,
				Guarantee:      sdktest.ExactlyOnce,
				Reset:          func(ctx context.Context) error { return c.FlushDB(ctx).Err() },
				Read:           func(ctx context.Context) ([]sdktest.Record, error) { return readStreams(ctx, c, prefix+":*") },
			}.CrashAtEveryStep(t)
		})
	}
}

// TestSinkWithoutPartitionAtLeastOnce: a stream_key without {partition} puts every
// partition in one stream with ids Redis assigns: nothing lost across crashes (at least
// once).
func TestSinkWithoutPartitionAtLeastOnce(t *testing.T) {
	url, c := redisURL(t)
	sdktest.SinkHarness{
		New:            func() sdk.Sink { return New() },
		Config:         map[string]any{"url": url, "stream_key": "alo:{stream}:auto"},
		SinkControlled: true,
		Guarantee:      sdktest.AtLeastOnce,
		Reset:          func(ctx context.Context) error { return c.FlushDB(ctx).Err() },
		Read:           func(ctx context.Context) ([]sdktest.Record, error) { return readStreams(ctx, c, "alo:*") },
	}.CrashAtEveryStep(t)
}

// TestSinkReplayRefusedAndCounted: the same batch consumed twice (a redelivery after a
// crash, by a new sink) leaves each entry once, and the second write is counted as
// duplicates refused by Redis.
func TestSinkReplayRefusedAndCounted(t *testing.T) {
	url, c := redisURL(t)
	ctx := context.Background()
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"url": url}
	msgs := sdktest.Messages(1, 0, 5, sdktest.JSONPayload)
	for round := range 2 {
		s := New()
		cm := sdktest.NewCommitter()
		if err := s.Open(ctx, sdktest.SinkEnv(t, cfg, cm)); err != nil {
			t.Fatal(err)
		}
		if err := sdktest.Consume(ctx, s, cm, sdktest.Topic, sdktest.Part(1), msgs); err != nil {
			t.Fatal(err)
		}
		g := s.Gauges()
		if round == 1 && (g[0].Value != 0 || g[1].Value != 5) {
			t.Fatalf("replay: written %d, duplicates %d; want 0, 5", g[0].Value, g[1].Value)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	key := sdktest.Topic.Stream + ":" + sdktest.Topic.Topic + ":1"
	ids, err := c.XRange(ctx, key, "-", "+").Result()
	if err != nil || len(ids) != 5 || ids[0].ID != "1-1" || ids[4].ID != "5-1" {
		t.Fatalf("stream %s = %v (%v), want ids 1-1 … 5-1", key, ids, err)
	}
}

// TestSinkFieldsFromJSONAndMaxLen: a JSON object's top-level fields become the entry's
// (strings as they are, others as JSON); a payload that is no object is rejected alone;
// maxlen trims approximately.
func TestSinkFieldsFromJSONAndMaxLen(t *testing.T) {
	url, c := redisURL(t)
	ctx := context.Background()
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s := New()
	if err := s.Open(ctx, sdktest.SinkEnv(t, map[string]any{"url": url, "fields_from_json": true, "stream_key": "j:{partition}:{header:tenant}"}, nil)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	payloads := []string{`{"name":"ada","n":3,"tags":["x"]}`, `[1,2]`, `{"name":"bob"}`}
	msgs := sdktest.Messages(0, 0, 3, func(_ uint32, o uint64) []byte { return []byte(payloads[o]) })
	for i := range msgs {
		msgs[i].Headers = []sdk.Header{{Key: sdk.String("tenant"), Value: sdk.String("t1")}}
	}
	err := s.Consume(ctx, sdktest.Topic, sdk.MessagesMetadata{Partition: sdktest.Part(0)}, msgs)
	var rej *sdk.RejectedMessages
	if !errors.As(err, &rej) || len(rej.Offsets) != 1 || rej.Offsets[0] != 1 || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("consume: %v, want offset 1 rejected", err)
	}
	entries, err := c.XRange(ctx, "j:0:t1", "-", "+").Result()
	if err != nil || len(entries) != 2 {
		t.Fatalf("j:0:t1 = %v (%v)", entries, err)
	}
	if v := entries[0].Values; v["name"] != "ada" || v["n"] != "3" || v["tags"] != `["x"]` || entries[0].ID != "1-0" || entries[1].ID != "3-0" {
		t.Fatalf("entries %v", entries)
	}

	m := New()
	if err := m.Open(ctx, sdktest.SinkEnv(t, map[string]any{"url": url, "stream_key": "trim:{partition}", "maxlen": 10}, nil)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(ctx) }()
	for b := range 30 {
		if err := m.Consume(ctx, sdktest.Topic, sdk.MessagesMetadata{Partition: sdktest.Part(0)}, sdktest.Messages(0, uint64(b*100), 100, sdktest.JSONPayload)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.XLen(ctx, "trim:0").Val(); n >= 3000 || n < 10 {
		t.Fatalf("trim:0 holds %d entries, want trimmed to about 10", n)
	}
}

// TestSinkOpenErrors: a bad address, a wrong password and a bad template are named.
func TestSinkOpenErrors(t *testing.T) {
	url, c := redisURL(t)
	ctx := context.Background()
	if err := c.Do(ctx, "ACL", "SETUSER", "ferrytest", "on", ">right", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/0"), "redis://")
	for _, tc := range []struct {
		name      string
		cfg       map[string]any
		permanent bool
		want      []string
	}{
		{"unreachable", map[string]any{"url": "redis://127.0.0.1:1/0"}, false, []string{"connect to Redis at 127.0.0.1:1"}},
		{"wrong password", map[string]any{"url": "redis://ferrytest:wrong@" + host + "/0"}, true, []string{"connect to Redis at " + host, "WRONGPASS"}},
		{"bad template", map[string]any{"url": url, "stream_key": "{strem}"}, true, []string{"plugin_config.stream_key", "unknown placeholder {strem}"}},
		{"bad scheme", map[string]any{"url": "http://x:1"}, true, []string{"plugin_config.url", "scheme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			err := s.Open(ctx, sdktest.SinkEnv(t, tc.cfg, nil))
			if err == nil {
				_ = s.Close(ctx)
				t.Fatal("open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
			if got := errors.Is(err, sdk.ErrPermanent); got != tc.permanent {
				t.Errorf("permanent = %v, want %v: %v", got, tc.permanent, err)
			}
			if strings.Contains(err.Error(), "wrong@") {
				t.Errorf("the password shows in %q", err)
			}
		})
	}
}
