package connect

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors/null"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// benchMessages is how many 100-byte messages each benchmark iteration drains (through a
// fresh consumer group) from the pre-filled topic.
const benchMessages = 100_000

// benchSink is the built-in null sink plus what the benchmark needs: it reports when
// target messages were consumed, and in sink_controlled mode commits each batch's last
// offset (a null sink that commits nothing would stall at max_uncommitted).
type benchSink struct {
	null   *null.Sink
	commit bool
	target uint64
	c      sdk.Committer
	done   chan struct{}
	once   sync.Once
}

func newBenchSink(commit bool, target uint64) *benchSink {
	return &benchSink{null: null.New(), commit: commit, target: target, done: make(chan struct{})}
}

func (s *benchSink) Open(ctx context.Context, env sdk.SinkEnv) error {
	s.c = env.Committer
	return s.null.Open(ctx, env)
}

func (s *benchSink) Consume(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if err := s.null.Consume(ctx, t, m, msgs); err != nil {
		return err
	}
	if s.commit {
		if err := s.c.Commit(m.Partition, msgs[len(msgs)-1].Offset); err != nil {
			return err
		}
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
	env.topic("bench", "t", 1)
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	env.fill("bench", "t", 0, benchMessages, func(int) []byte { return payload })
	return env
}

// benchRawPoll drains benchMessages with a bare iggy.Consumer per iteration (no runtime):
// the baseline.
func benchRawPoll(b *testing.B, env *iggyEnv, c *iggy.Client, batch uint32, run *int) {
	ctx := context.Background()
	for range b.N {
		*run++
		cn, err := c.NewConsumer(ctx, iggy.ConsumerConfig{Stream: iggy.Name("bench"), Topic: iggy.Name("t"),
			Group: fmt.Sprintf("raw-%d-%d", batch, *run), BatchSize: batch, PollInterval: time.Millisecond})
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
		b.StopTimer()
		if err := cn.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// benchPipeline runs one Runtime per iteration with a fresh consumer group and waits until
// its sink consumed benchMessages.
func benchPipeline(b *testing.B, env *iggyEnv, c *iggy.Client, batch uint32, mode config.CommitMode, sinkFor func() sdk.Sink, run *int) {
	for range b.N {
		*run++
		cfg := &config.Sink{
			Common: config.Common{Key: "bench", Enabled: true, Name: "bench", Path: "builtin:bench", PluginConfig: []byte("null")},
			Streams: []config.SinkStream{{Stream: "bench", Topics: []string{"t"}, Schema: sdk.SchemaRaw, BatchLength: batch,
				PollInterval: time.Millisecond, ConsumerGroup: fmt.Sprintf("%s-%d-%d", mode, batch, *run)}},
			OffsetCommit: mode, OnFailure: config.FailureStop,
			Retry:           config.Retry{MaxRetries: config.DefaultMaxRetries, InitialBackoff: config.DefaultInitialBackoff, MaxBackoff: config.DefaultMaxBackoff},
			Commit:          config.CommitSettings{Interval: config.DefaultCommitInterval, MaxUncommitted: config.DefaultMaxUncommitted},
			ShutdownTimeout: config.DefaultShutdownTimeout,
		}
		sink := sinkFor()
		reg := sdk.NewRegistry().AddSink("bench", func() sdk.Sink { return sink })
		rt, err := New(Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: c, Builtins: reg, Logger: quietLog})
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		if st := rt.Status()[0]; st.State != StateRunning {
			b.Fatalf("sink not running: %+v", st)
		}
		<-sink.(interface{ doneCh() <-chan struct{} }).doneCh()
		b.StopTimer()
		stopRuntime(b, rt)
		b.StartTimer()
	}
}

func (s *benchSink) doneCh() <-chan struct{} { return s.done }

// benchResults collects msgs/s per sub-benchmark for the ratio table.
type benchResults struct {
	mu   sync.Mutex
	rate map[string]float64
}

func (r *benchResults) measure(b *testing.B, name string, fn func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		fn(b)
		rate := float64(b.N*benchMessages) / b.Elapsed().Seconds()
		b.ReportMetric(rate, "msgs/s")
		b.ReportMetric(0, "ns/op")
		r.mu.Lock()
		r.rate[name] = rate // the last (largest b.N) run wins
		r.mu.Unlock()
	})
}

// BenchmarkSinkPipeline measures, in one run over the real embedded server (TCP on
// loopback, fsync "interval"), the raw poll loop of the client (baseline) and the sink
// pipeline to the null sink in each commit mode, for batches of 100 and 1000 messages of
// 100 bytes. Each iteration drains 100 000 messages through a fresh consumer group. It
// prints the ratio table at the end; goals: pipeline ≥ 0.90 × raw, after_consuming ≥
// 0.97 × after_polling, sink_controlled ≥ 0.95 × after_polling.
func BenchmarkSinkPipeline(b *testing.B) {
	env := benchTopic(b)
	c := env.dial()
	res := &benchResults{rate: map[string]float64{}}
	var run int
	batches := []uint32{100, 1000}
	for _, batch := range batches {
		res.measure(b, fmt.Sprintf("batch=%d/raw_poll", batch), func(b *testing.B) { benchRawPoll(b, env, c, batch, &run) })
		for _, mode := range allModes {
			res.measure(b, fmt.Sprintf("batch=%d/%s", batch, mode), func(b *testing.B) {
				benchPipeline(b, env, c, batch, mode, func() sdk.Sink {
					return newBenchSink(mode == config.CommitSinkControlled, benchMessages)
				}, &run)
			})
		}
	}
	printRatios(res, batches)
}

func printRatios(res *benchResults, batches []uint32) {
	res.mu.Lock()
	defer res.mu.Unlock()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "batch\tseries\tmsgs/s\t× raw\t× after_polling\tgoal\t")
	for _, batch := range batches {
		raw := res.rate[fmt.Sprintf("batch=%d/raw_poll", batch)]
		ap := res.rate[fmt.Sprintf("batch=%d/%s", batch, config.CommitAfterPolling)]
		fmt.Fprintf(w, "%d\traw_poll\t%.0f\t1.00\t\t\t\n", batch, raw)
		for _, mode := range allModes {
			r := res.rate[fmt.Sprintf("batch=%d/%s", batch, mode)]
			goal := "≥0.90×raw"
			switch mode {
			case config.CommitAfterConsuming:
				goal += ", ≥0.97×ap"
			case config.CommitSinkControlled:
				goal += ", ≥0.95×ap"
			}
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%.3f\t%.3f\t%s\t\n", batch, mode, r, safeDiv(r, raw), safeDiv(r, ap), goal)
		}
	}
	_ = w.Flush()
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
