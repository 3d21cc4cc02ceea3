package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// Native plugin tests: the C example plugins of examples/plugins/c, built with gcc once per
// test binary, loaded by the real ferry binary.

// Parameters of TestNativeCommittingSinkSurvivesSIGKILL. A rate-limited random source keeps
// the stream going for ~4 s so the SIGKILL lands mid-stream; the committing sink follows
// it live and fsyncs + commits every nativeFlushMs.
const (
	nativeMessages       = 20000
	nativeRate           = 5000 // messages per second
	nativeBatch          = 100  // source batch and sink batch_length
	nativeMaxUncommitted = 2000
	nativeFlushMs        = 50
	nativeKillAtLines    = 6000 // lines in the output when the process is killed…
	nativeKillAtStored   = 2000 // …and at least this offset stored for the sink's group
	nativeSinkKey        = "native"
	nativeSinkGroup      = "iggy-connect-sink-" + nativeSinkKey
)

var (
	nativeOnce sync.Once
	nativeDir  string
	nativeErr  error
)

// nativePlugins builds examples/plugins/c (make, gcc) once, into the directory of the ferry
// binary (removed by TestMain), and returns the directory holding committing_sink.so,
// null_sink.so and source.so.
func nativePlugins(t *testing.T) string {
	t.Helper()
	nativeOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(ferryBin), "plugins")
		cmd := exec.Command("make", "-C", filepath.Join(repoRoot, "examples", "plugins", "c"), "OUT="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			nativeErr = fmt.Errorf("make -C examples/plugins/c OUT=%s: %w\n%s", dir, err, out)
			return
		}
		nativeDir = dir
	})
	if nativeErr != nil {
		t.Fatal(nativeErr)
	}
	return nativeDir
}

