package source

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/internal/kafkatest"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func benchRecords() int {
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// BenchmarkSourceSideBySide reads the same topic (3 partitions of 200-byte records) twice
// in one run: franz-go's own group consume loop into a discarding handler (read_committed,
// as the source) and the source's Read with every batch acknowledged at once (Iggy's
// append left out: this is the connector's own cost, its commits to Kafka included); it
// reports records/s of each and their ratio (goal ≥ 0.8).
func BenchmarkSourceSideBySide(b *testing.B) {
	br := kafkatest.Connect(b)
	n := benchRecords()
	value := make([]byte, 200)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	topic := br.Topic(b, 3)
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: value})
		if len(recs) == cap(recs) || i == n-1 {
			br.Produce(b, recs...)
			recs = recs[:0]
		}
	}
	ctx := context.Background()
	for b.Loop() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Bootstrap), kgo.ConsumerGroup(kafkatest.Name(b, "bare")), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		got := 0
		for got < n {
			fs := cl.PollRecords(ctx, 1000)
			if err := fs.Err0(); err != nil {
				b.Fatal(err)
			}
			fs.EachRecord(func(*kgo.Record) { got++ })
		}
		bareRate := float64(n) / time.Since(start).Seconds()
		cl.Close()

		s := New()
		cfg := map[string]any{"bootstrap_servers": []string{br.Bootstrap}, "topics": []string{topic}, "consumer_group": kafkatest.Name(b, "ferry")}
		if err := s.Open(ctx, sdktest.SourceEnv(b, cfg, nil, sdktest.NewLog(3))); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		got = 0
		for got < n {
			batch, ack, err := s.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got += len(batch.Messages)
			_ = ack(ctx, nil)
		}
		srcRate := float64(n) / time.Since(start).Seconds()
		_ = s.Close(ctx)
		b.ReportMetric(bareRate, "franzgo_records/s")
		b.ReportMetric(srcRate, "source_records/s")
		b.ReportMetric(srcRate/bareRate, "ratio")
		b.Logf("%d records of 200 bytes: franz-go %.0f records/s, source %.0f records/s (%.2f×)", n, bareRate, srcRate, srcRate/bareRate)
	}
}
