package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Parameters of the benchmark tests: the random source writes benchMessages in batches of
// benchBatch; the file sink polls batches of at most benchBatch.
const (
	benchMessages = 20
	benchBatch    = 5
	benchTarget   = "iggy_connectors::benchmark"
)

// benchRun runs `ferry run --embedded` over a random source and a file sink with JSON logs
// until idle, with benchmark = on in both files and env added to the environment, and
// returns the JSON log lines (each decoded; the lines that are not JSON, the progress and
// status lines, are left out) and the whole output.
func benchRun(t *testing.T, on bool, env []string) ([]map[string]any, string) {
	t.Helper()
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	flag := fmt.Sprintf("benchmark = %t\n", on)
	writeFile(t, filepath.Join(conns, "source.toml"),
		strings.Replace(randomSource("s", "t", benchMessages, 0, benchBatch), "path = ", flag+"path = ", 1))
	writeFile(t, filepath.Join(conns, "sink.toml"),
		strings.Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "out.jsonl"), benchBatch, 1000), "path = ", flag+"path = ", 1))
	cfg := runtimeConfig(t, dir, conns)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n[logging]\nformat = \"json\"\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := startFerry(t, "run", dir, env, "run", "--config", cfg, "--embedded", "--progress", "0", "--exit-when-idle", "1s")
	p.wait(60 * time.Second)
	if n := countLines(filepath.Join(dir, "out.jsonl")); n != benchMessages {
		t.Fatalf("the file sink wrote %d lines, want %d", n, benchMessages)
	}
	out := p.out.String()
	var lines []map[string]any
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		d := json.NewDecoder(bytes.NewReader([]byte(l)))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("log line is not JSON: %v: %q", err, l)
		}
		lines = append(lines, m)
	}
	if len(lines) == 0 {
		t.Fatalf("no JSON log lines in the output")
	}
	return lines, out
}

// benchEvents returns the benchmark events of kind among lines.
func benchEvents(lines []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["target"] == benchTarget && l["msg"] == "benchmark" && l["connector_type"] == kind {
			out = append(out, l)
		}
	}
	return out
}

// num reads a JSON number field as an integer; a missing or non-number field fails the test.
func num(t *testing.T, ev map[string]any, field string) int64 {
	t.Helper()
	n, ok := ev[field].(json.Number)
	if !ok {
		t.Fatalf("field %s is %T (%v), want a JSON number: %v", field, ev[field], ev[field], ev)
	}
	v, err := n.Int64()
	if err != nil || v < 0 {
		t.Fatalf("field %s = %s, want a non-negative integer: %v", field, n, ev)
	}
	return v
}

