package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
)

// discardWriter is a ResponseWriter that keeps only the byte count.
type discardWriter struct {
	h http.Header
	n int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// benchSource is sinks sinks of partitions partitions each (every sink with its four
// stage histograms and a store latency histogram) and one source.
func benchSource(sinks, partitions int) fixedSource {
	stages := func(names ...string) map[string]connect.Histogram {
		m := map[string]connect.Histogram{}
		for _, n := range names {
			m[n] = hist(connect.StageBounds, time.Second, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)
		}
		return m
	}
	latency := fixture().sts[0].Stats.StoreLatency
	src := fixedSource{sinks: sinks, sources: 1}
	src.sts = append(src.sts, connect.Status{Key: "gen", Kind: connect.KindSource, State: connect.StateRunning,
		Stats: connect.Stats{Produced: 1e9, Sent: 1e9,
			Stages: stages(connect.StageDecode, connect.StagePrepare, connect.StageIggySend, connect.StageStateSave, connect.StageTotal)}})
	for i := range sinks {
		st := connect.Status{Key: fmt.Sprintf("sink-%d", i), Kind: connect.KindSink, State: connect.StateRunning,
			Stats: connect.Stats{Polled: 1e9, Delivered: 1e9, Committed: 1e9, Stores: 1e6, StoreLatency: latency,
				Stages: stages(connect.StageDecode, connect.StagePrepare, connect.StageFFI, connect.StageTotal)}}
		for p := range partitions {
			st.Partitions = append(st.Partitions, connect.PartitionStatus{Stream: "stream", Topic: "topic",
				Partition: uint32(p), State: "owned", Polled: 1e8, Delivered: 1e8, Done: 1e8, Stored: 1e8 - 10,
				Pending: 10, Uncommitted: 10, Current: 1e8 + 500, Lag: 510})
		}
		src.sts = append(src.sts, st)
	}
	return src
}

// BenchmarkScrape is the cost of one scrape of Handler (gather every family, the Go and
// process collectors included, and encode it as OpenMetrics) for 4 sinks × 16 partitions
// and a source. The runtime's part (Status) is not in it: the fixed statuses are built
// once.
func BenchmarkScrape(b *testing.B) {
	h := Handler(benchSource(4, 16))
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		w.n = 0
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(w.n), "bytes/scrape")
}

// BenchmarkScrapeConnectors is the part of BenchmarkScrape that is Iggy's and Ferry's
// families (collect and write them), without the Go and process collectors.
func BenchmarkScrapeConnectors(b *testing.B) {
	src := benchSource(4, 16)
	var e textEmitter
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		e.reset()
		collect(context.Background(), &e, src)
		buf = e.write(buf[:0], true)
	}
	b.ReportMetric(float64(len(buf)), "bytes/scrape")
}
