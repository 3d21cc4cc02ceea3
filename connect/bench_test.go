package connect

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// nullSink accepts everything.
type nullSink struct{}

func (nullSink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (nullSink) Consume(context.Context, sdk.TopicMetadata, sdk.MessagesMetadata, []sdk.ConsumedMessage) error {
	return nil
}
func (nullSink) Close(context.Context) error { return nil }

// committingNull commits each batch's last offset (sink_controlled).
type committingNull struct{ c sdk.Committer }

func (s *committingNull) Open(_ context.Context, env sdk.SinkEnv) error {
	s.c = env.Committer
	return nil
}
func (s *committingNull) Consume(_ context.Context, _ sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	return s.c.Commit(m.Partition, msgs[len(msgs)-1].Offset)
}
func (s *committingNull) Close(context.Context) error { return nil }

// BenchmarkSinkPipeline compares the raw poll loop (baseline) with the sink pipeline to a
// null sink in each commit mode, for batches of 100 and 1000 messages of 100 bytes. Each
// sub-benchmark reports msgs/s; pipeline runs also report their ratio to the baseline of
// the same batch size measured in the same run. Over the in-memory backend this measures
// the runtime's own overhead; the connect_test benchmark does the same over real TCP.
func BenchmarkSinkPipeline(b *testing.B) {
	payload := make([]byte, 100)
	for _, batch := range []uint32{100, 1000} {
		var base float64
		b.Run(fmt.Sprintf("batch=%d/raw_poll", batch), func(b *testing.B) {
			be := newMemBackend()
			be.addTopicPayload("s", "t", 1, b.N, payload)
			cons, _ := be.newConsumer(context.Background(), consumerConfig{Stream: "s", Topic: "t", Group: "g", BatchSize: batch})
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for n := 0; n < b.N; {
				bt, err := cons.Poll(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n += len(bt.Messages)
				bt.Release()
			}
			base = float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(base, "msgs/s")
		})
		for _, mode := range allModes {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, mode), func(b *testing.B) {
				be := newMemBackend()
				be.addTopicPayload("s", "t", 1, b.N, payload)
				cfg := testSinkConfig(mode, config.FailureStop)
				cfg.Streams[0].BatchLength = batch
				cfg.Commit.MaxUncommitted = config.DefaultMaxUncommitted
				var sink sdk.Sink = nullSink{}
				if mode == config.CommitSinkControlled {
					sink = &committingNull{}
				}
				reg := sdk.NewRegistry().AddSink("rec", func() sdk.Sink { return sink })
				rt := newRuntime(&config.Connectors{Sinks: []*config.Sink{cfg}}, be, reg, nil, quietLog)
				b.ResetTimer()
				start := time.Now()
				if err := rt.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				for rt.Status()[0].Stats.Delivered < uint64(b.N) {
					time.Sleep(100 * time.Microsecond)
				}
				rate := float64(b.N) / time.Since(start).Seconds()
				b.StopTimer()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := rt.Stop(ctx); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(rate, "msgs/s")
				if base > 0 {
					b.ReportMetric(rate/base, "x_raw")
				}
			})
		}
	}
}
