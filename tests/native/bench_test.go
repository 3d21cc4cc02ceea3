package native

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors/null"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// benchMessages is how many 100-byte messages one measurement drains.
const benchMessages = 250_000

// BenchmarkNativeVsGoNull runs the same pipeline (after_polling, the default mode; batch
// 1000; 100-byte messages; real embedded server over TCP, fsync policy "interval") into
// the native C null sink (examples/plugins/c/null_sink.c, gcc -O2) and into the built-in
// Go null sink. Each measurement drains 250 000 messages through a fresh consumer group,
// from New until the runtime counts them all delivered; the two series alternate over
// FERRY_BENCH_ROUNDS rounds (default 7, the order flipping every round) and report their
// median rates. Because the machine may be shared, it also prints the median of the
// per-round ratios (the two runs of a round are adjacent in time) and each series' median
// process CPU time per message (server and client included: the same for both but the
// sink). Goal: native ≥ 0.8 × Go. Run with -benchtime=1x.
func BenchmarkNativeVsGoNull(b *testing.B) {
	so := buildC(b, "null_sink", "examples/plugins/c/null_sink.c")
	e := newEnv(b, servertest.WithFsync(server.FsyncInterval))
	e.Topic("s", "t", 1)
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	e.Fill("s", "t", 0, benchMessages, func(int) []byte { return payload })
	c := e.Dial()
	builtins := sdk.NewRegistry().AddSink(null.Name, func() sdk.Sink { return null.New() })

	runOnce := func(path, group string) (time.Duration, time.Duration) {
		cfg := sinkConfig("bench", path, config.CommitAfterPolling, "null", 1000)
		cfg.Streams[0].ConsumerGroup = group
		cpu0, start := processCPU(), time.Now()
		rt := e.runtimeWith(c, builtins, cfg)
		if err := rt.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		testkit.WaitFor(b, "every message delivered", func() bool {
			st := rt.Status()[0]
			if st.LastError != nil {
				b.Fatalf("sink failed: %+v", st.LastError)
			}
			return st.Stats.Delivered >= benchMessages
		})
		d, cpu := time.Since(start), processCPU()-cpu0
		runkit.Stop(b, rt)
		return d, cpu
	}
	rounds := 7
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	rates, cpuPerMsg := map[string][]float64{}, map[string][]float64{}
	var ratios []float64
	series := []struct{ name, path string }{{"go_null", "builtin:" + null.Name}, {"c_null", so}}
	for r := range rounds {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		var round [2]float64
		for _, i := range order {
			s := series[i]
			d, cpu := runOnce(s.path, fmt.Sprintf("%s-%d", s.name, r))
			round[i] = benchMessages / d.Seconds()
			rates[s.name] = append(rates[s.name], round[i])
			cpuPerMsg[s.name] = append(cpuPerMsg[s.name], float64(cpu.Nanoseconds())/benchMessages)
		}
		ratios = append(ratios, round[1]/round[0])
	}
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		sort.Float64s(v)
		return v[len(v)/2]
	}
	for _, s := range series {
		b.Run(s.name, func(b *testing.B) {
			b.ReportMetric(median(rates[s.name]), "msgs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
	goM, cM := median(rates["go_null"]), median(rates["c_null"])
	fmt.Printf("batch 1000, after_polling: go_null %.0f msgs/s (min %.0f max %.0f), c_null %.0f msgs/s (min %.0f max %.0f), native/go = %.3f (goal ≥ 0.80)\n",
		goM, slices.Min(rates["go_null"]), slices.Max(rates["go_null"]), cM, slices.Min(rates["c_null"]), slices.Max(rates["c_null"]), cM/goM)
	fmt.Printf("per-round native/go: median %.3f (min %.3f max %.3f); process CPU per message: go_null %.0f ns, c_null %.0f ns\n",
		median(ratios), slices.Min(ratios), slices.Max(ratios), median(cpuPerMsg["go_null"]), median(cpuPerMsg["c_null"]))
}
