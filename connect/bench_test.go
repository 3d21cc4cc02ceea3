package connect

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors/null"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// benchMessages is how many 100-byte messages each benchmark iteration drains (through a
// fresh consumer group) from the pre-filled topic: about a third of a second at batch
// 1000, so that a round is not dominated by start-up and scheduling noise.
const benchMessages = 1_000_000

// benchSink is the built-in null sink plus what the benchmark needs: it reports when
// target messages were consumed. In sink_controlled mode the null sink commits each
// batch's last offset itself (sdk.CommitsEachBatch).
type benchSink struct {
	null   *null.Sink
	target uint64
	done   chan struct{}
	once   sync.Once
}

func newBenchSink(target uint64) *benchSink {
	return &benchSink{null: null.New(), target: target, done: make(chan struct{})}
}

func (s *benchSink) Open(ctx context.Context, env sdk.SinkEnv) error { return s.null.Open(ctx, env) }

func (s *benchSink) Consume(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if err := s.null.Consume(ctx, t, m, msgs); err != nil {
		return err
	}
	if s.null.Messages() >= s.target {
		s.once.Do(func() { close(s.done) })
	}
	return nil
}

func (s *benchSink) Close(ctx context.Context) error { return s.null.Close(ctx) }

// benchTopic starts a server (fsync policy "interval": the fill and the offset stores
// are not fsynced one by one) and fills stream "bench" topic "t" (one partition) with
// benchMessages messages of 100 bytes.
func benchTopic(b *testing.B) *iggyEnv {
	b.Helper()
	env := newIggyEnv(b, servertest.WithFsync(server.FsyncInterval))
	env.Topic("bench", "t", 1)
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	env.Fill("bench", "t", 0, benchMessages, func(int) []byte { return payload })
	return env
}

// rawPollOnce drains benchMessages with a bare iggy.Consumer in a fresh group (no
// runtime): the baseline. It returns the time from NewConsumer to the last message (and
// no offset stores).
func rawPollOnce(b *testing.B, c *iggy.Client, batch uint32, group string) (time.Duration, uint64) {
	ctx := context.Background()
	start := time.Now()
	cn, err := c.NewConsumer(ctx, iggy.ConsumerConfig{Stream: iggy.Name("bench"), Topic: iggy.Name("t"),
		Group: group, BatchSize: batch, PollInterval: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	for n := 0; n < benchMessages; {
		bt, err := cn.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += len(bt.Messages)
		bt.Release()
	}
	d := time.Since(start)
	if err := cn.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return d, 0
}

// benchSinkConfig is a sink with default settings (commit interval 1 s, max_uncommitted
// 10 000) reading bench/t in group.
func benchSinkConfig(mode config.CommitMode, batch uint32, path, group string) *config.Sink {
	return &config.Sink{
		Common: config.Common{Key: "bench", Enabled: true, Name: "bench", Path: path, PluginConfig: []byte("null")},
		Streams: []config.SinkStream{{Stream: "bench", Topics: []string{"t"}, Schema: sdk.SchemaRaw, BatchLength: batch,
			PollInterval: time.Millisecond, ConsumerGroup: group}},
		OffsetCommit: mode, OnFailure: config.FailureStop,
		Retry:           config.Retry{MaxRetries: config.DefaultMaxRetries, InitialBackoff: config.DefaultInitialBackoff, MaxBackoff: config.DefaultMaxBackoff},
		Commit:          config.CommitSettings{Interval: config.DefaultCommitInterval, Delay: config.DefaultCommitDelay, MaxUncommitted: config.DefaultMaxUncommitted},
		ShutdownTimeout: config.DefaultShutdownTimeout,
	}
}

// BenchScrape, when set, starts scraping rt's metrics (every 100 ms) and returns the
// function that stops it and reports the first failed scrape. bench_metrics_test.go
// sets it: only that external test package may import connect/metrics (which imports
// connect).
var BenchScrape func(rt *Runtime) (stop func() error)

// benchScraped reports whether BenchmarkSinkPipeline also measures each pipeline series
// with its metrics scraped (FERRY_BENCH_METRICS=1).
func benchScraped() bool { return os.Getenv("FERRY_BENCH_METRICS") == "1" && BenchScrape != nil }

// pipelineOnce runs one Runtime (fresh group) until its sink consumed benchMessages and
// returns the time from New to the last Consume, and the offset stores the runtime wrote
// in that time; stopping is not timed. With scrape, BenchScrape scrapes the runtime's
// metrics meanwhile.
func pipelineOnce(b *testing.B, c *iggy.Client, batch uint32, mode config.CommitMode, group string, scrape bool, tracer trace.Tracer) (time.Duration, uint64) {
	sink := newBenchSink(benchMessages)
	reg := sdk.NewRegistry().AddSink("bench", func() sdk.Sink { return sink })
	cfg := benchSinkConfig(mode, batch, "builtin:bench", group)
	start := time.Now()
	rt, err := New(Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: c, Builtins: reg, Logger: quietLog, Tracer: tracer})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	if st := rt.Status()[0]; st.State != StateRunning {
		b.Fatalf("sink not running: %+v", st)
	}
	stopScrape := func() error { return nil }
	if scrape {
		stopScrape = BenchScrape(rt)
	}
	<-sink.done
	d := time.Since(start)
	if err := stopScrape(); err != nil {
		b.Fatal(err)
	}
	stores := rt.Status()[0].Stats.Stores
	stopRuntime(b, rt)
	return d, stores
}

// benchTracer is the tracer of the .../MODE/traced series, with FERRY_BENCH_TRACED=1: the
// SDK's tracer provider with its batch span processor and an exporter that discards, so
// the series measures what a trace per batch costs the pipeline (nil: no such series).
func benchTracer(b *testing.B) trace.Tracer {
	if os.Getenv("FERRY_BENCH_TRACED") != "1" {
		return nil
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("bench")
}

// printRatios prints, for each batch and mode, the series .../MODE/suffix against the
// same mode's plain series.
func printRatios(res map[string]*benchSeries, batches []uint32, suffix, goal string) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "batch\tseries\tmedian msgs/s\t%s msgs/s\t%s min\t%s max\t× plain\tgoal\t\n", suffix, suffix, suffix)
	for _, batch := range batches {
		for _, mode := range allModes {
			plain, other := res[fmt.Sprintf("batch=%d/%s", batch, mode)], res[fmt.Sprintf("batch=%d/%s/%s", batch, mode, suffix)]
			if plain == nil || other == nil {
				continue
			}
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t%s\t\n", batch, mode, plain.median(), other.median(),
				slices.Min(other.rate), slices.Max(other.rate), other.median()/plain.median(), goal)
		}
	}
	_ = w.Flush()
}

