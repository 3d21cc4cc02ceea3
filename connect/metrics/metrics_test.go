package metrics

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/internal/promtooltest"
)

// promAccept is the Accept header of Prometheus' scrapes.
const promAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// serve serves one request to h with the given Accept header (Prometheus' when "") and
// returns the body; it fails unless the answer is 200 in OpenMetrics 1.0.0.
func serve(t testing.TB, h http.Handler, accept string) string {
	t.Helper()
	if accept == "" {
		accept = promAccept
	}
	return serveAs(t, h, accept, ContentType)
}

// serveAs serves one request to h with the given Accept header ("" = none) and returns
// the body; it fails unless the answer is 200 with content type ct.
func serveAs(t testing.TB, h http.Handler, accept, ct string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	if got := res.Header.Get("Content-Type"); got != ct {
		t.Fatalf("Accept %q: Content-Type %q, want %q", accept, got, ct)
	}
	return string(body)
}

// ours keeps the lines of Iggy's and Ferry's families (comments included), dropping the
// go_* and process_* ones.
func ours(body string) string {
	var b strings.Builder
	for line := range strings.SplitAfterSeq(body, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "iggy_") || strings.HasPrefix(name, "ferry_") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// TestScrapeFixedStatus scrapes fixed statuses (fixture: a running sink with two
// partitions, a stopped source, a failed sink) and compares every line of Iggy's and
// Ferry's families with testdata/fixture.om: names, HELP and TYPE lines, label sets,
// values, histogram buckets (cumulative, the overflow bucket only in +Inf).
func TestScrapeFixedStatus(t *testing.T) {
	want, err := os.ReadFile("testdata/fixture.om")
	if err != nil {
		t.Fatal(err)
	}
	body := serve(t, Handler(fixture()), "")
	if got := ours(body); got != string(want) {
		t.Errorf("scrape differs from testdata/fixture.om:\n%s", lineDiff(string(want), got))
	}
	// The lines the brief and Iggy's reference name, spelled out here too.
	for _, line := range []string{
		"# HELP iggy_connector_messages_consumed Messages a sink connector polled from Iggy.",
		"# TYPE iggy_connector_messages_consumed counter",
		`iggy_connector_messages_consumed_total{connector_key="s1",connector_type="sink"} 42`,
		`iggy_connector_messages_processed_total{connector_key="s1",connector_type="sink"} 40`,
		`iggy_connector_messages_produced_total{connector_key="gen",connector_type="source"} 100`,
		`iggy_connector_messages_sent_total{connector_key="gen",connector_type="source"} 90`,
		`iggy_connector_messages_filtered_total{connector_key="s1",connector_type="sink"} 8`,
		`iggy_connector_errors_total{connector_key="s1",connector_type="sink"} 11`,   // 3 consume + 2 store + 1 batch + 3 decode + 2 transform
		`iggy_connector_errors_total{connector_key="gen",connector_type="source"} 3`, // 2 send + 1 state save
		"# TYPE iggy_connectors_sinks_total gauge",
		"iggy_connectors_sinks_total 3",
		"iggy_connectors_sinks_running 1",
		"iggy_connectors_sources_total 2",
		"iggy_connectors_sources_running 0",
		"# TYPE iggy_connector_stage_duration_seconds histogram",
		`iggy_connector_stage_duration_seconds_bucket{connector_key="s1",connector_type="sink",stage="ffi",le="5e-05"} 0`,
		`iggy_connector_stage_duration_seconds_bucket{connector_key="s1",connector_type="sink",stage="ffi",le="0.0001"} 1`,
		`iggy_connector_stage_duration_seconds_bucket{connector_key="s1",connector_type="sink",stage="ffi",le="0.001"} 3`,
		`iggy_connector_stage_duration_seconds_bucket{connector_key="s1",connector_type="sink",stage="ffi",le="5.0"} 3`,
		`iggy_connector_stage_duration_seconds_bucket{connector_key="s1",connector_type="sink",stage="ffi",le="+Inf"} 3`,
		`iggy_connector_stage_duration_seconds_sum{connector_key="s1",connector_type="sink",stage="ffi"} 0.003`,
		`iggy_connector_stage_duration_seconds_count{connector_key="s1",connector_type="sink",stage="ffi"} 3`,
		`iggy_connector_stage_duration_seconds_bucket{connector_key="s1",connector_type="sink",stage="total",le="5.0"} 0`,
		`iggy_connector_stage_duration_seconds_bucket{connector_key="s1",connector_type="sink",stage="total",le="+Inf"} 1`,
		`ferry_sink_commits_total{connector_key="s1",result="unknown_partition"} 14`,
		`ferry_sink_stored_offset{connector_key="s1",partition="0",stream="st",topic="tp"} 29`,
		`ferry_sink_current_offset{connector_key="s1",partition="0",stream="st",topic="tp"} 99`,
		`ferry_sink_lag{connector_key="s1",partition="0",stream="st",topic="tp"} 70`,
		`ferry_sink_uncommitted_messages{connector_key="s1",partition="1",stream="st",topic="tp"} 1`,
		`ferry_sink_store_latency_seconds_bucket{connector_key="s1",le="10.0"} 3`,
		`ferry_sink_store_latency_seconds_bucket{connector_key="s1",le="+Inf"} 4`,
		`ferry_sink_store_latency_seconds_sum{connector_key="s1"} 1.5`,
		`ferry_connector_up{connector_key="s1",connector_type="sink"} 1`,
		`ferry_connector_up{connector_key="s2",connector_type="sink"} 0`,
		`ferry_connector_status{connector_key="s2",connector_type="sink",status="error"} 1`,
		`ferry_connector_restarts_total{connector_key="s1",connector_type="sink"} 2`,
	} {
		if !slices.Contains(strings.Split(body, "\n"), line) {
			t.Errorf("missing line %s", line)
		}
	}
	// Partition 1 has nothing stored and no current offset: no series of those gauges.
	for _, prefix := range []string{"ferry_sink_stored_offset{", "ferry_sink_current_offset{", "ferry_sink_lag{"} {
		if strings.Contains(body, prefix+`connector_key="s1",partition="1"`) {
			t.Errorf("%s has a series for partition 1", prefix)
		}
	}
	// A source has no consumed/processed series, a sink no produced/sent ones.
	for _, bad := range []string{`consumed_total{connector_key="gen"`, `processed_total{connector_key="gen"`,
		`produced_total{connector_key="s1"`, `sent_total{connector_key="s2"`, `ferry_sink_commits_total{connector_key="gen"`} {
		if strings.Contains(body, bad) {
			t.Errorf("unexpected series %s", bad)
		}
	}
}

// TestScrapeFormat checks the whole exposition, the go_* and process_* families
// included, in both formats: OpenMetrics 1.0.0 to a scrape whose Accept header names it
// (Prometheus' does), one "# EOF" as the last line, counter families named without
// _total and their samples with it once; the Prometheus text format 0.0.4 to any other
// request (curl, promtool), no "# EOF", counter families named with _total, Iggy's two
// _total gauges untyped. Both: a HELP line with text before every TYPE line.
func TestScrapeFormat(t *testing.T) {
	h := Handler(fixture())
	for _, c := range []struct {
		accept string
		om     bool
	}{
		{promAccept, true},
		{"application/openmetrics-text;version=0.0.1", true},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", true},
		{"", false},
		{"*/*", false},
		{"text/plain;version=0.0.4", false},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", false},
		{"application/openmetrics-text;q=0, text/plain", false},
	} {
		ct := TextContentType
		if c.om {
			ct = ContentType
		}
		body := serveAs(t, h, c.accept, ct)
		if eof := strings.HasSuffix(body, "\n# EOF\n") && strings.Count(body, "# EOF") == 1; eof != c.om {
			t.Errorf("Accept %q: ends with one # EOF line %t, want %t: ...%s", c.accept, eof, c.om, body[max(0, len(body)-80):])
		}
		if strings.Contains(body, "_total_total") {
			t.Errorf("Accept %q: a doubled _total suffix", c.accept)
		}
		lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
		families := 0
		names := map[string]bool{}
		for i, line := range lines {
			name, kind, ok := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			if !ok || !strings.HasPrefix(line, "# TYPE ") {
				continue
			}
			families++
			if names[name] {
				t.Errorf("Accept %q: family %s given twice", c.accept, name)
			}
			names[name] = true
			if i == 0 || !strings.HasPrefix(lines[i-1], "# HELP "+name+" ") || len(lines[i-1]) <= len("# HELP "+name+" ") {
				t.Errorf("Accept %q: family %s has no HELP text", c.accept, name)
			}
			switch {
			case kind == "counter" && c.om && (strings.HasSuffix(name, "_total") ||
				!slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, name+"_total") })):
				t.Errorf("Accept %q: counter %s is not exposed as %s_total", c.accept, name, name)
			case kind == "counter" && !c.om && !strings.HasSuffix(name, "_total"):
				t.Errorf("Accept %q: counter family %s is not named with _total", c.accept, name)
			case kind != "counter" && kind != "untyped" && !c.om && strings.HasSuffix(name, "_total"):
				t.Errorf("Accept %q: %s %s is named as a counter", c.accept, kind, name)
			}
		}
		for _, g := range []string{"iggy_connectors_sinks_total", "iggy_connectors_sources_total"} {
			want := "# TYPE " + g + " untyped"
			if c.om {
				want = "# TYPE " + g + " gauge"
			}
			if !slices.Contains(lines, want) {
				t.Errorf("Accept %q: no line %q", c.accept, want)
			}
		}
		// 29 of ours; the Go and process collectors add theirs.
		if families < 29+10 {
			t.Errorf("Accept %q: %d families", c.accept, families)
		}
	}
}

