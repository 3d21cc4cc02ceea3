package kafka

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/internal/kafkatest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// benchRecords is how many 200-byte records each side of a benchmark writes
// (FERRY_BENCH_RECORDS, default 200,000).
func benchRecords() int {
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// BenchmarkSinkSideBySide writes the same records to Kafka twice in one run: franz-go's own
// transactional produce loop (a transaction per 1000 records, zstd, acks=all) and the sink's
// Consume (a transaction per batch of 1000 with its offsets record, then the Iggy commit),
// one partition at a time; it reports records/s of each and their ratio (goal ≥ 0.5).
func BenchmarkSinkSideBySide(b *testing.B) {
	br := kafkatest.Connect(b)
	n, batch := benchRecords(), 1000
	value := make([]byte, 200)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	ctx := context.Background()
	for b.Loop() {
		// franz-go alone.
		bare := br.Topic(b, 3)
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Bootstrap), kgo.TransactionalID(kafkatest.Name(b, "bare")),
			kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := 0; i < n; i += batch {
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			p := int32(i / batch % 3)
			for j := i; j < min(i+batch, n); j++ {
				cl.Produce(ctx, &kgo.Record{Topic: bare, Partition: p, Key: []byte(strconv.Itoa(j)), Value: value}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
		bareRate := float64(n) / time.Since(start).Seconds()
		cl.Close()

		// The sink.
		topic := br.Topic(b, 3)
		c := sdktest.NewCommitter()
		s := New()
		cfg := map[string]any{"bootstrap_servers": []string{br.Bootstrap}, "topic": topic, "offsets_topic": topic + ".offsets"}
		if err := s.Open(ctx, sdktest.SinkEnv(b, cfg, c)); err != nil {
			b.Fatal(err)
		}
		parts := []sdk.Partition{sdktest.Part(0), sdktest.Part(1), sdktest.Part(2)}
		if _, err := s.Assigned(ctx, sdktest.Topic, parts); err != nil {
			b.Fatal(err)
		}
		next := make([]uint64, 3)
		for _, p := range parts {
			c.Assign(p, 0)
		}
		msgs := make([]sdk.ConsumedMessage, batch)
		start = time.Now()
		for i := 0; i < n; i += batch {
			p := i / batch % 3
			k := min(batch, n-i)
			for j := range k {
				msgs[j] = sdk.ConsumedMessage{Offset: next[p] + uint64(j), ID: sdk.MessageIDFromUint64(uint64(i + j + 1)), Payload: value}
			}
			if err := sdktest.Consume(ctx, s, c, sdktest.Topic, parts[p], msgs[:k]); err != nil {
				b.Fatal(err)
			}
			next[p] += uint64(k)
		}
		sinkRate := float64(n) / time.Since(start).Seconds()
		_ = s.Close(ctx)
		b.ReportMetric(bareRate, "franzgo_records/s")
		b.ReportMetric(sinkRate, "sink_records/s")
		b.ReportMetric(sinkRate/bareRate, "ratio")
		b.Logf("%d records of 200 bytes, transactions of %d: franz-go %.0f records/s, sink %.0f records/s (%.2f×)", n, batch, bareRate, sinkRate, sinkRate/bareRate)
	}
}