// benchRounds is how many interleaved rounds BenchmarkSinkPipeline measures
// (FERRY_BENCH_ROUNDS, default 5); each series reports its median round.
func benchRounds() int {
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 5
}

type benchSeries struct {
	name   string
	run    func(group string) (time.Duration, uint64)
	rate   []float64 // msgs/s per round
	cpu    []float64 // CPU ns of the whole process (server, client, runtime) per message, per round
	stores []float64 // offset stores/s per round
}

func (s *benchSeries) median() float64 { return median(s.rate) }

func median(v []float64) float64 {
	r := append([]float64(nil), v...)
	sort.Float64s(r)
	if len(r) == 0 {
		return 0
	}
	return r[len(r)/2]
}

// processCPU is the user and system CPU time this process has used: on a machine shared
// with other work it moves far less than the wall time (docs/benchmarks.md).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureSeries runs every series once per round, interleaved (so drift on a shared
// machine hits all of them alike), then reports each median as a sub-benchmark.
func measureSeries(b *testing.B, series []*benchSeries) map[string]*benchSeries {
	if only := os.Getenv("FERRY_BENCH_SERIES"); only != "" { // profiling one series
		series = slices.DeleteFunc(series, func(s *benchSeries) bool { return !strings.Contains(s.name, only) })
	}
	rounds := benchRounds()
	for r := range rounds {
		for _, s := range series {
			cpu0 := processCPU()
			d, stores := s.run(fmt.Sprintf("%s-r%d", strings.NewReplacer("/", "-", "=", "").Replace(s.name), r))
			s.cpu = append(s.cpu, float64(processCPU()-cpu0)/benchMessages)
			s.rate = append(s.rate, float64(benchMessages)/d.Seconds())
			s.stores = append(s.stores, float64(stores)/d.Seconds())
		}
	}
	out := map[string]*benchSeries{}
	for _, s := range series {
		out[s.name] = s
		b.Run(s.name, func(b *testing.B) {
			b.ReportMetric(s.median(), "msgs/s")
			b.ReportMetric(median(s.stores), "stores/s")
			b.ReportMetric(median(s.cpu), "cpu-ns/msg")
			b.ReportMetric(0, "ns/op")
		})
	}
	return out
}