// TestPromtoolAcceptsTheScrape: Prometheus' own linter finds nothing to say about the
// exposition a plain request gets (`curl …/metrics | promtool check metrics`). Before,
// every counter family lacked HELP text in its eyes (OpenMetrics names the family
// without _total) and Iggy's two _total gauges were refused.
func TestPromtoolAcceptsTheScrape(t *testing.T) {
	promtooltest.Check(t, []byte(serveAs(t, Handler(fixture()), "", TextContentType)))
}

// TestScrapeDuplicatePartition: a partition listed twice in a status (two tables over
// the same topic; it should not happen) is exposed once instead of failing the family.
func TestScrapeDuplicatePartition(t *testing.T) {
	p := connect.PartitionStatus{Stream: "st", Topic: "tp", Partition: 3, Stored: 7, Current: 9, Lag: 2, Uncommitted: 4}
	src := fixedSource{sinks: 1, sts: []connect.Status{{Key: "k", Kind: connect.KindSink, State: connect.StateRunning,
		Partitions: []connect.PartitionStatus{p, p}}}}
	body := serve(t, Handler(src), "")
	for _, line := range []string{
		`ferry_sink_stored_offset{connector_key="k",partition="3",stream="st",topic="tp"} 7`,
		`ferry_sink_current_offset{connector_key="k",partition="3",stream="st",topic="tp"} 9`,
		`ferry_sink_lag{connector_key="k",partition="3",stream="st",topic="tp"} 2`,
		`ferry_sink_uncommitted_messages{connector_key="k",partition="3",stream="st",topic="tp"} 4`,
		`ferry_sink_pending_messages{connector_key="k",partition="3",stream="st",topic="tp"} 0`,
	} {
		if n := strings.Count(body, line+"\n"); n != 1 {
			t.Errorf("%d × %s", n, line)
		}
	}
}

