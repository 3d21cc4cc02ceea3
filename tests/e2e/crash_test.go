package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// Crash test parameters: a rate-limited random source keeps the stream going for ~2 s so
// the SIGKILL lands mid-stream; the sink follows it live.
const (
	crashMessages       = 12000
	crashRate           = 6000 // messages per second
	crashBatch          = 100  // source batch and sink batch_length (one write() per Consume)
	crashMaxUncommitted = 1000
	crashKillAt         = 3000 // lines in the output when the process is killed
)

// TestCrashRestart kills a `ferry run --embedded` process (source, embedded server and file
// sink in one process) with SIGKILL mid-stream, restarts it on the same data, lets it finish
// and checks the file sink's output and the stored offset exactly, per commit mode:
//
//   - the output is two runs: offsets 0..b in order (first run), then a..M-1 in order
//     (second run), where M is the topic's message count;
//   - after_consuming and sink_controlled lose nothing (a ≤ b+1) and duplicate only the
//     uncommitted window (b+1−a ≤ max_uncommitted); every source message 0..N-1 is in the
//     file;
//   - after_polling is at-most-once by design (the server stores the offset when it serves
//     the poll): it duplicates nothing (a ≥ b+1) and loses only what was polled and not yet
//     written when the process died: at most the batch being written, the one queued for
//     the sink and the one being polled (3 × batch_length);
//   - the source is at-least-once: M − N ≤ one source batch replayed (sent, state not saved);
//   - the stored offset ends at M−1.
func TestCrashRestart(t *testing.T) {
	for _, mode := range []string{"after_polling", "after_consuming", "sink_controlled"} {
		t.Run(mode, func(t *testing.T) { crashRestart(t, mode) })
	}
}

func crashRestart(t *testing.T, mode string) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.jsonl")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", crashMessages, crashRate, crashBatch))
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("s", "t", mode, out, crashBatch, crashMaxUncommitted))
	cfg := runtimeConfig(t, dir, conns)
	args := []string{"run", "--config", cfg, "--embedded", "--progress", "0"}

	first := startFerry(t, "first run", dir, nil, args...)
	testkit.WaitFor(t, fmt.Sprintf("%d lines before the kill", crashKillAt), func() bool {
		if first.exited() {
			t.Fatalf("first run exited: %v", first.err)
		}
		return countLines(out) >= crashKillAt
	})
	first.kill()
	before := len(readRecords(t, out))
	t.Logf("SIGKILL with %d lines written", before)
	if before >= crashMessages {
		t.Fatalf("the kill came too late: %d lines already", before)
	}

	second := startFerry(t, "second run", dir, nil, args...)
	addr := second.embeddedAddr()
	var total int64
	testkit.WaitFor(t, "source done and offsets stored up to the end", func() bool {
		if second.exited() {
			t.Fatalf("second run exited: %v", second.err)
		}
		// The file first: once the source's last message is in it, the source has sent
		// everything, so offsets read after that are final (read before, they could miss
		// the last batch, which then lands past the total the test expects).
		if !sourceDone(t, out, crashMessages, mode) {
			return false
		}
		offs, err := offsets(t, addr, "s", "t", sinkGroup)
		if err != nil {
			return false // the group may not exist yet
		}
		p, ok := offs[0]
		if !ok || p.current+1 < crashMessages || p.stored != p.current {
			return false
		}
		total = p.current + 1
		return true
	})
	second.stop(15 * time.Second)

	recs := readRecords(t, out)
	if total-crashMessages > crashBatch {
		t.Fatalf("topic has %d messages for %d produced: more than one source batch replayed", total, crashMessages)
	}
	// The first run's output is what was in the file when it died: it must be 0..b.
	k := before
	for i := 0; i < k; i++ {
		if recs[i].Offset != uint64(i) || recs[i].Partition != 0 {
			t.Fatalf("first run: line %d has partition %d offset %d, want 0/%d", i+1, recs[i].Partition, recs[i].Offset, i)
		}
	}
	b := int64(k) - 1
	if k >= len(recs) {
		t.Fatalf("the second run wrote nothing")
	}
	a := int64(recs[k].Offset)
	for i := k; i < len(recs); i++ {
		if want := uint64(a) + uint64(i-k); recs[i].Offset != want {
			t.Fatalf("second run: line %d has offset %d, want %d (output must be 0..%d then %d..%d)", i+1, recs[i].Offset, want, b, a, total-1)
		}
	}
	if last := int64(recs[len(recs)-1].Offset); last != total-1 {
		t.Fatalf("last offset written = %d, want %d", last, total-1)
	}
	switch mode {
	case "after_polling":
		if a < b+1 {
			t.Fatalf("after_polling duplicated offsets %d..%d", a, b)
		}
		lost := a - (b + 1)
		if lost > 3*crashBatch {
			t.Fatalf("after_polling lost %d messages (offsets %d..%d), more than 3 batches polled ahead", lost, b+1, a-1)
		}
		t.Logf("after_polling (at-most-once): first run wrote 0..%d, lost %d polled-but-unwritten messages, second run wrote %d..%d", b, lost, a, total-1)
	default:
		if a > b+1 {
			t.Fatalf("%s lost offsets %d..%d", mode, b+1, a-1)
		}
		dups := b + 1 - a
		if dups > crashMaxUncommitted {
			t.Fatalf("%s duplicated %d messages, more than max_uncommitted %d", mode, dups, crashMaxUncommitted)
		}
		if !sourceDone(t, out, crashMessages, mode) {
			t.Fatal("some source messages are missing from the output")
		}
		t.Logf("%s: first run wrote 0..%d, second run resumed at %d: %d duplicates, nothing lost", mode, b, a, dups)
	}
}

// sourceDone reports whether the output holds every source message 0..n-1 (for
// after_polling, which may lose some, whether it reached the last one).
func sourceDone(t *testing.T, path string, n int, mode string) bool {
	t.Helper()
	seen := make([]bool, n)
	f, err := os.Stat(path)
	if err != nil || f.Size() == 0 {
		return false
	}
	for _, r := range readRecords(t, path) {
		s := r.seq(t)
		if s >= uint64(n) {
			t.Fatalf("message id %s beyond the source's count %d", r.ID, n)
		}
		seen[s] = true
	}
	if mode == "after_polling" {
		return seen[n-1]
	}
	for _, ok := range seen {
		if !ok {
			return false
		}
	}
	return true
}
