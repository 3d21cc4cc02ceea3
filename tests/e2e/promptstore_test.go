package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
)

// Parameters of TestSinkControlledCrashRedeliversLittle.
const (
	promptPartitions   = 3
	promptPerPartition = 20000
	promptMessages     = promptPartitions * promptPerPartition
	promptBatch        = 100 // batch_length
	promptFlushMs      = 50  // the committing sink writes, fsyncs and commits every 50 ms
	promptPauseMs      = 10  // pause per consume: at most 100 messages per 10 ms
	promptKills        = 5
	promptKillMin      = 200 * time.Millisecond // a kill lands this long…
	promptKillMax      = 600 * time.Millisecond // …to this long after the run's first line
	promptWindow       = 100 * time.Millisecond // the bound counts the lines of this window before a kill
	promptSampleEvery  = 2 * time.Millisecond
	promptSinkKey      = "prompt"
	promptSinkGroup    = "iggy-connect-sink-" + promptSinkKey
)

// promptPayload is the payload of offset o of partition p; the committing sink writes it
// as one line.
func promptPayload(p uint32, o uint64) string { return fmt.Sprintf("p=%d o=%05d", p, o) }

// parsePromptLine is the inverse of promptPayload; it accepts nothing else.
func parsePromptLine(line string) (p uint32, o uint64, ok bool) {
	ps, ofs, found := strings.Cut(line, " ")
	if !found || !strings.HasPrefix(ps, "p=") || !strings.HasPrefix(ofs, "o=") {
		return 0, 0, false
	}
	pv, err1 := strconv.ParseUint(ps[2:], 10, 32)
	ov, err2 := strconv.ParseUint(ofs[2:], 10, 64)
	if err1 != nil || err2 != nil || pv >= promptPartitions || ov >= promptPerPartition || promptPayload(uint32(pv), ov) != line {
		return 0, 0, false
	}
	return uint32(pv), ov, true
}

// produceBacklog creates stream s, topic t with promptPartitions partitions on the server at
// addr and sends promptPerPartition messages to each partition (payload promptPayload),
// checking that each batch landed at the partition and offsets it names.
func produceBacklog(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, addr, iggy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, iggy.Name("s"), "t", promptPartitions); err != nil {
		t.Fatal(err)
	}
	const chunk = 1000
	msgs := make([]iggy.Message, chunk)
	for p := uint32(0); p < promptPartitions; p++ {
		for base := uint64(0); base < promptPerPartition; base += chunk {
			for i := range msgs {
				msgs[i] = iggy.Message{Payload: []byte(promptPayload(p, base+uint64(i)))}
			}
			res, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(p), msgs)
			if err != nil {
				t.Fatal(err)
			}
			if res.Partition != p || res.BaseOffset != base || res.Count != chunk {
				t.Fatalf("send to partition %d at offset %d: landed %+v", p, base, res)
			}
		}
	}
}

