package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/promtooltest"
	"github.com/ferryio/ferry/internal/testkit"
)

// lostSink is a sink whose native plugin does not exist: it never starts, and waits in
// error for its next restart for the whole run. It consumes the same topic as "out".
const lostSink = `type = "sink"
key = "lost"
enabled = true
version = 0
name = "plugin not found"
path = "/nonexistent/libferry_lost_sink.so"

[[streams]]
stream = "lag"
topics = ["t"]
schema = "text"
`

// scrape is one metrics exposition in the Prometheus text format: every sample by its
// series ("name{labels}"), and the series of every counter and histogram family.
type scrape struct {
	values  map[string]float64
	growing []string // samples that may only grow: counters, histogram buckets, sums, counts
}

func parseScrape(t *testing.T, body string) scrape {
	t.Helper()
	s := scrape{values: map[string]float64{}}
	growing := map[string]bool{} // family names
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			growing[name] = typ == "counter" || typ == "histogram"
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		series := line[:i]
		s.values[series] = v
		name, _, _ := strings.Cut(series, "{")
		fam := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && growing[base] {
				fam = base
			}
		}
		if growing[fam] {
			s.growing = append(s.growing, series)
		}
	}
	return s
}

// TestLagOnEverySurface runs a real `ferry run` against a real `ferry server` with two
// sinks on one topic: "out" (file sink) and "lost", whose plugin is missing, so it never
// starts and waits in error for its next restart. It checks that lag is Iggy's current
// offset minus the group's stored offset on every surface, for both:
//
//   - "out" paused with lagN new messages: /sinks/out/status, /sinks/out/offsets, the
//     metrics and `ferry status` say lag lagN (before, status and metrics said 0: they
//     showed the offsets of the last batch polled);
//   - "lost" with every message waiting: lag = all of them, a partition "not_owned",
//     and its errors counter counts the failed starts (before: "no partitions", no lag
//     series, errors 0);
//   - a restart through the API: every counter of a scrape after it is at least what it
//     was before (before, the sink's counters went back to 0), the lag, stored and
//     current offset series are all still there, and promtool accepts the scrape;
//   - the exit summary counts the messages of every instance (before: polled=0
//     delivered=0 after a restart with nothing new).
func TestLagOnEverySurface(t *testing.T) {
	const first, lagN = 100, 10
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.jsonl")
	iggyAddr, apiAddr := freeAddr(t), freeAddr(t)
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("lag", "t", "after_consuming", out, 100, 100000))
	writeFile(t, filepath.Join(conns, "lost.toml"), lostSink)
	startFerry(t, "server", dir, nil, "server", "--addr", iggyAddr, "--data", filepath.Join(dir, "data"))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var admin *iggy.Client
	testkit.WaitFor(t, "the server", func() bool {
		c, err := iggy.Dial(ctx, iggyAddr, iggy.WithCredentials("iggy", "iggy"))
		admin = c
		return err == nil
	})
	defer admin.Close()
	if err := admin.EnsureTopic(ctx, "lag", "t", 1); err != nil {
		t.Fatal(err)
	}
	send := func(from, n int) {
		t.Helper()
		msgs := make([]iggy.Message, n)
		for i := range msgs {
			msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "m%d", from+i)}
		}
		if _, err := admin.SendMessages(ctx, iggy.Name("lag"), iggy.Name("t"), wire.ToPartition(0), msgs); err != nil {
			t.Fatal(err)
		}
	}

	p := startFerry(t, "run", dir, nil, "run", "--config", apiRuntimeConfig(t, dir, conns, iggyAddr, apiAddr), "--progress", "0")
	api := apiClient{t: t, base: "http://" + apiAddr, key: apiKey}
	offsetsOf := func(key string) offsetJSON {
		t.Helper()
		var o []offsetJSON
		api.getJSON("/sinks/"+key+"/offsets", &o)
		if len(o) != 1 {
			t.Fatalf("offsets of %s %+v, want one partition", key, o)
		}
		return o[0]
	}
	testkit.WaitFor(t, "the API", func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		code, _, err := api.try(http.MethodGet, "/sinks/out/offsets", "")
		return err == nil && code == http.StatusOK
	})
	send(0, first)
	testkit.WaitFor(t, "out stored the first messages", func() bool {
		o := offsetsOf("out")
		return o.Stored != nil && *o.Stored == first-1 && o.Lag == 0
	})

	if code, b := api.do(http.MethodPost, "/sinks/out/pause", ""); code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", code, b)
	}
	send(first, lagN)
	last := int64(first + lagN - 1)
	// Offsets are read from Iggy at most once a second per topic: wait for a read made
	// after the send, then every surface must agree.
	testkit.WaitFor(t, "a read after the send", func() bool {
		o, l := offsetsOf("out"), offsetsOf("lost")
		return o.Current != nil && *o.Current == last && l.Current != nil && *l.Current == last
	})

	// The offsets route.
	if o := offsetsOf("out"); o.Stored == nil || *o.Stored != first-1 || o.Lag != lagN || !o.Owned {
		t.Fatalf("offsets of the paused sink: %+v, want stored %d, lag %d, owned", o, first-1, lagN)
	}
	if o := offsetsOf("lost"); o.Stored != nil || o.Lag != first+lagN || o.Owned {
		t.Fatalf("offsets of the sink in error: %+v, want nothing stored, lag %d, not owned", o, first+lagN)
	}

	// The status route (which the status page renders).
	type statusPartition struct {
		State   string `json:"state"`
		Current int64  `json:"current_offset"`
		Stored  int64  `json:"stored"`
		Lag     uint64 `json:"lag"`
		Paused  bool   `json:"paused"`
	}
	var st struct {
		Status     string            `json:"status"`
		Paused     bool              `json:"paused"`
		Partitions []statusPartition `json:"partitions"`
		Stats      struct {
			Errors uint64 `json:"errors"`
		} `json:"stats"`
	}
	api.getJSON("/sinks/out/status", &st)
	if want := (statusPartition{State: "owned", Current: last, Stored: first - 1, Lag: lagN, Paused: true}); !st.Paused ||
		len(st.Partitions) != 1 || st.Partitions[0] != want {
		t.Fatalf("status of the paused sink: %+v, want one partition %+v", st, want)
	}
	api.getJSON("/sinks/lost/status", &st)
	if want := (statusPartition{State: "not_owned", Current: last, Stored: -1, Lag: first + lagN}); st.Status != "error" ||
		len(st.Partitions) != 1 || st.Partitions[0] != want || st.Stats.Errors == 0 {
		t.Fatalf("status of the sink in error: %+v, want one partition %+v and errors counted", st, want)
	}

	// The metrics.
	series := func(name, key string) string {
		return name + `{connector_key="` + key + `",partition="0",stream="lag",topic="t"}`
	}
	metrics := func() scrape {
		t.Helper()
		code, b := api.do(http.MethodGet, "/metrics", "")
		if code != http.StatusOK {
			t.Fatalf("metrics: %d %s", code, b)
		}
		return parseScrape(t, string(b))
	}
	m := metrics()
	for s, want := range map[string]float64{
		series("ferry_sink_lag", "out"):             lagN,
		series("ferry_sink_current_offset", "out"):  float64(last),
		series("ferry_sink_stored_offset", "out"):   first - 1,
		series("ferry_sink_lag", "lost"):            first + lagN,
		series("ferry_sink_current_offset", "lost"): float64(last),
	} {
		if got, ok := m.values[s]; !ok || got != want {
			t.Errorf("metrics: %s = %v (present %t), want %v", s, got, ok, want)
		}
	}
	if _, ok := m.values[series("ferry_sink_stored_offset", "lost")]; ok {
		t.Error("metrics: a stored offset for the sink that never stored one")
	}
	if v := m.values[`iggy_connector_errors_total{connector_key="lost",connector_type="sink"}`]; v < 1 {
		t.Errorf("metrics: errors of the sink in error %v, want ≥ 1 (its failed starts)", v)
	}

	// `ferry status`, as an operator runs it.
	cmd := exec.Command(ferryBin, "status", "--url", api.base, "--api-key", apiKey)
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ferry status: %v\n%s", err, text)
	}
	for _, re := range []string{
		`(?m)^sink out: partitions\nSTREAM +TOPIC +PARTITION +STATE +CURRENT +STORED +LAG +UNCOMMITTED +PAUSED\nlag +t +0 +owned +109 +99 +10 +0 +yes$`,
		`(?m)^sink lost: partitions\nSTREAM +TOPIC +PARTITION +STATE +CURRENT +STORED +LAG +UNCOMMITTED +PAUSED\nlag +t +0 +not_owned +109 +- +110 +0 +no$`,
	} {
		if !regexp.MustCompile(re).Match(text) {
			t.Errorf("ferry status does not match %s:\n%s", re, text)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Resume, then restart "out" through the API: no counter goes back, no series goes.
	if code, b := api.do(http.MethodPost, "/sinks/out/resume", ""); code != http.StatusNoContent {
		t.Fatalf("resume: %d %s", code, b)
	}
	testkit.WaitFor(t, "out caught up after resume", func() bool {
		o := offsetsOf("out")
		return o.Stored != nil && *o.Stored == last && o.Lag == 0
	})
	before := metrics()
	var info struct {
		ID     uint32 `json:"id"`
		Status string `json:"status"`
	}
	api.getJSON("/sinks/out", &info)
	oldID := info.ID
	if code, b := api.do(http.MethodPost, "/sinks/out/restart", ""); code != http.StatusNoContent {
		t.Fatalf("restart: %d %s", code, b)
	}
	testkit.WaitFor(t, "out running again", func() bool {
		api.getJSON("/sinks/out", &info)
		return info.Status == "running" && info.ID != oldID
	})
	code, body := api.do(http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	after := parseScrape(t, string(body))
	for _, s := range before.growing {
		if v, ok := after.values[s]; !ok || v < before.values[s] {
			t.Errorf("after the restart %s = %v (present %t), before %v", s, v, ok, before.values[s])
		}
	}
	for _, s := range []string{series("ferry_sink_lag", "out"), series("ferry_sink_stored_offset", "out"),
		series("ferry_sink_current_offset", "out"), series("ferry_sink_lag", "lost")} {
		if _, ok := after.values[s]; !ok {
			t.Errorf("after the restart: no series %s", s)
		}
	}
	for s, want := range map[string]float64{
		`iggy_connector_messages_consumed_total{connector_key="out",connector_type="sink"}`:  first + lagN,
		`iggy_connector_messages_processed_total{connector_key="out",connector_type="sink"}`: first + lagN,
		series("ferry_sink_lag", "out"): 0,
	} {
		if after.values[s] != want {
			t.Errorf("after the restart %s = %v, want %v", s, after.values[s], want)
		}
	}
	promtooltest.Check(t, body)

	// The exit summary counts both instances ("lost" in error makes the exit status 1).
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("ferry run did not stop within 30 s")
	}
	summary := fmt.Sprintf("\nsink   out                      stopped  polled=%d delivered=%d committed=%d consume_errors=0\n",
		first+lagN, first+lagN, first+lagN)
	if !strings.Contains(p.out.String(), summary) {
		t.Fatalf("exit summary lacks %q:\n%s", summary, tail(p.out.String(), 20))
	}
}
