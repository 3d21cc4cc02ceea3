package metrics

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/internal/promtooltest"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

const runtimeMessages = 5000

// The connector files of TestScrapeRealRuntime: the built-in random source "gen" writes
// runtimeMessages messages to metrics/events and stops (end of input); the built-in null
// sink "out" consumes them (after_consuming, stores every 20 ms); "off" is a disabled
// sink, counted by iggy_connectors_sinks_total only.
var runtimeFiles = map[string]string{
	"gen.toml": `type = "source"
key = "gen"
enabled = true
version = 0
name = "generator"
path = "builtin:random"

[[streams]]
stream = "metrics"
topic = "events"
schema = "text"
batch_length = 100

[plugin_config]
count = 5000
payload_size = 32
batch_size = 100
seed = 7
`,
	"out.toml": `type = "sink"
key = "out"
enabled = true
version = 0
name = "null out"
path = "builtin:null"
offset_commit = "after_consuming"

[[streams]]
stream = "metrics"
topics = ["events"]
schema = "text"
batch_length = 100
poll_interval = "5ms"

[commit]
interval = "20ms"
`,
	"off.toml": `type = "sink"
key = "off"
enabled = false
version = 0
name = "disabled"
path = "builtin:null"

[[streams]]
stream = "metrics"
topics = ["events"]
schema = "text"
`,
}

// TestScrapeRealRuntime runs a real Runtime over the embedded server (built-in random
// source → built-in null sink, runtimeMessages messages), waits until the source ended
// its input and the sink stored its last offset, then scrapes Handler(rt): the message
// counters equal the message count exactly, and the gauges show the stopped source, the
// running sink and the disabled one; promtool finds nothing to say about the text format.
func TestScrapeRealRuntime(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("metrics", "events", 1) // the runtime creates no topic (ferry run --create-topics does)
	rt := runkit.StartFiles(t, kit.Dial(), runtimeFiles)
	testkit.WaitFor(t, "the source to end and the sink to store every message", func() bool {
		src, ok1 := rt.Connector(connect.KindSource, "gen")
		sink, ok2 := rt.Connector(connect.KindSink, "out")
		return ok1 && ok2 && src.State == connect.StateStopped && src.Stats.Sent == runtimeMessages &&
			sink.Stats.Committed == runtimeMessages
	})
	body := serve(t, Handler(rt), "")
	lines := strings.Split(body, "\n")
	for _, line := range []string{
		`iggy_connector_messages_produced_total{connector_key="gen",connector_type="source"} 5000`,
		`iggy_connector_messages_sent_total{connector_key="gen",connector_type="source"} 5000`,
		`iggy_connector_messages_consumed_total{connector_key="out",connector_type="sink"} 5000`,
		`iggy_connector_messages_processed_total{connector_key="out",connector_type="sink"} 5000`,
		`iggy_connector_messages_filtered_total{connector_key="gen",connector_type="source"} 0`,
		`iggy_connector_messages_filtered_total{connector_key="out",connector_type="sink"} 0`,
		`iggy_connector_errors_total{connector_key="gen",connector_type="source"} 0`,
		`iggy_connector_errors_total{connector_key="out",connector_type="sink"} 0`,
		"iggy_connectors_sources_total 1",
		"iggy_connectors_sources_running 0",
		"iggy_connectors_sinks_total 2",
		"iggy_connectors_sinks_running 1",
		`ferry_connector_up{connector_key="gen",connector_type="source"} 0`,
		`ferry_connector_up{connector_key="out",connector_type="sink"} 1`,
		`ferry_connector_status{connector_key="gen",connector_type="source",status="stopped"} 1`,
		`ferry_connector_status{connector_key="out",connector_type="sink",status="running"} 1`,
		`ferry_connector_dead_lettered_total{connector_key="out",connector_type="sink"} 0`,
		`ferry_connector_skipped_total{connector_key="out",connector_type="sink"} 0`,
		`ferry_sink_commits_total{connector_key="out",result="accepted"} 0`, // after_consuming: the runtime resolves
		`ferry_sink_commits_total{connector_key="out",result="stale"} 0`,
		`ferry_sink_offset_store_errors_total{connector_key="out"} 0`,
		`ferry_sink_revoked_partitions_total{connector_key="out"} 0`,
		`ferry_sink_stored_offset{connector_key="out",partition="0",stream="metrics",topic="events"} 4999`,
		`ferry_sink_current_offset{connector_key="out",partition="0",stream="metrics",topic="events"} 4999`,
		`ferry_sink_lag{connector_key="out",partition="0",stream="metrics",topic="events"} 0`,
		`ferry_sink_uncommitted_messages{connector_key="out",partition="0",stream="metrics",topic="events"} 0`,
		`ferry_sink_pending_messages{connector_key="out",partition="0",stream="metrics",topic="events"} 0`,
	} {
		if !slices.Contains(lines, line) {
			t.Errorf("missing line %s", line)
		}
	}
	// Each offset store is observed once by the store latency histogram.
	st, _ := rt.Connector(connect.KindSink, "out")
	if st.Stats.Stores == 0 {
		t.Fatal("no offset store counted")
	}
	for _, line := range []string{
		`ferry_sink_offset_stores_total{connector_key="out"} ` + itoa(st.Stats.Stores),
		`ferry_sink_store_latency_seconds_count{connector_key="out"} ` + itoa(st.Stats.StoreLatency.Count),
	} {
		if !slices.Contains(lines, line) {
			t.Errorf("missing line %s", line)
		}
	}
	if strings.Contains(body, `connector_key="off"`) {
		t.Error("the disabled sink has series")
	}
	if !strings.HasSuffix(body, "\n# EOF\n") {
		t.Error("no # EOF at the end")
	}
	// The same runtime scraped as curl does, linted by Prometheus' promtool.
	promtooltest.Check(t, []byte(serveAs(t, Handler(rt), "", TextContentType)))
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