// committingSink is a connector file for the C committing sink (key nativeSinkKey) writing
// each payload plus '\n' to out, fsyncing and committing every flushMs.
func committingSink(lib, stream, topic, mode, out string, batch, maxUncommitted, flushMs int) string {
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "native committing sink"
path = %q
offset_commit = %q

[[streams]]
stream = %q
topics = [%q]
schema = "text"
batch_length = %d
poll_interval = "5ms"

[commit]
interval = "100ms"
max_uncommitted = %d

[plugin_config]
path = %q
flush_interval_ms = %d
`, nativeSinkKey, lib, mode, stream, topic, batch, maxUncommitted, out, flushMs)
}

// startServer runs `ferry server` on dataDir (loopback, random port) and returns it with its
// address.
func startServer(t testing.TB, name, dir, dataDir string) (*proc, string) {
	t.Helper()
	srv := startFerry(t, name, dir, nil, "server", "--addr", "127.0.0.1:0", "--data", dataDir)
	var addr string
	testkit.WaitFor(t, name+" address", func() bool {
		if srv.exited() {
			t.Fatalf("%s exited: %v", name, srv.err)
		}
		if m := serverAddrRE.FindStringSubmatch(srv.out.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	})
	return srv, addr
}

// partition0 returns partition 0's offsets of group on stream/topic at addr.
func partition0(t *testing.T, addr, stream, topic, group string) partitionOffsets {
	t.Helper()
	offs, err := offsets(t, addr, stream, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := offs[0]
	if !ok || len(offs) != 1 {
		t.Fatalf("ferry offsets: partitions %v, want exactly partition 0", offs)
	}
	return p
}

// topicMessage is one message of the topic as the built-in file sink writes it (schema text:
// the payload is a JSON string).
type topicMessage struct {
	Partition uint32 `json:"partition"`
	Offset    uint64 `json:"offset"`
	ID        string `json:"id"`
	Payload   string `json:"payload"`
}

// dumpTopic copies every message of stream/topic on the server at addr into a JSON Lines
// file with a `ferry run` holding only a built-in file sink (its own consumer group, from
// offset 0, stopping once idle) and returns the messages indexed by offset. It fails unless
// the offsets are exactly 0..len-1, each once, on partition 0.
func dumpTopic(t *testing.T, dir, addr, stream, topic string) []topicMessage {
	t.Helper()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "dump.jsonl")
	writeFile(t, filepath.Join(conns, "dump.toml"), fileSink(stream, topic, "after_consuming", out, 1000, 100000))
	cfg := remoteConfig(t, dir, addr, conns)
	dump := startFerry(t, "dump", dir, nil, "run", "--config", cfg, "--progress", "0", "--exit-when-idle", "1s")
	dump.wait(30 * time.Second)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []topicMessage
	for i, l := range bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'}) {
		var m topicMessage
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("dump line %d: %v: %q", i+1, err, l)
		}
		if m.Partition != 0 || m.Offset != uint64(i) {
			t.Fatalf("dump line %d: partition %d offset %d, want 0/%d", i+1, m.Partition, m.Offset, i)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// sourceSeq returns the random source's message number (id − 1) of a file sink id.
func sourceSeq(t *testing.T, id string) uint64 {
	t.Helper()
	return record{ID: id}.seq(t)
}

// readLines returns the complete lines of path (without their '\n'); an unterminated last
// line is returned separately.
func readLines(t *testing.T, path string) (lines []string, torn string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, '\n')
	torn = string(b[i+1:])
	if i < 0 {
		return nil, torn
	}
	return strings.Split(string(b[:i]), "\n"), torn
}

// TestNativeCommittingSinkSurvivesSIGKILL runs the C committing sink (examples/plugins/c,
// dlopened by path) with offset_commit = "sink_controlled" behind a built-in random source
// in one `ferry run --embedded` process, kills the process with SIGKILL mid-stream, reads
// the group's stored offset S from the data directory (`ferry server` + `ferry offsets`),
// restarts the run on the same data until it is idle, and checks against a dump of the
// topic (offset → payload, id), with k the complete lines in the file at the kill and M the
// topic's message count:
//
//   - S ≥ the offset seen stored while the first run was alive (stored commits survive the
//     crash) and S ≤ k−1: the sink committed nothing it had not written;
//   - line i < k is the payload of offset i; the second run's lines are the payloads of
//     offsets S+1..M−1 in order: the restart resumes exactly at S+1;
//   - hence every offset 0..M−1 is in the file at least once, at most twice, and the
//     duplicated ones are exactly S+1..k−1 (all above S, at most max_uncommitted of them);
//   - every source message 0..N−1 is in the file; M − N ≤ one source batch (the source is
//     at-least-once across the crash);
//   - the final stored offset is M−1.
func TestNativeCommittingSinkSurvivesSIGKILL(t *testing.T) {
	lib := filepath.Join(nativePlugins(t), "committing_sink.so")
	committingSinkSurvivesSIGKILL(t, lib, "", fmt.Sprintf(" writes to %%s, fsync every %d ms", nativeFlushMs))
}

// committingSinkSurvivesSIGKILL is the body of TestNativeCommittingSinkSurvivesSIGKILL for
// any plugin with the C committing sink's config ({"path", "flush_interval_ms"}) and
// behaviour. extraConfig is appended to its [plugin_config]; openLine (with %s for the
// output path) is a fragment of the log line the plugin writes at open.
func committingSinkSurvivesSIGKILL(t *testing.T, lib, extraConfig, openLine string) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.log")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", nativeMessages, nativeRate, nativeBatch))
	writeFile(t, filepath.Join(conns, "sink.toml"), committingSink(lib, "s", "t", "sink_controlled", out, nativeBatch, nativeMaxUncommitted, nativeFlushMs)+extraConfig)
	cfg := runtimeConfig(t, dir, conns)
	data := filepath.Join(dir, "data")

	// First run: killed once the sink has written and committed a good part of the stream.
	first := startFerry(t, "first run", dir, nil, "run", "--config", cfg, "--embedded", "--progress", "0")
	addr := first.embeddedAddr()
	var live int64
	testkit.WaitFor(t, fmt.Sprintf("%d lines and offset %d stored", nativeKillAtLines, nativeKillAtStored), func() bool {
		if first.exited() {
			t.Fatalf("first run exited: %v", first.err)
		}
		if countLines(out) < nativeKillAtLines {
			return false
		}
		offs, err := offsets(t, addr, "s", "t", nativeSinkGroup)
		if err != nil {
			return false
		}
		live = offs[0].stored
		return live >= nativeKillAtStored
	})
	first.kill()
	if want := fmt.Sprintf(openLine, out); !strings.Contains(first.out.String(), want) {
		t.Fatalf("first run: the plugin's open log line is missing")
	}
	lines, torn := readLines(t, out)
	if torn != "" {
		// SIGKILL can cut a write(2) short. Those bytes were never fsynced, so never committed:
		// drop them as a sink repairing its file on start would.
		t.Logf("the kill tore the last line (%d bytes); truncating it", len(torn))
		if err := os.Truncate(out, int64(len(strings.Join(lines, "\n"))+1)); err != nil {
			t.Fatal(err)
		}
	}
	k := int64(len(lines))
	if k >= nativeMessages {
		t.Fatalf("the kill came too late: %d lines already", k)
	}

	// The stored offset the restart will resume from.
	srv, saddr := startServer(t, "server after the kill", dir, data)
	atKill := partition0(t, saddr, "s", "t", nativeSinkGroup)
	srv.stop(15 * time.Second)
	s := atKill.stored
	t.Logf("SIGKILL with %d lines written; stored offset %d (seen %d while running), topic at %d", k, s, live, atKill.current)
	if s < live {
		t.Fatalf("stored offset after the crash = %d, below the %d stored before it", s, live)
	}
	if s > k-1 {
		t.Fatalf("stored offset %d, but only offsets 0..%d were in the file: committed before written", s, k-1)
	}

	// Second run on the same data, until the source has ended and the sink is idle.
	second := startFerry(t, "second run", dir, nil, "run", "--config", cfg, "--embedded", "--progress", "0", "--exit-when-idle", "1s")
	second.wait(60 * time.Second)

	// Final state: stored offset and the topic's content.
	srv, saddr = startServer(t, "server after the restart", dir, data)
	final := partition0(t, saddr, "s", "t", nativeSinkGroup)
	topic := dumpTopic(t, filepath.Join(dir, "dump"), saddr, "s", "t")
	srv.stop(15 * time.Second)

	m := int64(len(topic))
	if m-1 != final.current {
		t.Fatalf("dump has %d messages, the topic's current offset is %d", m, final.current)
	}
	if m < nativeMessages || m-nativeMessages > nativeBatch {
		t.Fatalf("topic has %d messages for %d produced: want 0..%d replayed", m, nativeMessages, nativeBatch)
	}
	if final.stored != m-1 {
		t.Fatalf("final stored offset = %d, want %d", final.stored, m-1)
	}
	seen := make([]bool, nativeMessages)
	for _, msg := range topic {
		if q := sourceSeq(t, msg.ID); q < nativeMessages {
			seen[q] = true
		} else {
			t.Fatalf("offset %d: message id %s beyond the source's count", msg.Offset, msg.ID)
		}
	}
	for q, ok := range seen {
		if !ok {
			t.Fatalf("source message %d is not in the topic", q)
		}
	}

	// The output: 0..k-1 from the first run, S+1..M-1 from the second.
	all, torn := readLines(t, out)
	if torn != "" {
		t.Fatalf("output ends with an unterminated line %q after a clean stop", torn)
	}
	if want := k + (m - 1 - s); int64(len(all)) != want {
		t.Fatalf("output has %d lines, want %d (offsets 0..%d, then %d..%d)", len(all), want, k-1, s+1, m-1)
	}
	count := make([]int, m)
	for i, line := range all {
		o := int64(i)
		if o >= k {
			o = s + 1 + (o - k)
		}
		if line != topic[o].Payload {
			t.Fatalf("line %d = %.20q…, want the payload of offset %d %.20q… (output must be offsets 0..%d then %d..%d)",
				i+1, line, o, topic[o].Payload, k-1, s+1, m-1)
		}
		count[o]++
	}
	dups := 0
	for o, c := range count {
		switch {
		case c == 0:
			t.Fatalf("offset %d lost", o)
		case c > 2:
			t.Fatalf("offset %d written %d times", o, c)
		case c == 2 && int64(o) <= s:
			t.Fatalf("offset %d (at or below the stored offset %d) written twice", o, s)
		case c == 2:
			dups++
		}
	}
	if int64(dups) != k-1-s || dups > nativeMaxUncommitted {
		t.Fatalf("%d duplicates, want exactly %d (offsets %d..%d) and at most max_uncommitted %d", dups, k-1-s, s+1, k-1, nativeMaxUncommitted)
	}
	t.Logf("first run wrote offsets 0..%d, stored %d; second run wrote %d..%d: %d duplicates (all above %d), none lost; %d topic messages for %d produced; final stored offset %d",
		k-1, s, s+1, m-1, dups, s, m, nativeMessages, final.stored)
}

// TestNativeSinkControlledWithoutCommitSymbolRefused configures the C null sink (which does
// not export iggy_sink_set_commit_callback) with offset_commit = "sink_controlled" next to
// a built-in file sink on the same topic:
//
//   - `ferry check` exits 1, reports the null sink with the text `ferry run` reports (plugin
//     path, connector key, missing symbol, ErrCommitUnsupported's text), and the two other
//     connectors as ok;
//   - `ferry run` refuses only that connector (a log line naming the connector, the plugin
//     path and the symbol), runs the others to the end (the file sink writes offsets
//     0..N-1 once each), prints the refused sink's final status as error, and exits 1
//     naming it — the key once ("sink strict: open: …", not "sink strict: sink strict: …").
func TestNativeSinkControlledWithoutCommitSymbolRefused(t *testing.T) {
	const n = 2000
	lib := filepath.Join(nativePlugins(t), "null_sink.so")
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.jsonl")
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", n, 0, 100))
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("s", "t", "after_consuming", out, 100, 1000))
	writeFile(t, filepath.Join(conns, "strict.toml"), fmt.Sprintf(`type = "sink"
key = "strict"
enabled = true
version = 0
name = "null sink, sink_controlled"
path = %q
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "text"
batch_length = 100
`, lib))
	cfg := runtimeConfig(t, dir, conns)

	// ferry check: exit status 1, one ERROR line.
	cmd := exec.Command(ferryBin, "check", "--config", cfg)
	b, err := cmd.CombinedOutput()
	checkOut := string(b)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("ferry check: err = %v, want exit status 1\n%s", err, checkOut)
	}
	strictLine := ""
	for _, l := range strings.Split(checkOut, "\n") {
		if strings.HasPrefix(l, "sink   strict ") {
			strictLine = l
		}
	}
	for _, want := range []string{
		"offset_commit=sink_controlled",
		`ERROR: plugin ` + lib + ` (connector "strict"): offset_commit = sink_controlled needs symbol iggy_sink_set_commit_callback: plugin does not support sink-controlled commits`,
	} {
		if !strings.Contains(strictLine, want) {
			t.Fatalf("ferry check: the line of sink strict = %q, want it to contain %q\n%s", strictLine, want, checkOut)
		}
	}
	for _, want := range []string{"check: 1 connector(s) with problems"} {
		if !strings.Contains(checkOut, want) {
			t.Fatalf("ferry check output lacks %q:\n%s", want, checkOut)
		}
	}
	for _, l := range strings.Split(checkOut, "\n") {
		if (strings.HasPrefix(l, "source gen ") || strings.HasPrefix(l, "sink   out ")) && !strings.HasSuffix(l, "  ok") {
			t.Fatalf("ferry check: %q, want ok", l)
		}
	}

	// ferry run: the strict sink is refused, the rest runs to the end, exit status 1.
	p := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--embedded", "--progress", "0", "--exit-when-idle", "1s")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("ferry run did not exit within 30s")
	}
	runOut := p.out.String()
	if !errors.As(p.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("ferry run: err = %v, want exit status 1\n%s", p.err, runOut)
	}
	// The same words as check's: the runtime refuses it before opening it (connect.CheckSink).
	refusal := `plugin ` + lib + ` (connector "strict"): offset_commit = sink_controlled needs symbol iggy_sink_set_commit_callback: plugin does not support sink-controlled commits`
	var refusedLine string
	for _, line := range strings.Split(runOut, "\n") {
		if strings.Contains(line, `level=ERROR msg="sink not started" sink=strict `) {
			refusedLine = line
		}
	}
	if want := ` error="` + strings.ReplaceAll(refusal, `"`, `\"`) + `"`; !strings.HasSuffix(refusedLine, want) {
		t.Fatalf("ferry run's \"sink not started\" line for strict is %q, want it to end with %q:\n%s", refusedLine, want, runOut)
	}
	for _, want := range []string{
		"\nsink   strict                   error    polled=0 delivered=0 committed=0 consume_errors=0 error=" + refusal + "\n",
		fmt.Sprintf("\nsink   out                      stopped  polled=%d delivered=%d committed=%d consume_errors=0\n", n, n, n),
		"\nferry: connectors in error: sink strict: " + refusal + "\n",
	} {
		if !strings.Contains(runOut, want) {
			t.Fatalf("ferry run output lacks %q:\n%s", want, runOut)
		}
	}
	if c := strings.Count(runOut, "sink not started"); c != 1 {
		t.Fatalf("%d sinks not started, want 1:\n%s", c, runOut)
	}
	recs := readRecords(t, out)
	if len(recs) != n {
		t.Fatalf("file sink wrote %d lines, want %d", len(recs), n)
	}
	for i, r := range recs {
		if r.Offset != uint64(i) || r.seq(t) != uint64(i) {
			t.Fatalf("line %d: offset %d id %s, want offset %d id %d", i+1, r.Offset, r.ID, i, i+1)
		}
	}
}
