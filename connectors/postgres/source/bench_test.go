package source

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCDCSource: changes/s the source decodes and hands over (Read and ack, no Iggy)
// from a bulk insert of b.N rows in one transaction, the WAL decoded by the server included.
func BenchmarkCDCSource(b *testing.B) {
	f := newFixture(b, map[string]string{"a": "id int PRIMARY KEY, v int NOT NULL, note text"})
	s := f.open(f.config(`, "batch_size": 5000`), nil)
	f.exec("INSERT INTO "+f.table("a")+" SELECT g, g, 'row ' || g FROM generate_series(1, $1) g", b.N)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	n := 0
	for n < b.N {
		batch, ack, err := s.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += len(batch.Messages)
		_ = ack(ctx, nil)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "changes/s")
}