// BenchmarkSinkPipeline measures, in one run over the real embedded server (TCP on
// loopback, fsync policy "interval"), the raw poll loop of the client (baseline) and the
// sink pipeline to the null sink in each commit mode, for batches of 100 and 1000
// messages of 100 bytes. Each measurement drains 1 000 000 messages through a fresh
// consumer group; the series are interleaved over FERRY_BENCH_ROUNDS rounds (default 5)
// and each reports its median. Run it with -benchtime=1x (the rounds are the repetition).
// It prints the ratio table with each series' offset stores per second; goals: pipeline
// ≥ 0.95 × raw, after_consuming ≥ 0.97 × after_polling, sink_controlled ≥ 0.95 ×
// after_polling (its sink commits every batch: the stores stay bounded by commit.delay).
// With FERRY_BENCH_METRICS=1 each mode is also measured with its metrics scraped every
// 100 ms (series .../MODE/scraped; goal: ≥ 0.97 × the same mode unscraped).
func BenchmarkSinkPipeline(b *testing.B) {
	env := benchTopic(b)
	c := env.Dial()
	batches := []uint32{100, 1000}
	var series []*benchSeries
	for _, batch := range batches {
		series = append(series, &benchSeries{name: fmt.Sprintf("batch=%d/raw_poll", batch),
			run: func(g string) (time.Duration, uint64) { return rawPollOnce(b, c, batch, g) }})
		for _, mode := range allModes {
			series = append(series, &benchSeries{name: fmt.Sprintf("batch=%d/%s", batch, mode),
				run: func(g string) (time.Duration, uint64) { return pipelineOnce(b, c, batch, mode, g, false, nil) }})
			if benchScraped() {
				series = append(series, &benchSeries{name: fmt.Sprintf("batch=%d/%s/scraped", batch, mode),
					run: func(g string) (time.Duration, uint64) { return pipelineOnce(b, c, batch, mode, g, true, nil) }})
			}
			if tracer := benchTracer(b); tracer != nil {
				series = append(series, &benchSeries{name: fmt.Sprintf("batch=%d/%s/traced", batch, mode),
					run: func(g string) (time.Duration, uint64) { return pipelineOnce(b, c, batch, mode, g, false, tracer) }})
			}
		}
	}
	res := measureSeries(b, series)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "batch\tseries\tmedian msgs/s\tmin\tmax\t× raw\t× after_polling\tstores/s\tgoal\t\n")
	for _, batch := range batches {
		raw := res[fmt.Sprintf("batch=%d/raw_poll", batch)]
		ap := res[fmt.Sprintf("batch=%d/%s", batch, config.CommitAfterPolling)]
		if raw == nil || ap == nil {
			continue
		}
		row := func(name string, s *benchSeries, goal string) {
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%.0f\t%.0f\t%.3f\t%.3f\t%.0f\t%s\t\n", batch, name, s.median(),
				slices.Min(s.rate), slices.Max(s.rate), s.median()/raw.median(), s.median()/ap.median(), median(s.stores), goal)
		}
		row("raw_poll", raw, "")
		for _, mode := range allModes {
			goal := "≥0.95 raw"
			switch mode {
			case config.CommitAfterConsuming:
				goal += ", ≥0.97 ap"
			case config.CommitSinkControlled:
				goal += ", ≥0.95 ap"
			}
			row(string(mode), res[fmt.Sprintf("batch=%d/%s", batch, mode)], goal)
		}
	}
	_ = w.Flush()
	if os.Getenv("FERRY_BENCH_TRACED") == "1" {
		printRatios(res, batches, "traced", "≥0.97")
	}
	if !benchScraped() {
		return
	}
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "batch\tseries\tmedian msgs/s\tscraped msgs/s\tscraped min\tscraped max\t× unscraped\tgoal\t\n")
	for _, batch := range batches {
		for _, mode := range allModes {
			plain, scraped := res[fmt.Sprintf("batch=%d/%s", batch, mode)], res[fmt.Sprintf("batch=%d/%s/scraped", batch, mode)]
			if plain == nil || scraped == nil {
				continue
			}
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t%s\t\n", batch, mode, plain.median(), scraped.median(),
				slices.Min(scraped.rate), slices.Max(scraped.rate), scraped.median()/plain.median(), "≥0.97")
		}
	}
	_ = w.Flush()
}

// BenchmarkPipelineAllocs reports the heap allocations per batch of the null pipeline
// (runtime.MemStats over a whole drain of 1 000 000 messages, the in-process server's
// included), in each commit mode at batch 100 and 1000, without a tracer and with the SDK's
// (a trace per batch, exported to nowhere): the cost of telemetry off is the first column
// against a build without it, the cost of traces the difference between the two. Run it
// with -benchtime=1x.
func BenchmarkPipelineAllocs(b *testing.B) {
	b.Setenv("FERRY_BENCH_TRACED", "1")
	tracer := benchTracer(b)
	env := benchTopic(b)
	c := env.Dial()
	for _, batch := range []uint32{100, 1000} {
		for _, mode := range allModes {
			for _, traced := range []bool{false, true} {
				name := fmt.Sprintf("batch=%d/%s", batch, mode)
				var tr trace.Tracer
				if traced {
					name, tr = name+"/traced", tracer
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				pipelineOnce(b, c, batch, mode, "allocs-"+strings.NewReplacer("/", "-", "=", "").Replace(name), false, tr)
				runtime.ReadMemStats(&after)
				batches := float64(benchMessages / batch)
				b.Run(name, func(b *testing.B) {
					b.ReportMetric(float64(after.Mallocs-before.Mallocs)/batches, "allocs/batch")
					b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/batches, "B/batch")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}
