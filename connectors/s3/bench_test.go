package s3

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// benchBatch is the messages of one Consume in the benchmarks.
const benchBatch = 1000

// benchRows fills msgs with 200-byte JSON messages of partition p from offset first: a
// counter and 190 equal characters each, which compress to almost nothing.
func benchRows(msgs []sdk.ConsumedMessage, first uint64) {
	pad := strings.Repeat("x", 200-len(`{"n":"000000000","pad":""}`))
	for j := range msgs {
		o := first + uint64(j)
		msgs[j] = sdk.ConsumedMessage{Offset: o, ID: sdk.MessageIDFromUint64(o), Timestamp: ts0 + o,
			Payload: fmt.Appendf(msgs[j].Payload[:0], `{"n":"%09d","pad":"%s"}`, o, pad)}
	}
}

// benchRandomRows fills msgs like benchRows with JSON of about 200 bytes shaped like an
// application's event, its values drawn from a generator seeded by the offset (the same
// rows every run): a uuid-like id, a user name, an amount, an ISO timestamp, a base64
// token of 52 characters and a small nested object. Little of it repeats from row to row,
// so it compresses about as real data does.
func benchRandomRows(msgs []sdk.ConsumedMessage, first uint64) {
	var token [39]byte
	b64 := base64.StdEncoding
	for j := range msgs {
		o := first + uint64(j)
		r := rand.New(rand.NewPCG(o, 0x5eed))
		for i := range token {
			token[i] = byte(r.Uint32())
		}
		at := time.UnixMilli(1_790_000_000_000 + r.Int64N(90*24*3600*1000)).UTC()
		p := msgs[j].Payload[:0]
		p = fmt.Appendf(p, `{"id":"%08x-%04x-%04x-%04x-%012x","user":"%s_%d","amount":%.2f,"ts":"%s","token":"`,
			r.Uint32(), r.Uint32()&0xffff, 0x4000|r.Uint32()&0x0fff, 0x8000|r.Uint32()&0x3fff, r.Uint64()&0xffffffffffff,
			benchNames[r.IntN(len(benchNames))], r.IntN(100000), r.Float64()*5000, at.Format("2006-01-02T15:04:05.000Z"))
		p = b64.AppendEncode(p, token[:])
		p = fmt.Appendf(p, `","meta":{"country":"%s","ok":%t}}`,
			benchCountries[r.IntN(len(benchCountries))], r.IntN(2) == 1)
		msgs[j] = sdk.ConsumedMessage{Offset: o, ID: sdk.MessageIDFromUint64(o), Timestamp: ts0 + o, Payload: p}
	}
}

var (
	benchNames     = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar", "peggy", "trent", "victor", "walter"}
	benchCountries = []string{"DE", "FR", "US", "JP", "BR", "IN", "NG", "PL", "SE", "CA", "AU", "MX"}
)

// benchSink opens a sink on a bucket of its own, emptied when the benchmark ends.
func benchSink(b *testing.B, srv *s3test.Server, extra string) *tsink {
	s := New()
	cfg := cfgOf(srv, srv.Bucket(b), extra)
	c := sdktest.NewCommitter()
	if err := s.Open(context.Background(), sdk.SinkEnv{Key: "bench", Config: []byte(cfg), Committer: c}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		st, err := newStore(context.Background(), s.cfg) // the sink's is closed by then
		if err != nil {
			b.Fatal(err)
		}
		defer st.close()
		emptyBucket(b, st)
	})
	if _, err := s.Assigned(context.Background(), topic, []sdk.Partition{part(0), part(1), part(2)}); err != nil {
		b.Fatal(err)
	}
	return &tsink{s, c}
}

// emptyBucket deletes every object of st's bucket: a benchmark writes gigabytes, which
// would otherwise stay on the server's disk.
func emptyBucket(b *testing.B, st *store) {
	var keys []string
	if err := st.list(context.Background(), "", func(k string) { keys = append(keys, k) }); err != nil {
		b.Fatal(err)
	}
	for _, k := range keys {
		if err := st.remove(context.Background(), k); err != nil {
			b.Fatal(err)
		}
	}
}

