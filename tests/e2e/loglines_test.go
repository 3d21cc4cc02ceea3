package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// logLine is one JSON log line of a run, with its position in the output.
type logLine struct {
	n      int
	fields map[string]any
}

func (l logLine) msg() string   { s, _ := l.fields["msg"].(string); return s }
func (l logLine) level() string { s, _ := l.fields["level"].(string); return s }

// jsonLogLines splits a run's output: every line must be a JSON log line with the keys
// documented for [logging] format = "json" (time in RFC 3339, level, msg), except the
// lines in plain (which the process prints without its logger); those are returned apart.
func jsonLogLines(t *testing.T, out string) (lines []logLine, plain []string) {
	t.Helper()
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "{") {
			plain = append(plain, l)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %d is not JSON: %v: %q", i+1, err, l)
		}
		ts, _ := m["time"].(string)
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Fatalf("log line %d: time %q is not RFC 3339: %q", i+1, ts, l)
		}
		if lv, _ := m["level"].(string); !slices.Contains([]string{"DEBUG", "INFO", "WARN", "ERROR"}, lv) {
			t.Fatalf("log line %d: level %q: %q", i+1, m["level"], l)
		}
		if msg, ok := m["msg"].(string); !ok || msg == "" {
			t.Fatalf("log line %d: no msg: %q", i+1, l)
		}
		lines = append(lines, logLine{n: i, fields: m})
	}
	return lines, plain
}

// find returns the lines whose msg matches re.
func find(lines []logLine, re *regexp.Regexp) []logLine {
	var out []logLine
	for _, l := range lines {
		if re.MatchString(l.msg()) {
			out = append(out, l)
		}
	}
	return out
}

// one returns the only line whose msg matches re, at level; else the test fails.
func one(t *testing.T, lines []logLine, level string, re *regexp.Regexp) logLine {
	t.Helper()
	got := find(lines, re)
	if len(got) != 1 || got[0].level() != level {
		t.Fatalf("want exactly one %s line matching %q, got %d: %v", level, re, len(got), got)
	}
	return got[0]
}

// id reads the ID: N of a line matched by re's first group and checks that the line's
// instance attribute is the same number.
func id(t *testing.T, l logLine, re *regexp.Regexp) int {
	t.Helper()
	n, err := strconv.Atoi(re.FindStringSubmatch(l.msg())[1])
	if err != nil {
		t.Fatal(err)
	}
	if inst, _ := l.fields["instance"].(float64); int(inst) != n {
		t.Fatalf("line %q: instance attribute %v, want %d", l.msg(), l.fields["instance"], n)
	}
	return n
}

