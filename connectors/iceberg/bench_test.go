package iceberg

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// benchSchema is the benchmark's six typed columns.
const benchSchema = `"schema":[{"name":"id","type":"long"},{"name":"user","type":"string"},{"name":"amount","type":"double"},
{"name":"ok","type":"boolean"},{"name":"ts","type":"timestamptz"},{"name":"seq","type":"long"}]`

// benchPayload is a 200-byte JSON message filling the six columns (and a note no column takes).
func benchPayload(p uint32, o uint64) []byte {
	b := fmt.Appendf(nil, `{"id":%d,"user":"user-%05d","amount":%d.25,"ok":%t,"ts":"2024-03-16T14:%02d:%02d.123456Z","seq":%d,"note":"`,
		uint64(p)<<40|o, o%100000, o%100000, o%2 == 0, o/60%60, o%60, o)
	for len(b) < 198 {
		b = append(b, 'x')
	}
	return append(b, '"', '}')
}

// peakHeap samples the heap in use until stop is closed.
func peakHeap(stop chan struct{}) *atomic.Uint64 {
	var peak atomic.Uint64
	go func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return &peak
}

// BenchmarkSinkSideBySide: rows/s of the sink (200-byte JSON, six typed columns, three
// partitions, batches of 1000) with flush_interval 10s and 1s, beside iceberg-go's own
// bare loop appending ready Arrow batches of the same rows at the same interval, on the
// SQL catalog (PostgreSQL) and a local warehouse, in one run. FERRY_ICEBERG_BENCH_SECONDS
// sets each run's length (default 3 intervals, at least 10s).
func BenchmarkSinkSideBySide(b *testing.B) {
	for range b.N {
		for _, every := range []time.Duration{10 * time.Second, time.Second} {
			run := max(3*every, 10*time.Second)
			if v := os.Getenv("FERRY_ICEBERG_BENCH_SECONDS"); v != "" {
				var n int
				_, _ = fmt.Sscan(v, &n)
				run = time.Duration(n) * time.Second
			}
			perCommit := benchSink(b, every, run)
			benchBare(b, every, perCommit, run)
		}
	}
}

func benchSink(b *testing.B, every, run time.Duration) (rowsPerCommit uint64) {
	cfg, _ := benchConfig(b, every)
	ctx := context.Background()
	c := sdktest.NewCommitter()
	s := New()
	if err := s.Open(ctx, sdktest.SinkEnv(b, cfg, c)); err != nil {
		b.Fatal(err)
	}
	parts := []sdk.Partition{sdktest.Part(0), sdktest.Part(1), sdktest.Part(2)}
	if _, err := s.Assigned(ctx, sdktest.Topic, parts); err != nil {
		b.Fatal(err)
	}
	batches := make([][]sdk.ConsumedMessage, 3)
	for i := range batches {
		batches[i] = sdktest.Messages(uint32(i), 0, 1000, benchPayload)
	}
	stop := make(chan struct{})
	peak := peakHeap(stop)
	start := time.Now()
	var rows uint64
	for off := uint64(0); time.Since(start) < run; off += 1000 {
		for i, p := range parts {
			msgs := batches[i]
			for j := range msgs {
				msgs[j].Offset = off + uint64(j)
			}
			if err := s.Consume(ctx, sdktest.Topic, sdk.MessagesMetadata{Partition: p, Schema: sdk.SchemaJSON}, msgs); err != nil {
				b.Fatal(err)
			}
			rows += 1000
		}
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	close(stop)
	st := s.stats
	b.Logf("iceberg sink, commits every %s: %d rows in %.1fs = %.0f rows/s; %d commits, %.0f ms per flush, %.1f files per commit, peak heap %d MiB",
		every, rows, took.Seconds(), float64(rows)/took.Seconds(), st.commits, float64(st.took.Milliseconds())/float64(max(st.commits, 1)),
		float64(st.files)/float64(max(st.commits, 1)), peak.Load()>>20)
	return rows / uint64(max(st.commits, 1))
}

// benchBare appends ready Arrow batches with iceberg-go alone, as fast as it goes, one
// transaction per perCommit rows (as many as the sink committed at a time).
func benchBare(b *testing.B, every time.Duration, perCommit uint64, run time.Duration) {
	cfg, _ := benchConfig(b, every)
	ctx := context.Background()
	var tbl *table.Table
	var closeCat func() error
	parsed, err := Config.Parse([]byte(cfg))
	if err != nil {
		b.Fatal(err)
	}
	c := &parsed
	wh, _ := warehouseLocation(c)
	cat, closeCat, err := openCatalog(ctx, c, wh)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = closeCat() }()
	if tbl, err = loadOrCreate(ctx, cat, c, catalog.ToIdentifier("ns", "events"), slog.New(slog.DiscardHandler)); err != nil {
		b.Fatal(err)
	}
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		b.Fatal(err)
	}
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for o := range uint64(3000) {
		bld.Field(0).(*array.Int64Builder).Append(int64(o))
		bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("user-%05d", o))
		bld.Field(2).(*array.Float64Builder).Append(float64(o) + 0.25)
		bld.Field(3).(*array.BooleanBuilder).Append(o%2 == 0)
		bld.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(1_710_597_600_000_000 + o))
		bld.Field(5).(*array.Int64Builder).Append(int64(o))
	}
	batch := bld.NewRecordBatch()
	defer batch.Release()
	start := time.Now()
	var rows uint64
	commits := 0
	for time.Since(start) < run {
		var recs []arrow.RecordBatch
		for n := uint64(0); n < max(perCommit, 3000); n += 3000 {
			batch.Retain()
			recs = append(recs, batch)
			rows += 3000
		}
		rdr, err := array.NewRecordReader(sc, recs)
		if err != nil {
			b.Fatal(err)
		}
		tx := tbl.NewTransaction()
		if err := tx.Append(ctx, rdr, nil); err != nil {
			b.Fatal(err)
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		rdr.Release()
		for _, r := range recs {
			r.Release()
		}
		commits++
	}
	took := time.Since(start)
	b.Logf("iceberg-go bare append loop, %d rows a commit (the sink's at %s): %d rows in %.1fs = %.0f rows/s; %d commits",
		perCommit, every, rows, took.Seconds(), float64(rows)/took.Seconds(), commits)
}

// benchConfig is the benchmark's plugin_config: the six columns, no metadata columns.
func benchConfig(b *testing.B, every time.Duration) (string, string) {
	b.Helper()
	url := os.Getenv("FERRY_POSTGRES_URL")
	if url == "" {
		b.Skip("FERRY_POSTGRES_URL is not set")
	}
	name := fmt.Sprintf("bench%d_%d", time.Now().UnixNano(), catalogs.Add(1))
	return fmt.Sprintf(`{"catalog_type":"sql","uri":%q,"warehouse":%q,"catalog_name":%q,"tables":["ns.events"],
"flush_interval":%q,"max_buffered_rows":5000000,%s}`, url, b.TempDir(), name, every.String(), benchSchema), name
}
