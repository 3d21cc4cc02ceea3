package connect

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// latencySink stands for a target with a fixed round trip: every Consume takes latency,
// whatever its size, and batches of different partitions may overlap (sdk.ConcurrentSink).
type latencySink struct {
	latency time.Duration
	got     atomic.Uint64
}

func (s *latencySink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (s *latencySink) Close(context.Context) error             { return nil }
func (s *latencySink) MaxInFlight() int                        { return sdk.MaxConcurrentUnlimited }

func (s *latencySink) Consume(_ context.Context, _ sdk.TopicMetadata, _ sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	time.Sleep(s.latency) // the target's round trip, not a wait for an event
	s.got.Add(uint64(len(msgs)))
	return nil
}

// BenchmarkSlowSinkInFlight shows what max_in_flight buys against a target with a 5 ms
// round trip per batch (batch_length 100, after_consuming, 1,200 messages per partition):
// messages per second for 1, 3 and 12 partitions at max_in_flight 1, 3 and 12. With one
// partition it cannot help (a partition's batches stay in order, one at a time).
//
//	go test -run '^$' -bench SlowSinkInFlight -benchtime 1x ./connect/
func BenchmarkSlowSinkInFlight(b *testing.B) {
	const perPartition, latency = 1200, 5 * time.Millisecond
	for _, parts := range []uint32{1, 3, 12} {
		for _, n := range []uint32{1, 3, 12} {
			b.Run(fmt.Sprintf("partitions=%d/max_in_flight=%d", parts, n), func(b *testing.B) {
				var rate float64
				for range b.N {
					env := newIggyEnv(b)
					env.Topic("s", "t", parts)
					for p := uint32(0); p < parts; p++ {
						env.Fill("s", "t", p, perPartition, nil)
					}
					sink := &latencySink{latency: latency}
					cfg := benchSinkConfig(config.CommitAfterConsuming, 100, "builtin:rec", "g")
					cfg.MaxInFlight = n
					cfg.Streams[0].Stream = "s"
					start := time.Now()
					rt := env.start(cfg, sink)
					want := uint64(perPartition) * uint64(parts)
					testkit.WaitFor(b, fmt.Sprintf("%d delivered", want), func() bool { return sink.got.Load() >= want })
					rate = float64(want) / time.Since(start).Seconds()
					stopRuntime(b, rt)
				}
				b.ReportMetric(rate, "msgs/s")
			})
		}
	}
}