// TestLifecycleLinesInIggysWords runs `ferry run --embedded` with [logging] format =
// "json" and checks the lifecycle lines operators' alerts written for Iggy's runtime match
// on, word for word at upstream's level: a connector disabled, a sink whose plugin is
// missing (at start and at its automatic restart), a sink whose library does not load,
// sources and sinks initialized and
// started, a restart through the API (closing the old instance, initializing the new one,
// restarted successfully), the stop signal and the shutdown. Every line of the output is
// a JSON object with time, level and msg but the exit error, and the run exits 1 because
// a connector is in error. Before, none of upstream's lines was written but the plugin
// path error inside Ferry's own "sink not started" line.
func TestLifecycleLinesInIggysWords(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.jsonl")
	apiAddr := freeAddr(t)
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("s", "t", 10, 0, 5))
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("s", "t", "after_consuming", out, 5, 1000))
	writeFile(t, filepath.Join(conns, "missing.toml"), `type = "sink"
key = "missing"
enabled = true
version = 0
name = "missing sink"
path = "no_such_plugin"

[[streams]]
stream = "s"
topics = ["t"]
schema = "text"

[restart]
max_restarts = 1
initial_backoff = "10ms"
max_backoff = "10ms"
`)
	writeFile(t, filepath.Join(conns, "bogus.so"), "not a shared library\n")
	writeFile(t, filepath.Join(conns, "bogus.toml"), strings.Replace(strings.Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "bogus.jsonl"), 5, 1000),
		`key = "out"`, `key = "bogus"`, 1), "name = \"file out\"\npath = \"builtin:file\"", fmt.Sprintf("name = \"bogus sink\"\npath = %q", filepath.Join(conns, "bogus.so")), 1))
	writeFile(t, filepath.Join(conns, "off.toml"), strings.Replace(strings.Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "off.jsonl"), 5, 1000),
		`key = "out"`, `key = "off"`, 1), "enabled = true\nversion = 0\nname = \"file out\"", "enabled = false\nversion = 0\nname = \"off sink\"", 1))
	cfg := runtimeConfigTail(t, dir, conns, fmt.Sprintf(`[http]
enabled = true
address = %q
api_key = %q

[logging]
format = "json"
`, apiAddr, apiKey))

	p := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--embedded", "--progress", "0", "--status=false")
	has := func(s string) func() bool {
		return func() bool {
			if p.exited() {
				t.Fatalf("run exited: %v", p.err)
			}
			return strings.Contains(p.out.String(), s)
		}
	}
	testkit.WaitFor(t, "the file sink's 10 lines", func() bool { return countLines(out) == 10 })
	testkit.WaitFor(t, "the missing and bogus sinks given up", func() bool {
		return has("")() && strings.Count(p.out.String(), "sink failed for good") == 2
	})
	testkit.WaitFor(t, "the source's end", has("Closed source connector with ID: "))

	api := apiClient{t: t, base: "http://" + apiAddr, key: apiKey}
	if code, b := api.do(http.MethodPost, "/sinks/out/restart", ""); code != http.StatusNoContent {
		t.Fatalf("restart: %d %s", code, b)
	}
	testkit.WaitFor(t, "the restart's success line", has("Sink connector: out restarted successfully."))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("run did not exit within 60 s of SIGTERM")
	}
	if c := p.exitCode(); c != 1 {
		t.Fatalf("exit status %d, want 1 (a connector in error at the stop)", c)
	}

	lines, plain := jsonLogLines(t, p.out.String())
	if len(plain) != 1 || !strings.HasPrefix(plain[0], "ferry: connectors in error: sink bogus: Failed to load sink container from ") ||
		!strings.Contains(plain[0], "; sink missing: Failed to resolve plugin path: Plugin library not found") {
		t.Fatalf("lines that are not JSON: %q, want only the exit error naming both sinks", plain)
	}

	one(t, lines, "WARN", regexp.MustCompile(`^Sink: off sink is disabled \(off\)$`))
	if got := find(lines, regexp.MustCompile(`^Sink: missing sink \(missing\) - Failed to resolve plugin path: Plugin library not found`)); len(got) != 2 ||
		got[0].level() != "ERROR" || got[1].level() != "ERROR" {
		t.Fatalf("want two ERROR lines for the missing plugin (its start and its one automatic restart), got %v", got)
	}
	one(t, lines, "INFO", regexp.MustCompile(`^Restarting sink connector: missing$`))
	real, err := filepath.EvalSymlinks(filepath.Join(conns, "bogus.so")) // the path as the loader resolved it
	if err != nil {
		t.Fatal(err)
	}
	one(t, lines, "ERROR", regexp.MustCompile(`^Sink: bogus sink \(bogus\) - Failed to load sink container from `+regexp.QuoteMeta(real)+`: `))
	if got := find(lines, regexp.MustCompile(`^Sink connector: missing restarted`)); len(got) != 0 {
		t.Fatalf("a failed restart said it succeeded: %v", got)
	}

	srcInit := regexp.MustCompile(`^Source container with name: generator \(gen\) initialized successfully with ID: (\d+)\.$`)
	src := id(t, one(t, lines, "INFO", srcInit), srcInit)
	for _, s := range []string{"Source connector with ID: %d started.", "Source connector with ID: %d stopped.",
		"Closing source connector with ID: %d for plugin: gen", "Closed source connector with ID: %d for plugin: gen"} {
		one(t, lines, "INFO", regexp.MustCompile("^"+regexp.QuoteMeta(fmt.Sprintf(s, src))+"$"))
	}

	sinkInit := regexp.MustCompile(`^Sink container with name: file out \(out\) initialized successfully with ID: (\d+)\.$`)
	inits := find(lines, sinkInit)
	if len(inits) != 2 || inits[0].level() != "INFO" || inits[0].fields["sink"] != "out" {
		t.Fatalf("want two INFO initialized lines of sink out (its start and its restart), got %v", inits)
	}
	first, second := id(t, inits[0], sinkInit), id(t, inits[1], sinkInit)
	if first == second {
		t.Fatalf("the restarted sink kept its ID %d", first)
	}
	line := func(s string, args ...any) logLine {
		return one(t, lines, "INFO", regexp.MustCompile("^"+regexp.QuoteMeta(fmt.Sprintf(s, args...))+"$"))
	}
	spawned := line("All sources and sinks spawned.")
	restarting := line("Restarting sink connector: out")
	closed1 := line("Closed sink connector with ID: %d for plugin: out", first)
	restarted := line("Sink connector: out restarted successfully.")
	line("Started consuming messages for sink connector with ID: %d", first)
	line("Started consuming messages for sink connector with ID: %d", second)
	line("Stopped consuming messages for sink connector with ID: %d", first)
	line("Closing sink connector with ID: %d for plugin: out", second)
	closed2 := line("Closed sink connector with ID: %d for plugin: out", second)
	sig := line("Received SIGTERM. Shutting down connectors runtime...")
	done := line("All connectors closed. Runtime shutdown complete.")
	order := []logLine{inits[0], spawned, restarting, closed1, inits[1], restarted, sig, closed2, done}
	for i := 1; i < len(order); i++ {
		if order[i-1].n >= order[i].n {
			t.Fatalf("%q (line %d) does not come before %q (line %d)", order[i-1].msg(), order[i-1].n+1, order[i].msg(), order[i].n+1)
		}
	}
}
