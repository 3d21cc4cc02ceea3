package redis

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// BenchmarkSinkSideBySide writes batches of 1000 messages of 100 B into one stream, side
// by side in one run: the sink's Consume (ids from offsets, one pipeline per batch), and
// go-redis's own pipelined XADD loop with the same ids and values. Each reports msgs/s.
func BenchmarkSinkSideBySide(b *testing.B) {
	url, c := redisURL(b)
	ctx := context.Background()
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = 'x'
	}
	const batch = 1000
	b.Run("bare_pipelined_xadd", func(b *testing.B) {
		_ = c.Del(ctx, "bench:bare").Err()
		for n := range b.N {
			pipe := c.Pipeline()
			for i := range batch {
				pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "bench:bare", ID: entryID(0, uint64(n*batch+i)), Values: []any{"payload", payload}})
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("sink", func(b *testing.B) {
		_ = c.Del(ctx, "bench:sink:0").Err()
		s := New()
		if err := s.Open(ctx, sdktest.SinkEnv(b, map[string]any{"url": url, "stream_key": "bench:sink:{partition}"}, nil)); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = s.Close(ctx) }()
		for n := range b.N {
			msgs := sdktest.Messages(0, uint64(n*batch), batch, func(uint32, uint64) []byte { return payload })
			if err := s.Consume(ctx, sdktest.Topic, sdk.MessagesMetadata{Partition: sdktest.Part(0)}, msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
	})
}