// settle waits for every upload the sink runs in the background.
func (s *Sink) settle(b *testing.B) {
	for _, ps := range s.snapshot() {
		ps.mu.Lock()
		err := s.settleLocked(context.Background(), ps, true)
		ps.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// cpuClock reads the CPU time used so far by this process and by the S3 server (its pid
// in $FERRY_S3_DIR/pid, read from /proc; 0 when unknown).
type cpuClock struct{ server int }

func newCPUClock() cpuClock {
	b, err := os.ReadFile(filepath.Join(os.Getenv("FERRY_S3_DIR"), "pid"))
	if err != nil {
		return cpuClock{}
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return cpuClock{server: pid}
}

func (c cpuClock) read() (self, server time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if c.server == 0 {
		return self, 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.server))
	if err != nil {
		return self, 0
	}
	// Fields 14 and 15 (utime, stime) in clock ticks, after the ")" ending the name.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return self, 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return self, time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// BenchmarkSink: rows/s into the S3 server of scripts/s3.sh, JSON messages of about 200
// bytes in two kinds (payload=repeat: benchRows, payload=random: benchRandomRows), 3
// partitions, 1000 a Consume, 8MiB objects, for Parquet (zstd at its default level) and
// JSON Lines, against the server's own conditional PUT loops (what the uploads alone cost,
// without formatting): "same bytes", per format, the very objects that format's sink wrote
// for a round's rows (captured once from an untimed warm-up round, so the same object
// count, sizes and bytes), sent one at a time and by 3 workers at once (the sink uploads
// its 3 partitions' objects concurrently); the judged ratio is against the faster of the
// two. "raw", the rows' payloads in 8MiB objects one at a time, is a secondary baseline.
// All run side by side: each iteration is a round of 300 batches (300 000 rows, built
// before the round, so nothing but the sink runs while it is timed) to each sink and one
// round of each PUT loop, each round ending once its uploads have landed, so the load of
// the shared machine falls on all alike. FERRY_BENCH_PARQUET adds JSON members to the
// Parquet sink's plugin_config (e.g. `"compression":"snappy"`). Run with
// go test -run '^$' -bench 'Sink$' -benchtime 5x ./connectors/s3/.
func BenchmarkSink(b *testing.B) {
	// repeat: a counter and 190 equal characters a row; random: benchRandomRows.
	b.Run("payload=repeat", func(b *testing.B) { benchmarkSink(b, benchRows) })
	b.Run("payload=random", func(b *testing.B) { benchmarkSink(b, benchRandomRows) })
}

// putWorkers is how many objects the concurrent PUT loops send at once: one per partition,
// as the sink.
const putWorkers = 3

func benchmarkSink(b *testing.B, rowsOf func([]sdk.ConsumedMessage, uint64)) {
	const rounds = 300
	srv := s3test.Connect(b)
	pqExtra := `,"output_format":"parquet"`
	if e := os.Getenv("FERRY_BENCH_PARQUET"); e != "" {
		pqExtra += "," + e
	}
	pq := benchSink(b, srv, pqExtra)
	jl := benchSink(b, srv, `,"output_format":"json_lines"`)
	body := make([]byte, 8<<20)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var next [3]uint64
	batches := make([][]sdk.ConsumedMessage, rounds)
	for i := range batches {
		batches[i] = make([]sdk.ConsumedMessage, benchBatch)
	}
	// build fills the round's batches from the offsets in next, untimed; it returns the
	// bytes of their payloads.
	build := func() (payload int) {
		first := next
		for i, msgs := range batches {
			p := i % 3
			rowsOf(msgs, first[p])
			first[p] += benchBatch
			for _, m := range msgs {
				payload += len(m.Payload)
			}
		}
		return payload
	}
	// consume sends the round's batches to s and waits for its uploads.
	consume := func(s *tsink) time.Duration {
		start := time.Now()
		for i, msgs := range batches {
			if err := s.deliver(uint32(i%3), msgs); err != nil {
				b.Fatal(err)
			}
		}
		s.settle(b)
		return time.Since(start)
	}
	// The warm-up round: every row of it uploaded (the open objects too), then its objects
	// read back as the same-bytes loops' bodies.
	perRound := build() // the payload bytes of a round
	same := map[*tsink][][]byte{}
	for _, s := range []*tsink{pq, jl} {
		consume(s)
		for _, ps := range s.snapshot() {
			ps.mu.Lock()
			err := s.flushLocked(context.Background(), ps)
			if err == nil {
				err = s.settleLocked(context.Background(), ps, true)
			}
			ps.mu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, key := range srv.Keys(b, s.st.bucket) {
			same[s] = append(same[s], srv.Get(b, s.st.bucket, key))
		}
	}
	for i := range next {
		next[i] += rounds / 3 * benchBatch
	}
	var objects atomic.Int64
	// putLoop uploads bodies through s's client (its bucket, its settings), workers at a
	// time.
	putLoop := func(s *tsink, bodies [][]byte, workers int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		work := make(chan []byte)
		for range workers {
			wg.Go(func() {
				for body := range work {
					n := uint64(objects.Add(1))
					key := fmt.Sprintf("put/%08d", n)
					// The sink's identity metadata too, so the loop sends what the sink sends.
					id := identity{stream: "s", topic: "t", first: n, last: n}
					if err := s.st.put(context.Background(), key, body, "application/octet-stream", id); err != nil {
						failed.CompareAndSwap(nil, &err)
					}
				}
			})
		}
		for _, body := range bodies {
			work <- body
		}
		close(work)
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(*err)
		}
		return time.Since(start)
	}
	var raw [][]byte
	for total := perRound; total > 0; total -= len(body) {
		raw = append(raw, body[:min(total, len(body))])
	}
	// Wall time, CPU used by this process and by the server during each mode's rounds.
	type mode struct {
		name           string
		run            func() time.Duration
		wall, cpu, srv time.Duration
	}
	modes := []*mode{
		{name: "parquet", run: func() time.Duration { return consume(pq) }},
		{name: "jsonl", run: func() time.Duration { return consume(jl) }},
		{name: "put-parquet-bytes", run: func() time.Duration { return putLoop(pq, same[pq], 1) }},
		{name: "put-parquet-bytes-x3", run: func() time.Duration { return putLoop(pq, same[pq], putWorkers) }},
		{name: "put-jsonl-bytes", run: func() time.Duration { return putLoop(jl, same[jl], 1) }},
		{name: "put-jsonl-bytes-x3", run: func() time.Duration { return putLoop(jl, same[jl], putWorkers) }},
		{name: "put-raw", run: func() time.Duration { return putLoop(pq, raw, 1) }},
	}
	clock := newCPUClock()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		build()
		b.StartTimer()
		for _, m := range modes {
			c0, s0 := clock.read()
			m.wall += m.run()
			c1, s1 := clock.read()
			m.cpu += c1 - c0
			m.srv += s1 - s0
		}
		for i := range next {
			next[i] += rounds / 3 * benchBatch
		}
		b.StopTimer()
		emptyBucket(b, pq.st) // the round's objects and the loops'
		emptyBucket(b, jl.st)
		b.StartTimer()
	}
	for i, s := range []*tsink{pq, jl} {
		start := time.Now()
		if err := s.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		modes[i].wall += time.Since(start)
	}
	rows := float64(b.N * rounds * benchBatch)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / rows }
	for _, m := range modes {
		b.ReportMetric(rows/m.wall.Seconds(), m.name+"-rows/s")
		b.ReportMetric(us(m.cpu), m.name+"-cpu-µs/row")
		if clock.server != 0 {
			b.ReportMetric(us(m.srv), m.name+"-server-cpu-µs/row")
		}
	}
	// A sink's rows/s over the faster PUT loop's of the same bytes (the target: at least
	// 0.8), over each of them, and over the raw payloads' loop.
	ratio := func(loop, sink *mode) float64 { return loop.wall.Seconds() / sink.wall.Seconds() }
	b.ReportMetric(min(ratio(modes[2], modes[0]), ratio(modes[3], modes[0])), "parquet/same-bytes-put")
	b.ReportMetric(min(ratio(modes[4], modes[1]), ratio(modes[5], modes[1])), "jsonl/same-bytes-put")
	b.ReportMetric(ratio(modes[2], modes[0]), "parquet/same-bytes-put-x1")
	b.ReportMetric(ratio(modes[3], modes[0]), "parquet/same-bytes-put-x3")
	b.ReportMetric(ratio(modes[4], modes[1]), "jsonl/same-bytes-put-x1")
	b.ReportMetric(ratio(modes[5], modes[1]), "jsonl/same-bytes-put-x3")
	b.ReportMetric(ratio(modes[6], modes[0]), "parquet/raw-put")
	b.ReportMetric(ratio(modes[6], modes[1]), "jsonl/raw-put")
	size := func(bodies [][]byte) (n int) {
		for _, body := range bodies {
			n += len(body)
		}
		return n
	}
	b.ReportMetric(float64(perRound)/(rounds*benchBatch), "payload-bytes/row")
	b.ReportMetric(float64(len(same[pq])), "parquet-objects/round")
	b.ReportMetric(float64(size(same[pq]))/(rounds*benchBatch), "parquet-bytes/row")
	b.ReportMetric(float64(len(same[jl])), "jsonl-objects/round")
	b.ReportMetric(float64(size(same[jl]))/(rounds*benchBatch), "jsonl-bytes/row")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSinkMemory: the peak live heap while one partition writes 64MiB objects
// (about 250 000 rows of 200-byte JSON each), streamed through 8MiB parts (streamed) or
// held whole until uploaded (whole: part_size above max_file_size). b.N batches of 1000.
// Run with go test -run '^$' -bench SinkMemory -benchtime 600x ./connectors/s3/.
func BenchmarkSinkMemory(b *testing.B) {
	srv := s3test.Connect(b)
	for _, format := range []string{string(formatParquet), string(formatJSONLines)} {
		for _, mode := range []string{"streamed", "whole"} {
			b.Run(format+"/"+mode, func(b *testing.B) {
				partSize := "8MiB"
				if mode == "whole" {
					partSize = "1GiB"
				}
				s := benchSink(b, srv, fmt.Sprintf(`,"output_format":%q,"max_file_size":"64MiB","part_size":%q,"max_buffered_bytes":"1GiB"`, format, partSize))
				sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
				metrics.Read(sample)
				base := sample[0].Value.Uint64()
				var peak uint64
				msgs := make([]sdk.ConsumedMessage, benchBatch)
				b.ResetTimer()
				for i := range b.N {
					benchRows(msgs, uint64(i*benchBatch))
					if err := s.deliver(0, msgs); err != nil {
						b.Fatal(err)
					}
					metrics.Read(sample)
					peak = max(peak, sample[0].Value.Uint64())
				}
				if err := s.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(peak-min(base, peak))/(1<<20), "peak-live-heap-MiB")
				b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkParquetEncode: the CPU of encoding one partition's object of 30 000 rows (about
// what an 8MiB object holds) into Parquet, for each codec and zstd level, with the
// benchmark's two kinds of rows; no S3 server. It reports CPU µs a row (this process's, one
// goroutine encoding) and the bytes a row written. Run with
// go test -run '^$' -bench ParquetEncode -benchtime 20x ./connectors/s3/.
func BenchmarkParquetEncode(b *testing.B) {
	const rows = 30000
	for _, kind := range []struct {
		name   string
		rowsOf func([]sdk.ConsumedMessage, uint64)
	}{{"random", benchRandomRows}, {"repeat", benchRows}} {
		msgs := make([]sdk.ConsumedMessage, rows)
		kind.rowsOf(msgs, 0)
		for _, c := range []string{"zstd/fastest", "zstd/default", "zstd/better", "snappy", "gzip", "none"} {
			b.Run("payload="+kind.name+"/codec="+c, func(b *testing.B) {
				codec, level, _ := strings.Cut(c, "/")
				extra := fmt.Sprintf(`"bucket":"b","region":"r","output_format":"parquet","compression":%q`, codec)
				if level != "" {
					extra += fmt.Sprintf(`,"compression_level":%q`, level)
				}
				s, err := Config.Parse([]byte("{" + extra + "}"))
				if err != nil {
					b.Fatal(err)
				}
				var buf buffer
				for i := range msgs {
					if _, err := buf.add(&s, topic, part(0), sdk.SchemaJSON, &msgs[i]); err != nil {
						b.Fatal(err)
					}
				}
				var size int
				var fe fileEncoder
				clock := newCPUClock()
				c0, _ := clock.read()
				b.ResetTimer()
				for range b.N {
					out, err := fe.encode(&s, sdk.SchemaJSON, buf.rows, 0, rows-1)
					if err != nil {
						b.Fatal(err)
					}
					size = len(out)
				}
				c1, _ := clock.read()
				b.ReportMetric(float64((c1-c0).Nanoseconds())/1000/float64(b.N*rows), "cpu-µs/row")
				b.ReportMetric(float64(size)/rows, "bytes/row")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
