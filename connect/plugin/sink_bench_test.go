package plugin

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// benchBatch is a batch as the runtime hands it over: 1000 messages of 100 bytes, random
// u128 ids and checksums, microsecond timestamps; every 4th message carries two headers
// when withHeaders is set.
func benchBatch(withHeaders bool) []sdk.ConsumedMessage {
	rng := rand.New(rand.NewPCG(1, 2))
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	hdrs := []sdk.Header{{Key: sdk.String("content-type"), Value: sdk.String("application/json")},
		{Key: sdk.String("trace"), Value: sdk.Uint64(0xdeadbeefcafe)}}
	msgs := make([]sdk.ConsumedMessage, 1000)
	for i := range msgs {
		var id sdk.MessageID
		for j := range id {
			id[j] = byte(rng.Uint32())
		}
		m := sdk.ConsumedMessage{ID: id, Offset: 1_000_000 + uint64(i), Checksum: rng.Uint64(),
			Timestamp: 1_764_000_000_000_000 + uint64(i), OriginTimestamp: 1_764_000_000_000_000 + uint64(i), Payload: payload}
		if withHeaders && i%4 == 0 {
			m.Headers = hdrs
		}
		msgs[i] = m
	}
	return msgs
}

// BenchmarkSinkConsume measures Sink.Consume alone into the example C null sink for one
// batch of 1000 × 100-byte messages: encoding plus one cgo call. It reports the fastest and
// the median batch per message (robust on a loaded machine, unlike the mean ns/op).
func BenchmarkSinkConsume(b *testing.B) {
	for _, bc := range []struct {
		name    string
		headers bool
	}{{"no_headers", false}, {"headers", true}} {
		b.Run(bc.name, func(b *testing.B) {
			lib, err := Open(buildC(b, "example_null_sink", "../../examples/plugins/c/null_sink.c"))
			if err != nil {
				b.Fatal(err)
			}
			s, err := lib.NewSink()
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Open(ctx, sdk.SinkEnv{Key: "bench", Config: []byte("null"), Logger: slog.New(slog.DiscardHandler)}); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close(ctx) }()
			msgs := benchBatch(bc.headers)
			meta := sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: 1},
				CurrentOffset: 1_000_999, Schema: sdk.SchemaRaw}
			var ds []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				if err := s.Consume(ctx, probeTopic, meta, msgs); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			slices.Sort(ds)
			perMsg := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(len(msgs)) }
			b.ReportMetric(perMsg(ds[0]), "min-ns/msg")
			b.ReportMetric(perMsg(ds[len(ds)/2]), "median-ns/msg")
		})
	}
}