// checkBenchEvents checks the events of one run: every field of Iggy's events, typed; the
// batch sizes add up to what was sent; the stage times fit in the total.
func checkBenchEvents(t *testing.T, lines []map[string]any, out string) {
	t.Helper()
	sinks, sources := benchEvents(lines, "sink"), benchEvents(lines, "source")
	sinkFields := []string{"time", "level", "msg", "target", "connector_type", "connector_key", "stream", "topic", "partition_id",
		"current_offset", "batch_size", "processed_count", "decode_us", "prepare_us", "ffi_us", "total_us"}
	var polled int64
	for _, ev := range sinks {
		if len(ev) != len(sinkFields) {
			t.Fatalf("sink event has %d fields, want exactly %v: %v", len(ev), sinkFields, ev)
		}
		if ev["level"] != "INFO" || ev["connector_key"] != "out" || ev["stream"] != "s" || ev["topic"] != "t" {
			t.Fatalf("sink event %v: want level INFO, connector_key out, stream s, topic t", ev)
		}
		size := num(t, ev, "batch_size")
		if size < 1 || size > benchBatch || num(t, ev, "processed_count") != size || num(t, ev, "partition_id") != 0 {
			t.Fatalf("sink event %v: want 1..%d messages all processed, partition 0", ev, benchBatch)
		}
		if num(t, ev, "decode_us") != 0 {
			t.Fatalf("sink event %v: decode_us is 0 (decode is timed inside prepare)", ev)
		}
		if p, f, tot := num(t, ev, "prepare_us"), num(t, ev, "ffi_us"), num(t, ev, "total_us"); p+f > tot {
			t.Fatalf("sink event %v: prepare_us + ffi_us > total_us", ev)
		}
		// The partition's offset when polled: at least the batch's last, at most the last sent.
		if cur := num(t, ev, "current_offset"); cur < polled+size-1 || cur > benchMessages-1 {
			t.Fatalf("sink event %v: current_offset outside %d..%d", ev, polled+size-1, benchMessages-1)
		}
		polled += size
	}
	if polled != benchMessages {
		t.Fatalf("sink events cover %d messages (%d events), want %d", polled, len(sinks), benchMessages)
	}
	sourceFields := []string{"time", "level", "msg", "target", "connector_type", "connector_key", "stream", "topic", "batch_size",
		"sent_count", "decode_us", "prepare_us", "iggy_send_us", "state_saved", "state_save_us", "total_us"}
	if len(sources) != benchMessages/benchBatch {
		t.Fatalf("%d source events, want %d (one per batch of %d)", len(sources), benchMessages/benchBatch, benchBatch)
	}
	for _, ev := range sources {
		if len(ev) != len(sourceFields) {
			t.Fatalf("source event has %d fields, want exactly %v: %v", len(ev), sourceFields, ev)
		}
		if ev["connector_key"] != "gen" || ev["stream"] != "s" || ev["topic"] != "t" || ev["state_saved"] != true {
			t.Fatalf("source event %v: want connector_key gen, stream s, topic t, state_saved true", ev)
		}
		if num(t, ev, "batch_size") != benchBatch || num(t, ev, "sent_count") != benchBatch || num(t, ev, "decode_us") != 0 {
			t.Fatalf("source event %v: want batch_size = sent_count = %d, decode_us 0", ev, benchBatch)
		}
		sum := num(t, ev, "prepare_us") + num(t, ev, "iggy_send_us") + num(t, ev, "state_save_us")
		if sum > num(t, ev, "total_us") {
			t.Fatalf("source event %v: the stages add up to more than total_us", ev)
		}
	}
	for _, kind := range []string{"sink", "source"} {
		key := map[string]string{"sink": "out", "source": "gen"}[kind]
		found := false
		for _, l := range lines {
			msg, _ := l["msg"].(string)
			if strings.HasPrefix(msg, "Benchmark mode enabled for "+kind+" connector with ID: ") &&
				strings.HasSuffix(msg, ", key: "+key+". Per-batch events on target '"+benchTarget+"'.") && l["target"] == benchTarget {
				found = true
			}
		}
		if !found {
			t.Fatalf("no \"Benchmark mode enabled for %s connector\" line for %s in:\n%s", kind, key, out)
		}
	}
}

// TestBenchmarkEvents: benchmark = true in a connector file makes `ferry run` write one
// event per batch on the log target iggy_connectors::benchmark, with Iggy's fields as JSON
// numbers and booleans under [logging] format = "json", and the "Benchmark mode enabled"
// line at start. Before, the flag was parsed and ignored: no event at all.
func TestBenchmarkEvents(t *testing.T) {
	lines, out := benchRun(t, true, nil)
	checkBenchEvents(t, lines, out)
}

// TestBenchmarkEnvOverride: IGGY_CONNECTORS_SINK_<KEY>_BENCHMARK and
// IGGY_CONNECTORS_SOURCE_<KEY>_BENCHMARK turn the events on over a file that says false.
func TestBenchmarkEnvOverride(t *testing.T) {
	lines, out := benchRun(t, false, []string{"IGGY_CONNECTORS_SINK_OUT_BENCHMARK=true", "IGGY_CONNECTORS_SOURCE_GEN_BENCHMARK=true"})
	checkBenchEvents(t, lines, out)
}

// TestBenchmarkOff: without benchmark = true there is no event and no "Benchmark mode
// enabled" line (the run itself logs, so the absence means something).
func TestBenchmarkOff(t *testing.T) {
	lines, out := benchRun(t, false, nil)
	for _, l := range lines {
		if l["target"] != nil {
			t.Fatalf("a line with a target with benchmark = false: %v", l)
		}
	}
	if strings.Contains(out, "Benchmark mode enabled") || strings.Contains(out, benchTarget) {
		t.Fatalf("benchmark output with benchmark = false:\n%s", out)
	}
	if len(lines) < 5 {
		t.Fatalf("only %d log lines: the run logged too little for the absence of events to mean anything", len(lines))
	}
}
