package elasticsearch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// benchDocuments is how many JSON messages each side of the benchmark indexes
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

// BenchmarkSinkSideBySide indexes the same documents into the node twice per round, in
// one run: a bare _bulk loop (net/http, the finished NDJSON bodies of 500 documents with
// their ids, one after another, each answer read and checked for errors) and the sink's
// Consume (batches of 1000 messages of 3 partitions: the documents built from the
// messages, _bulk requests of batch_size = 500, each item checked, then the commit), each
// into a fresh index; the best of two rounds of each, documents/s and their ratio (goal
// ≥ 0.8).
func BenchmarkSinkSideBySide(b *testing.B) {
	url := node(b)
	n, batch, bulk := benchDocuments(), 1000, 500
	ctx := context.Background()
	msgs := make([][]sdk.ConsumedMessage, 3)
	for p := range msgs {
		msgs[p] = sdktest.Messages(uint32(p), 0, uint64(n/3), benchPayload)
	}
	bodies := func(index string) [][]byte {
		var out [][]byte
		var body bytes.Buffer
		k := 0
		for p := range msgs {
			for i := range msgs[p] {
				m := &msgs[p][i]
				body.Write(actionLine(index, fmt.Sprintf("%s:%s:%d:%d", sdktest.Topic.Stream, sdktest.Topic.Topic, p, m.Offset)))
				body.WriteByte('\n')
				body.Write(document(sdk.SchemaJSON, sdktest.Topic, uint32(p), m))
				body.WriteByte('\n')
				if k++; k%bulk == 0 {
					out = append(out, bytes.Clone(body.Bytes()))
					body.Reset()
				}
			}
		}
		if body.Len() > 0 {
			out = append(out, body.Bytes())
		}
		return out
	}
	hc := &http.Client{}
	for b.Loop() {
		var bareRate, sinkRate float64
		for range 2 {
			// The bare loop, given the finished request bodies.
			index := indexName(b)
			if _, err := curl(url+"/"+index, "PUT", ""); err != nil {
				b.Fatal(err)
			}
			reqs := bodies(index)
			start := time.Now()
			for _, body := range reqs {
				resp, err := hc.Post(url+"/_bulk", "application/x-ndjson", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				data, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || bytes.Contains(data[:min(len(data), 64)], []byte(`"errors":true`)) {
					b.Fatalf("bare _bulk: %d %v %.300s", resp.StatusCode, err, data)
				}
			}
			bareRate = max(bareRate, float64(n)/time.Since(start).Seconds())
			if got := count(b, url, index); got != n {
				b.Fatalf("bare loop: %d documents, want %d", got, n)
			}

			// The sink.
			index = indexName(b)
			c := sdktest.NewCommitter()
			s := New()
			if err := s.Open(ctx, sdktest.SinkEnv(b, map[string]any{"url": url, "index": index, "batch_size": bulk}, c)); err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			for p := range msgs {
				part := sdktest.Part(uint32(p))
				c.Assign(part, 0)
				for i := 0; i < len(msgs[p]); i += batch {
					if err := sdktest.Consume(ctx, s, c, sdktest.Topic, part, msgs[p][i:min(i+batch, len(msgs[p]))]); err != nil {
						b.Fatal(err)
					}
				}
			}
			sinkRate = max(sinkRate, float64(n)/time.Since(start).Seconds())
			_ = s.Close(ctx)
			if got := count(b, url, index); got != n {
				b.Fatalf("sink: %d documents, want %d", got, n)
			}
		}
		b.ReportMetric(bareRate, "bare_docs/s")
		b.ReportMetric(sinkRate, "sink_docs/s")
		b.ReportMetric(sinkRate/bareRate, "ratio")
		b.Logf("%d JSON documents (%d-byte payloads), _bulk of %d: bare loop %.0f docs/s, sink %.0f docs/s (%.2f×)",
			n, len(benchPayload(0, 0)), bulk, bareRate, sinkRate, sinkRate/bareRate)
	}
	hc.CloseIdleConnections()
}
