package mongodb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferryio/ferry/internal/mongotest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// benchDocuments is how many JSON messages each side of the benchmark writes
// (FERRY_BENCH_RECORDS, default 30,000).
func benchDocuments() int {
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 30_000
}

// benchPayload is a 200-byte-or-so JSON event.
func benchPayload(p uint32, o uint64) []byte {
	return fmt.Appendf(nil, `{"p":%d,"o":%d,"user":"u-%06d","kind":"click","tags":["a","b","c"],"amount":%d.25,"note":"%0120d"}`,
		p, o, o%100000, o%1000, 0)
}

// BenchmarkSinkSideBySide writes the same documents to the server twice per round, in one
// run: the driver's own loop (InsertMany of 100 finished documents, unordered, w=1, one
// partition's messages after another) and the sink's Consume (batches of 1000 messages:
// the documents built from the messages, inserted 100 at a time, then the commit), on the
// same server, each into a fresh collection; the best of two rounds of each, documents/s
// and their ratio (goal ≥ 0.8).
func BenchmarkSinkSideBySide(b *testing.B) {
	srv := mongotest.Connect(b)
	n, batch := benchDocuments(), 1000
	ctx := context.Background()
	msgs := make([][]sdk.ConsumedMessage, 3)
	for p := range msgs {
		msgs[p] = sdktest.Messages(uint32(p), 0, uint64(n/3), benchPayload)
	}
	build := builder{metadata: true, checksum: true, origin: true, format: FormatJSON}
	var docs []any
	for p := range msgs {
		for i := range msgs[p] {
			d, err := build.document(sdktest.Topic, uint32(p), &msgs[p][i])
			if err != nil {
				b.Fatal(err)
			}
			docs = append(docs, d)
		}
	}
	for b.Loop() {
		db := srv.Database(b)
		var bareRate, sinkRate float64
		for round := range 2 {
			// The driver alone, given the finished documents.
			coll := srv.Client.Database(db).Collection(fmt.Sprintf("bare%d", round))
			start := time.Now()
			for i := 0; i < len(docs); i += 100 {
				if _, err := coll.InsertMany(ctx, docs[i:min(i+100, len(docs))], options.InsertMany().SetOrdered(false)); err != nil {
					b.Fatal(err)
				}
			}
			bareRate = max(bareRate, float64(len(docs))/time.Since(start).Seconds())

			// The sink.
			c := sdktest.NewCommitter()
			s := New()
			cfg := map[string]any{"connection_uri": srv.URI, "database": db, "collection": fmt.Sprintf("sink%d", round),
				"auto_create_collection": true, "payload_format": "json"}
			if err := s.Open(ctx, sdktest.SinkEnv(b, cfg, c)); err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			for p := range msgs {
				for i := 0; i < len(msgs[p]); i += batch {
					if err := sdktest.Consume(ctx, s, c, sdktest.Topic, sdktest.Part(uint32(p)), msgs[p][i:min(i+batch, len(msgs[p]))]); err != nil {
						b.Fatal(err)
					}
				}
			}
			sinkRate = max(sinkRate, float64(len(docs))/time.Since(start).Seconds())
			_ = s.Close(ctx)
		}
		b.ReportMetric(bareRate, "driver_docs/s")
		b.ReportMetric(sinkRate, "sink_docs/s")
		b.ReportMetric(sinkRate/bareRate, "ratio")
		b.Logf("%d JSON documents (%d-byte payloads), InsertMany of 100 unordered: driver %.0f docs/s, sink %.0f docs/s (%.2f×)",
			len(docs), len(benchPayload(0, 0)), bareRate, sinkRate, sinkRate/bareRate)
	}
}
