package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	promptPauseMs      = 30  // pause per consume: at most 100 messages per 30 ms while runs are killed
	promptKills        = 5
	promptKillMin      = 1100 * time.Millisecond // a kill lands this long…
	promptKillMax      = 1900 * time.Millisecond // …to this long after the run's first commit
	promptStoreWithin  = 1 * time.Second         // a sink's commit must be stored this long after it, at most
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
func promptSink(lib, out, commits string, pauseMs int) string {
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
commits_path = %q
flush_interval_ms = %d
consume_pause_ms = %d
`, promptSinkKey, lib, promptBatch, out, commits, promptFlushMs, pauseMs)
}

// sinkCommit is one commit the paced committing sink made: the runtime's callback took it.
type sinkCommit struct {
	partition uint32
	offset    int64
	at        time.Time
}

// readCommits returns the sink's commits recorded in path (see the fixture), in the order
// it made them; a record a kill cut short is left out.
func readCommits(t *testing.T, path string) []sinkCommit {
	t.Helper()
	var out []sinkCommit
	for i, line := range strings.SplitAfter(string(readIfExists(t, path)), "\n") {
		if !strings.HasSuffix(line, "\n") {
			break // torn by a kill, or the end
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("%s line %d = %q: want PARTITION OFFSET UNIX_NANOS", path, i+1, line)
		}
		p, err1 := strconv.ParseUint(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		ns, err3 := strconv.ParseInt(f[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil || p >= promptPartitions {
			t.Fatalf("%s line %d = %q: %v", path, i+1, line, err)
		}
		out = append(out, sinkCommit{uint32(p), o, time.Unix(0, ns)})
	}
	return out
}

// promptKill is what the test knows of one kill.
type promptKill struct {
	delay    time.Duration           // chosen: from the run's first sink commit to SIGKILL
	actual   time.Duration           // measured: the same span, as it happened
	lines    int                     // complete lines in the file once the process was dead (torn line dropped)
	due      [promptPartitions]int64 // each partition's highest sink commit made promptStoreWithin or more before the kill (else the offset the run resumed after)
	stored   [promptPartitions]int64 // stored offsets read from the server after the kill (-1: none)
	maxWrote [promptPartitions]int64 // highest offset of each partition in the file at the kill (-1: none)
	dups     int                     // lines of the next run already in the file at the kill
}

// TestSinkControlledCrashRedeliversLittle: with offset_commit = "sink_controlled" a sink's
// commits are stored within commit.delay (default 10 ms, not set here), not on
// commit.interval (here 5 s, longer than any run), so a crash redelivers only what the sink
// committed in its last moments, or had not committed yet, never the run's backlog.
//
// A `ferry server` holds a 3-partition topic with 20,000 messages per partition (payload
// "p=P o=OFFSET") before the first run. The sink is the C committing sink (write + fsync +
// commit every 50 ms; batch_length 100) paced to at most 3,333 messages/s by
// testdata/paced_committing_sink.c so the backlog outlasts five runs on any machine; the
// fixture records every commit it made (partition, offset, when). `ferry run` processes
// against the server: five are killed with SIGKILL at a random moment 1.1–1.9 s after the
// run's first sink commit (seeded, FERRY_E2E_SEED; seed and delays logged), the sixth runs
// unpaced until idle. The bound is drawn from the sink's own commits, so how long its write
// and fsync take (the disk's speed) decides nothing: only what the runtime did with the
// commits it was handed is judged. S_i(p) is partition p's stored offset read from the
// server after kill i, X_i(p) the highest offset of p in the file at kill i, C_i(p) the
// highest offset of p the sink committed 1 s or more before kill i (the offset the run
// resumed after if none). Asserts, exactly:
//
//   - every line is one message's payload; each run writes, per partition, consecutive
//     offsets starting at S(p) + 1 of the kill before it (0 for the first run);
//   - S_i(p) is the offset the run resumed after or one the sink committed in run i:
//     nothing is stored that the sink did not commit;
//   - C_i(p) ≤ S_i(p) ≤ X_i(p): every commit the sink made 1 s before the kill was stored
//     (a runtime that stored on commit.interval stores nothing in a run), offsets never move
//     back, nothing is stored unwritten; and C_i(p) is above the offset the run resumed
//     after for some p (the run's first commit came 1.1 s or more before its kill);
//   - D_i, the lines of run i+1 whose (partition, offset) was already in the file at kill
//     i, equals Σp X_i(p) − S_i(p) (run i+1 rewrote every message kill i exposed), which is
//     at most Σp X_i(p) − C_i(p);
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
	commitsPath := filepath.Join(dir, "commits.log")
	writeFile(t, filepath.Join(conns, "sink.toml"), promptSink(lib, out, commitsPath, promptPauseMs))
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
	resumed := [promptPartitions]int64{-1, -1, -1} // the stored offsets the run starts after
	seen := 0                                      // sink commits recorded before the run
	for run := 1; run <= promptKills; run++ {
		p := startFerry(t, fmt.Sprintf("run %d", run), dir, nil, "run", "--config", cfg, "--progress", "0")
		var first sinkCommit
		testkit.WaitFor(t, fmt.Sprintf("run %d's first sink commit", run), func() bool {
			if p.exited() {
				t.Fatalf("run %d exited: %v", run, p.err)
			}
			if cs := readCommits(t, commitsPath); len(cs) > seen {
				first = cs[seen]
				return true
			}
			return false
		})
		k := promptKill{delay: promptKillMin + time.Duration(rng.Int64N(int64(promptKillMax-promptKillMin)))}
		time.Sleep(time.Until(first.at.Add(k.delay)))
		killAt := time.Now()
		p.kill()
		k.actual = killAt.Sub(first.at)

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

		// Judge the stores by the sink's commits of this run.
		cs := readCommits(t, commitsPath)
		k.due = resumed
		committed := map[[2]int64]bool{}
		for _, c := range cs[seen:] {
			committed[[2]int64{int64(c.partition), c.offset}] = true
			if !c.at.After(killAt.Add(-promptStoreWithin)) {
				k.due[c.partition] = max(k.due[c.partition], c.offset)
			}
		}
		anyDue := false
		for pt := range k.stored {
			if k.stored[pt] != resumed[pt] && !committed[[2]int64{int64(pt), k.stored[pt]}] {
				t.Fatalf("kill %d: partition %d stored offset %d, which the sink never committed (it resumed after %d)", run, pt, k.stored[pt], resumed[pt])
			}
			if k.stored[pt] < k.due[pt] {
				t.Fatalf("kill %d: partition %d stored offset %d, but the sink committed offset %d %v or more before the kill: a commit was not stored promptly",
					run, pt, k.stored[pt], k.due[pt], promptStoreWithin)
			}
			anyDue = anyDue || k.due[pt] > resumed[pt]
		}
		if !anyDue {
			t.Fatalf("kill %d: no sink commit of the run came %v before the kill, though its first came %v before", run, promptStoreWithin, k.actual)
		}
		seen = len(cs)
		kills = append(kills, k)
		resumed = k.stored
	}
	// The backlog left is drained unpaced.
	writeFile(t, filepath.Join(conns, "sink.toml"), promptSink(lib, out, commitsPath, 0))
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
			slack := 0
			for p := range k.stored {
				slack += int(k.maxWrote[p] - k.due[p])
			}
			t.Logf("kill %d: delay %v (measured %v) after the run's first sink commit, %d lines in the file; stored %v, committed %v before by the sink %v, written up to %v; %d duplicates (at most %d)",
				r, k.delay.Round(time.Millisecond), k.actual.Round(time.Millisecond), k.lines, k.stored, promptStoreWithin, k.due, k.maxWrote, k.dups, slack)
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