// TestScrapeEmpty: a runtime without connectors exposes the four gauges at 0 and no
// connector series.
func TestScrapeEmpty(t *testing.T) {
	got := ours(serve(t, Handler(fixedSource{}), ""))
	want := `# HELP iggy_connectors_sinks_running Sink connectors in state running.
# TYPE iggy_connectors_sinks_running gauge
iggy_connectors_sinks_running 0
# HELP iggy_connectors_sinks_total Sink connectors configured, disabled ones included.
# TYPE iggy_connectors_sinks_total gauge
iggy_connectors_sinks_total 0
# HELP iggy_connectors_sources_running Source connectors in state running.
# TYPE iggy_connectors_sources_running gauge
iggy_connectors_sources_running 0
# HELP iggy_connectors_sources_total Source connectors configured, disabled ones included.
# TYPE iggy_connectors_sources_total gauge
iggy_connectors_sources_total 0
`
	if got != want {
		t.Errorf("got:\n%s", lineDiff(want, got))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order or count)\n" + got
	}
	return b.String()
}

// TestCollectorMatchesHandler: NewCollector on a pedantic registry, encoded by
// client_golang's OpenMetrics encoder, exposes the same families and samples as Handler
// (which writes them as text itself): same HELP and TYPE lines, same series, same
// values (the encoder writes "42.0" where Handler writes "42").
func TestCollectorMatchesHandler(t *testing.T) {
	for name, src := range map[string]fixedSource{"fixture": fixture(), "bench": benchSource(2, 3), "empty": {}} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(NewCollector(src))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("%s: gather: %v", name, err)
		}
		var b bytes.Buffer
		enc := expfmt.NewEncoder(&b, expfmt.FmtOpenMetrics_1_0_0)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
		wantComments, wantSamples := parseExposition(t, b.String())
		gotComments, gotSamples := parseExposition(t, ours(serve(t, Handler(src), "")))
		if !slices.Equal(wantComments, gotComments) {
			t.Errorf("%s: comments differ:\n%s", name, lineDiff(strings.Join(wantComments, "\n"), strings.Join(gotComments, "\n")))
		}
		if !maps.Equal(wantSamples, gotSamples) {
			t.Errorf("%s: samples differ:\nregistry %v\nhandler  %v", name, wantSamples, gotSamples)
		}
	}
}

