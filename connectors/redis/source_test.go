package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// fillStreams empties the streams (their groups with them) and appends n entries to each,
// payload "<stream>/<i>" in the field payload; it returns each stream's entry ids in order.
func fillStreams(ctx context.Context, c *goredis.Client, streams []string, n int) (map[string][]string, error) {
	if err := c.Del(ctx, streams...).Err(); err != nil {
		return nil, err
	}
	ids := map[string][]string{}
	for _, st := range streams {
		for i := range n {
			id, err := c.XAdd(ctx, &goredis.XAddArgs{Stream: st, Values: []any{"payload", fmt.Sprintf("%s/%d", st, i)}}).Result()
			if err != nil {
				return nil, err
			}
			ids[st] = append(ids[st], id)
		}
	}
	return ids, nil
}

// crashingSources returns New for a harness: each new instance first drops the previous
// one's connections, as its process's death would.
func crashingSources() func() sdk.Source {
	var mu sync.Mutex
	var prev *Source
	return func() sdk.Source {
		mu.Lock()
		defer mu.Unlock()
		if prev != nil && prev.client != nil {
			_ = prev.client.Close()
		}
		prev = NewSource()
		return prev
	}
}

// entriesOf returns, per stream, the entry ids the log holds, in log order per partition.
func entriesOf(t *testing.T, l *sdktest.Log) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	where := map[string]uint32{}
	for _, s := range l.All() {
		st, ok1 := sdk.Lookup(s.Message.Headers, HeaderStream)
		id, ok2 := sdk.Lookup(s.Message.Headers, HeaderEntryID)
		if !ok1 || !ok2 {
			t.Fatalf("partition %d offset %d has no %s/%s headers", s.Partition, s.Offset, HeaderStream, HeaderEntryID)
		}
		k := string(st.Value)
		if p, seen := where[k]; seen && p != s.Partition {
			t.Fatalf("stream %s found in partitions %d and %d", k, p, s.Partition)
		}
		where[k] = s.Partition
		i := len(out[k])
		if want := fmt.Sprintf("%s/%d", k, i); string(s.Message.Payload) != want {
			t.Fatalf("stream %s entry %d (%s): payload %q, want %q", k, i, id.Value, s.Message.Payload, want)
		}
		out[k] = append(out[k], string(id.Value))
	}
	return out
}

// TestSourceCrashAtEveryStep: three streams of 10 entries into three partitions, exactly
// once with a crash at every step of the runtime's sequence: an entry appended and not
// acknowledged (the crash between the append and the ack) is found by the read-back and
// acknowledged, not sent again; one read and not appended is read again from the pending
// list.
func TestSourceCrashAtEveryStep(t *testing.T) {
	url, c := redisURL(t)
	streams := []string{"src:crash:a", "src:crash:b", "src:crash:c"}
	var want map[string][]string
	sdktest.SourceHarness{
		New:        crashingSources(),
		Config:     map[string]any{"url": url, "stream_keys": streams, "batch_size": 4, "block": "20ms"},
		Partitions: 3,
		Reset: func(ctx context.Context) (err error) {
			want, err = fillStreams(ctx, c, streams, 10)
			return err
		},
		Done: func(l *sdktest.Log) bool { return l.Len() >= 30 },
		Check: func(t *testing.T, l *sdktest.Log) {
			got := entriesOf(t, l)
			for _, st := range streams {
				if fmt.Sprint(got[st]) != fmt.Sprint(want[st]) {
					t.Fatalf("stream %s: Iggy holds %v, want %v (each once, in order)", st, got[st], want[st])
				}
			}
		},
	}.CrashAtEveryStep(t)
}

