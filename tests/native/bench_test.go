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
// FERRY_BENCH_ROUNDS rounds (default 5) and report their medians. Goal: native ≥ 0.8 × Go.
// Run with -benchtime=1x.
func BenchmarkNativeVsGoNull(b *testing.B) {
	so := buildC(b, "null_sink", "examples/plugins/c/null_sink.c")
	e := newEnv(b, servertest.WithFsync(server.FsyncInterval))
	e.topic("s", "t", 1)
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	e.fill("s", "t", 0, benchMessages, func(int) []byte { return payload })
	c := e.dial()
	builtins := sdk.NewRegistry().AddSink(null.Name, func() sdk.Sink { return null.New() })

	runOnce := func(path, group string) time.Duration {
		cfg := sinkConfig("bench", path, config.CommitAfterPolling, "null", 1000)
		cfg.Streams[0].ConsumerGroup = group
		start := time.Now()
		rt := e.runtimeWith(c, builtins, cfg)
		if err := rt.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		for {
			st := rt.Status()[0]
			if st.LastError != nil {
				b.Fatalf("sink failed: %+v", st.LastError)
			}
			if st.Stats.Delivered >= benchMessages {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		d := time.Since(start)
		stop(b, rt)
		return d
	}
	rounds := 5
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	rates := map[string][]float64{}
	series := []struct{ name, path string }{{"go_null", "builtin:" + null.Name}, {"c_null", so}}
	for r := range rounds {
		for _, s := range series {
			d := runOnce(s.path, fmt.Sprintf("%s-%d", s.name, r))
			rates[s.name] = append(rates[s.name], benchMessages/d.Seconds())
		}
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
}