// parseExposition returns the HELP and TYPE lines (sorted) and the samples (series →
// value) of an exposition; it fails on a series given twice.
func parseExposition(t *testing.T, body string) ([]string, map[string]float64) {
	t.Helper()
	var comments []string
	samples := map[string]float64{}
	for line := range strings.SplitSeq(strings.TrimSuffix(body, "\n"), "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			comments = append(comments, line)
		default:
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("sample %q: %v", line, err)
			}
			if _, dup := samples[line[:i]]; dup {
				t.Fatalf("series %s given twice", line[:i])
			}
			samples[line[:i]] = v
		}
	}
	slices.Sort(comments)
	return comments, samples
}

// TestFamilies checks the family table: Iggy's names as its reference lists them, a
// counter's name ends in _total and no other's does but Iggy's *_total gauges, HELP
// texts need no escaping.
func TestFamilies(t *testing.T) {
	iggy := map[string]kind{
		"iggy_connectors_sources_total": kindGauge, "iggy_connectors_sources_running": kindGauge,
		"iggy_connectors_sinks_total": kindGauge, "iggy_connectors_sinks_running": kindGauge,
		"iggy_connector_messages_produced_total": kindCounter, "iggy_connector_messages_sent_total": kindCounter,
		"iggy_connector_messages_consumed_total": kindCounter, "iggy_connector_messages_processed_total": kindCounter,
		"iggy_connector_messages_filtered_total": kindCounter, "iggy_connector_errors_total": kindCounter,
		"iggy_connector_stage_duration_seconds": kindHistogram,
	}
	seen := map[string]bool{}
	for _, f := range families {
		if seen[f.name] {
			t.Errorf("%s twice", f.name)
		}
		seen[f.name] = true
		if want, ok := iggy[f.name]; ok {
			if f.kind != want {
				t.Errorf("%s: kind %d, want %d", f.name, f.kind, want)
			}
			delete(iggy, f.name)
		} else if !strings.HasPrefix(f.name, "ferry_") {
			t.Errorf("%s: neither Iggy's nor ferry_", f.name)
		} else if (f.kind == kindCounter) != strings.HasSuffix(f.name, "_total") {
			t.Errorf("%s: kind %d", f.name, f.kind)
		}
		if f.help == "" || strings.ContainsAny(f.help, "\\\n") {
			t.Errorf("%s: HELP %q", f.name, f.help)
		}
		if !slices.IsSorted(f.labels) {
			t.Errorf("%s: labels %v not sorted", f.name, f.labels)
		}
	}
	if len(iggy) > 0 {
		t.Errorf("missing Iggy families %v", iggy)
	}
	if want := []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
		250 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second}; !slices.Equal(connect.StageBounds, want) {
		t.Errorf("StageBounds %v, want Iggy's %v", connect.StageBounds, want)
	}
}

// TestScrapeExactValues: counters above 2^53 are written exactly (a float would round
// them), and label values are escaped.
func TestScrapeExactValues(t *testing.T) {
	big := uint64(1)<<60 + 1
	src := fixedSource{sinks: 1, sts: []connect.Status{{Key: "a\"b\\c\nd", Kind: connect.KindSink, State: connect.StateRunning,
		Stats: connect.Stats{Polled: big, Delivered: 1_000_000}}}}
	body := serve(t, Handler(src), "")
	for _, line := range []string{
		`iggy_connector_messages_consumed_total{connector_key="a\"b\\c\nd",connector_type="sink"} 1152921504606846977`,
		`iggy_connector_messages_processed_total{connector_key="a\"b\\c\nd",connector_type="sink"} 1000000`,
	} {
		if !slices.Contains(strings.Split(body, "\n"), line) {
			t.Errorf("missing line %s", line)
		}
	}
}