// openSource opens a source on log with cfg over url's streams.
func openSource(t *testing.T, cfg map[string]any, log *sdktest.Log) *Source {
	t.Helper()
	s := NewSource()
	if err := s.Open(context.Background(), sdktest.SourceEnv(t, cfg, nil, log)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func pending(t *testing.T, c *goredis.Client, stream, group string) int64 {
	t.Helper()
	p, err := c.XPending(context.Background(), stream, group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

func gauge(s *Source, name string) uint64 {
	for _, g := range s.Gauges() {
		if g.Name == name {
			return g.Value
		}
	}
	return 0
}

// TestSourceAcksOnlyAfterIggy: the entries of a batch stay pending in the group until its
// AckFunc reports Iggy confirmed them; a nack leaves them pending and the next Read hands
// them again, first, before anything new.
func TestSourceAcksOnlyAfterIggy(t *testing.T) {
	url, c := redisURL(t)
	ctx := context.Background()
	ids, err := fillStreams(ctx, c, []string{"src:ack"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	s := openSource(t, map[string]any{"url": url, "stream_keys": []string{"src:ack"}, "batch_size": 3, "group": "g", "block": "10ms"}, sdktest.NewLog(1))
	b, ack, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Messages) != 3 || pending(t, c, "src:ack", "g") != 3 {
		t.Fatalf("first batch %d messages, %d pending; want 3 and 3", len(b.Messages), pending(t, c, "src:ack", "g"))
	}
	if err := ack(ctx, fmt.Errorf("not delivered")); err != nil {
		t.Fatal(err)
	}
	if n := pending(t, c, "src:ack", "g"); n != 3 {
		t.Fatalf("after the nack %d pending, want 3", n)
	}
	b2, ack2, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(b2); fmt.Sprint(got) != fmt.Sprint(ids["src:ack"][:3]) {
		t.Fatalf("after the nack read %v, want %v again", got, ids["src:ack"][:3])
	}
	if err := ack2(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := pending(t, c, "src:ack", "g"); n != 0 {
		t.Fatalf("after the ack %d pending, want 0", n)
	}
	b3, ack3, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(b3); fmt.Sprint(got) != fmt.Sprint(ids["src:ack"][3:]) {
		t.Fatalf("third read %v, want %v", got, ids["src:ack"][3:])
	}
	_ = ack3(ctx, nil)
	if g := gauge(s, "entries_acked"); g != 5 {
		t.Fatalf("entries_acked = %d, want 5", g)
	}
	if g := gauge(s, "entries_redelivered"); g != 3 {
		t.Fatalf("entries_redelivered = %d, want 3 (the nacked batch)", g)
	}
}

func idsOf(b sdk.SourceBatch) []string {
	var out []string
	for _, m := range b.Messages {
		f, _ := sdk.Lookup(m.Headers, HeaderEntryID)
		out = append(out, string(f.Value))
	}
	return out
}

// TestSourceClaimsIdleEntries: entries another consumer of the group read and never
// acknowledged (its process died) are claimed once idle for claim_idle, sent and counted.
func TestSourceClaimsIdleEntries(t *testing.T) {
	url, c := redisURL(t)
	ctx := context.Background()
	ids, err := fillStreams(ctx, c, []string{"src:claim"}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.XGroupCreate(ctx, "src:claim", "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{"src:claim", ">"}, Count: 5, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	log := sdktest.NewLog(1)
	s := openSource(t, map[string]any{"url": url, "stream_keys": []string{"src:claim"}, "group": "g", "consumer": "alive", "claim_idle": "1ms", "block": "10ms"}, log)
	var got []string
	for len(got) < 8 {
		b, ack, err := s.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.Append(b.Messages)
		got = append(got, idsOf(b)...)
		if err := ack(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The 3 never delivered come first (XREADGROUP >) or after the claim of the 5: every id
	// once either way.
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for _, id := range ids["src:claim"] {
		if seen[id] != 1 {
			t.Fatalf("entry %s sent %d times (got %v)", id, seen[id], got)
		}
	}
	if g := gauge(s, "entries_claimed"); g != 5 {
		t.Fatalf("entries_claimed = %d, want 5", g)
	}
	if n := pending(t, c, "src:claim", "g"); n != 0 {
		t.Fatalf("%d pending after the claims, want 0", n)
	}
}

// TestSourcePayloads: an entry with the field alone gives its value; any other a JSON
// object of its fields; each message's id is derived from its stream and entry id.
func TestSourcePayloads(t *testing.T) {
	url, c := redisURL(t)
	ctx := context.Background()
	_ = c.Del(ctx, "src:payloads").Err()
	id1 := c.XAdd(ctx, &goredis.XAddArgs{Stream: "src:payloads", Values: []any{"body", "raw"}}).Val()
	c.XAdd(ctx, &goredis.XAddArgs{Stream: "src:payloads", Values: []any{"a", "1", "b", "x"}})
	s := openSource(t, map[string]any{"url": url, "stream_keys": []string{"src:payloads"}, "field": "body", "block": "10ms"}, sdktest.NewLog(1))
	b, ack, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ack(ctx, nil) }()
	if len(b.Messages) != 2 || string(b.Messages[0].Payload) != "raw" || string(b.Messages[1].Payload) != `{"a":"1","b":"x"}` {
		t.Fatalf("payloads = %v", b.Messages)
	}
	if string(b.Messages[0].PartitionKey) != "src:payloads" {
		t.Fatalf("partition key %q, want the stream", b.Messages[0].PartitionKey)
	}
	again := s.message("src:payloads", goredis.XMessage{ID: id1, Values: map[string]any{"body": "raw"}})
	if again.ID != b.Messages[0].ID || b.Messages[0].ID == b.Messages[1].ID {
		t.Fatalf("ids %x %x, again %x: want the same id for the same entry, distinct ones otherwise", b.Messages[0].ID, b.Messages[1].ID, again.ID)
	}
}

// TestSourceOpenErrors: what cannot work is said naming the server, the stream or the
// key; a refused login and a key that is not a stream are permanent.
func TestSourceOpenErrors(t *testing.T) {
	url, c := redisURL(t)
	ctx := context.Background()
	if err := c.Do(ctx, "ACL", "SETUSER", "ferry-src-test", "on", ">right", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Do(context.Background(), "ACL", "DELUSER", "ferry-src-test") })
	if err := c.Set(ctx, "src:not-a-stream", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/0"), "redis://")
	for _, tc := range []struct {
		name      string
		cfg       map[string]any
		want      string
		permanent bool
	}{
		{"closed port", map[string]any{"url": "redis://127.0.0.1:1/0", "stream_keys": []string{"s"}}, "connect to Redis at 127.0.0.1:1", false},
		{"wrong password", map[string]any{"url": "redis://ferry-src-test:wrong@" + host + "/0", "stream_keys": []string{"s"}}, "WRONGPASS", true},
		{"not a stream", map[string]any{"url": url, "stream_keys": []string{"src:not-a-stream"}}, `create group "ferry-test" on stream "src:not-a-stream"`, true},
		{"no stream keys", map[string]any{"url": url, "stream_keys": []string{}}, "plugin_config.stream_keys", true},
		{"twice", map[string]any{"url": url, "stream_keys": []string{"a", "a"}}, `"a" is listed twice`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			octx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			s := NewSource()
			err := s.Open(octx, sdktest.SourceEnv(t, tc.cfg, nil, sdktest.NewLog(1)))
			if err == nil {
				_ = s.Close(ctx)
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "wrong@") {
				t.Fatalf("error %q, want it to name %q (and never the password)", err, tc.want)
			}
			if errors.Is(err, sdk.ErrPermanent) != tc.permanent {
				t.Fatalf("permanent = %v, want %v (%v)", !tc.permanent, tc.permanent, err)
			}
		})
	}
}