// promptSink is the connector file of the paced committing sink for this test:
// sink_controlled, a commit interval far longer than a run (so only commit.delay, left at
// its default, can store anything before a kill), max_uncommitted left at its default
// (100000: no partition ever pauses, or turns urgent and is stored at once).
func promptSink(lib, out string) string {
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "native committing sink"
path = %q
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "text"
batch_length = %d
poll_interval = "5ms"

[commit]
interval = "5s"

[plugin_config]
path = %q
flush_interval_ms = %d
consume_pause_ms = %d
`, promptSinkKey, lib, promptBatch, out, promptFlushMs, promptPauseMs)
}

// lineSample is the output file's complete-line count, read just before at.
type lineSample struct {
	at    time.Time
	lines int
}

// lineSampler counts the complete lines of a growing file every few milliseconds, reading
// only what was appended since its last read.
type lineSampler struct {
	path       string
	stop, done chan struct{}

	mu      sync.Mutex
	samples []lineSample
	err     error
}

func sampleLines(path string, every time.Duration) *lineSampler {
	s := &lineSampler{path: path, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(every)
	return s
}

func (s *lineSampler) run(every time.Duration) {
	defer close(s.done)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	buf := make([]byte, 64<<10)
	lines := 0
	for {
		if f == nil {
			var err error
			if f, err = os.Open(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.fail(err)
				return
			}
		}
		for f != nil {
			n, err := f.Read(buf)
			lines += bytes.Count(buf[:n], []byte{'\n'})
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				s.fail(err)
				return
			}
		}
		// Stamped after the read: the count is at most the file's at that moment, so a
		// sample taken as "at or before T" never overstates the lines written by T.
		s.mu.Lock()
		s.samples = append(s.samples, lineSample{time.Now(), lines})
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

func (s *lineSampler) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// firstAbove returns the first sample with more than n lines.
func (s *lineSampler) firstAbove(n int) (lineSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sm := range s.samples {
		if sm.lines > n {
			return sm, true
		}
	}
	return lineSample{}, false
}

// halt stops the sampler and returns its samples.
func (s *lineSampler) halt(t *testing.T) []lineSample {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		t.Fatalf("sampling %s: %v", s.path, s.err)
	}
	return s.samples
}

// promptKill is what the test knows of one kill.
type promptKill struct {
	delay    time.Duration           // chosen: from the sample that saw the run's first line to SIGKILL
	actual   time.Duration           // measured: the same span, as it happened
	lines    int                     // complete lines in the file once the process was dead (torn line dropped)
	window   int                     // lines written in the last promptWindow before the kill (at least)
	stored   [promptPartitions]int64 // stored offsets read from the server after the kill (-1: none)
	maxWrote [promptPartitions]int64 // highest offset of each partition in the file at the kill (-1: none)
	dups     int                     // lines of the next run already in the file at the kill
}

// TestSinkControlledCrashRedeliversLittle: with offset_commit = "sink_controlled" a sink's
// commits are stored within commit.delay (default 10 ms, not set here), not on
// commit.interval (here 5 s, longer than any run), so a crash redelivers only what was
// committed in its last moments, not the run's backlog.
//
// A `ferry server` holds a 3-partition topic with 20,000 messages per partition (payload
// "p=P o=OFFSET") before the first run. The sink is the C committing sink (write + fsync +
// commit every 50 ms; batch_length 100) paced to at most 10,000 messages/s by
// testdata/paced_committing_sink.c so the backlog outlasts five short runs on any machine.
// `ferry run` processes against the server: five are killed with SIGKILL at a random moment
// 0.2–0.6 s after the run's first line (seeded, FERRY_E2E_SEED; seed and delays logged), the
// sixth runs until idle. A goroutine samples the file's line count every 2 ms; W_i is the
// line count at kill i minus the last sample taken at or before kill i − 100 ms (so it errs
// on the large side). S_i(p) is partition p's stored offset read from the server after kill
// i, X_i(p) the highest offset of p in the file at kill i. Asserts, exactly:
//
//   - every line is one message's payload; each run writes, per partition, consecutive
//     offsets starting at S(p) + 1 of the kill before it (0 for the first run);
//   - S_{i-1}(p) ≤ S_i(p) ≤ X_i(p): offsets never move back, nothing is stored unwritten;
//   - D_i, the lines of run i+1 whose (partition, offset) was already in the file at kill
//     i, equals Σp X_i(p) − S_i(p) (run i+1 rewrote every message kill i exposed), and
//     D_i ≤ W_i + 3 × batch_length;
//   - every one of the 60,000 messages is in the file, exactly 1 + (the number of kills i
//     with S_i(p) < offset ≤ X_i(p)) times, and that is at most 2: a message is written
//     again only after a kill that found it written and not stored, and the run after it
//     stores it long before it is killed in turn; the file has 60,000 + Σ D_i lines;
//   - the runs made progress: the first kill came before the whole backlog was written,
//     every killed run wrote messages never written before, and no kill found the whole
//     backlog stored;
//   - the last run exits 0 and the final stored offset of every partition is 19,999.
func TestSinkControlledCrashRedeliversLittle(t *testing.T) {
	lib := cFixture(t, "paced_committing_sink")
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	produceBacklog(t, addr)

	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.log")
	writeFile(t, filepath.Join(conns, "sink.toml"), promptSink(lib, out))
	cfg := remoteConfig(t, filepath.Join(dir, "runtime"), addr, conns)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FERRY_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FERRY_E2E_SEED=%q: %v", s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d (FERRY_E2E_SEED=%d reproduces the kill delays)", seed, seed)

	var kills []promptKill
	before := 0 // complete lines in the file before the run
	for run := 1; run <= promptKills; run++ {
		sampler := sampleLines(out, promptSampleEvery)
		p := startFerry(t, fmt.Sprintf("run %d", run), dir, nil, "run", "--config", cfg, "--progress", "0")
		var first lineSample
		testkit.WaitFor(t, fmt.Sprintf("run %d's first line", run), func() bool {
			if p.exited() {
				t.Fatalf("run %d exited: %v", run, p.err)
			}
			var ok bool
			first, ok = sampler.firstAbove(before)
			return ok
		})
		k := promptKill{delay: promptKillMin + time.Duration(rng.Int64N(int64(promptKillMax-promptKillMin)))}
		time.Sleep(time.Until(first.at.Add(k.delay)))
		killAt := time.Now()
		p.kill()
		k.actual = killAt.Sub(first.at)
		samples := sampler.halt(t)

		lines, torn := readLines(t, out)
		if torn != "" {
			// SIGKILL can cut a write(2) short. Those bytes were never fsynced, so never
			// committed: drop them as a sink repairing its file on start would.
			t.Logf("kill %d tore the last line (%d bytes); truncating it", run, len(torn))
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(out, fi.Size()-int64(len(torn))); err != nil {
				t.Fatal(err)
			}
		}
		k.lines = len(lines)
		k.window = -1
		for _, sm := range samples {
			if sm.at.After(killAt.Add(-promptWindow)) {
				break
			}
			k.window = k.lines - sm.lines
		}
		if k.window < 0 {
			t.Fatalf("kill %d: no line count sampled at or before kill − %s", run, promptWindow)
		}
		offs, err := offsets(t, addr, "s", "t", promptSinkGroup)
		if err != nil {
			t.Fatal(err)
		}
		if len(offs) != promptPartitions {
			t.Fatalf("kill %d: ferry offsets lists partitions %v, want 0..%d", run, offs, promptPartitions-1)
		}
		allStored := true
		for pt := range uint32(promptPartitions) {
			o, ok := offs[pt]
			if !ok {
				t.Fatalf("kill %d: ferry offsets lists partitions %v, want 0..%d", run, offs, promptPartitions-1)
			}
			k.stored[pt] = o.stored
			allStored = allStored && o.stored == promptPerPartition-1
		}
		if allStored {
			t.Fatalf("kill %d came after the whole backlog was stored: the runs are too fast for this test to prove anything", run)
		}
		kills = append(kills, k)
		before = k.lines
	}
	last := startFerry(t, "last run", dir, nil, "run", "--config", cfg, "--progress", "0", "--exit-when-idle", "1s")
	last.wait(60 * time.Second)

	all, torn := readLines(t, out)
	if torn != "" {
		t.Fatalf("output ends with an unterminated line %q after a clean stop", torn)
	}
	type msg struct {
		p uint32
		o uint64
	}
	msgs := make([]msg, len(all))
	for i, l := range all {
		p, o, ok := parsePromptLine(l)
		if !ok {
			t.Fatalf("line %d = %q: not a message payload", i+1, l)
		}
		msgs[i] = msg{p, o}
	}

	// Walk the runs: run r wrote lines [start, end).
	var count [promptPartitions][promptPerPartition]int
	maxWrote := [promptPartitions]int64{-1, -1, -1}
	resume := [promptPartitions]int64{-1, -1, -1} // the stored offsets the run starts after
	start, totalDups := 0, 0
	for r := 0; r <= promptKills; r++ {
		end := len(msgs)
		if r < promptKills {
			end = kills[r].lines
		}
		next := resume
		for i := range next {
			next[i]++
		}
		again := 0
		for i := start; i < end; i++ {
			m := msgs[i]
			if int64(m.o) != next[m.p] {
				t.Fatalf("line %d (run %d): partition %d offset %d, want offset %d: each run must write every partition's offsets in order from the stored offset + 1 (%d)",
					i+1, r+1, m.p, m.o, next[m.p], resume[m.p]+1)
			}
			next[m.p]++
			if int64(m.o) <= maxWrote[m.p] {
				again++
			}
			count[m.p][m.o]++
		}
		if r > 0 {
			k := &kills[r-1]
			exposed := 0
			for p := range k.stored {
				exposed += int(k.maxWrote[p] - k.stored[p])
			}
			k.dups = again
			totalDups += again
			bound := k.window + promptPartitions*promptBatch
			t.Logf("kill %d: delay %v (measured %v), %d lines in the file, %d written in the last %v; stored %v, written up to %v; %d duplicates, bound %d",
				r, k.delay.Round(time.Millisecond), k.actual.Round(time.Millisecond), k.lines, k.window, promptWindow, k.stored, k.maxWrote, k.dups, bound)
			if k.dups > bound {
				t.Fatalf("kill %d: %d duplicates, more than the %d lines written in the last %v + %d × batch_length %d = %d",
					r, k.dups, k.window, promptWindow, promptPartitions, promptBatch, bound)
			}
			if again != exposed {
				t.Fatalf("run %d rewrote %d of the %d messages kill %d left written and not stored (stored %v, written up to %v)",
					r+1, again, exposed, r, k.stored, k.maxWrote)
			}
		}
		fresh := int64(0)
		for p := range next {
			if w := next[p] - 1; w > maxWrote[p] {
				fresh += w - maxWrote[p]
				maxWrote[p] = w
			}
		}
		if r < promptKills {
			k := &kills[r]
			k.maxWrote = maxWrote
			for p := range k.stored {
				if k.stored[p] > maxWrote[p] {
					t.Fatalf("kill %d: partition %d stored offset %d, but the file holds offsets up to %d only: stored before written", r+1, p, k.stored[p], maxWrote[p])
				}
				if k.stored[p] < resume[p] {
					t.Fatalf("kill %d: partition %d stored offset %d, below the %d stored at the kill before", r+1, p, k.stored[p], resume[p])
				}
			}
			if fresh == 0 {
				t.Fatalf("run %d wrote no message that was not in the file already: the kills prove nothing", r+1)
			}
			if r == 0 && maxWrote[0]+maxWrote[1]+maxWrote[2]+3 == promptMessages {
				t.Fatal("the whole backlog was written before the first kill: the sink is too fast for this test to prove anything")
			}
			resume = k.stored
		}
		start = end
	}

	for p := range count {
		for o, c := range count[p] {
			want := 1
			for _, k := range kills {
				if k.stored[p] < int64(o) && int64(o) <= k.maxWrote[p] {
					want++
				}
			}
			switch {
			case c == 0:
				t.Fatalf("partition %d offset %d lost: not in the file", p, o)
			case want > 2:
				t.Fatalf("partition %d offset %d was written and not stored at %d kills", p, o, want-1)
			case c != want:
				t.Fatalf("partition %d offset %d is in the file %d times, want %d (once, plus once per kill that found it written and not stored)", p, o, c, want)
			}
		}
	}
	if len(msgs) != promptMessages+totalDups {
		t.Fatalf("%d lines, want %d messages + %d duplicates", len(msgs), promptMessages, totalDups)
	}
	offs, err := offsets(t, addr, "s", "t", promptSinkGroup)
	if err != nil {
		t.Fatal(err)
	}
	for p := range uint32(promptPartitions) {
		if o := offs[p]; o.stored != promptPerPartition-1 || o.current != promptPerPartition-1 {
			t.Fatalf("final offsets of partition %d: stored %d, current %d; want both %d", p, o.stored, o.current, promptPerPartition-1)
		}
	}
	t.Logf("%d lines: all %d messages, %d duplicates over %d kills, none lost; final stored offsets %d", len(msgs), promptMessages, totalDups, promptKills, promptPerPartition-1)
}
