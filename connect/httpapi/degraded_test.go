package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestDegradedSinkReported: the topic of the sinks nsink and bare (s1/t1) is deleted. The
// API and the metrics say what is happening: /sinks and /sinks/nsink answer status
// "degraded" with the poll's TopicIdNotFound as last_error, /metrics has
// ferry_connector_status{status="degraded"} 1 and ferry_connector_up 0. Once the topic is
// created again both are "running" with no last_error, poll_errors and
// iggy_connector_errors_total hold the same count of failed polls (at least one), and
// topics_recreated and ferry_sink_topic_recreated_total are 1.
func TestDegradedSinkReported(t *testing.T) {
	e := newEnv(t)
	a := e.serve(func(o *Options) { o.HTTP.Metrics.Enabled = true })
	e.fill(5)
	testkit.WaitFor(t, "nsink polled", func() bool { return e.status("sink", "nsink").Stats.Polled == 5 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.admin.DeleteTopic(ctx, iggy.Name("s1"), iggy.Name("t1")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "nsink and bare degraded", func() bool {
		return e.status("sink", "nsink").State == connect.StateDegraded && e.status("sink", "bare").State == connect.StateDegraded
	})
	info := a.do("GET", "/sinks/nsink", "").want(t, http.StatusOK).object(t)
	le, _ := info["last_error"].(map[string]any)
	if info["status"] != "degraded" || le == nil || !strings.HasPrefix(fmt.Sprint(le["message"]), "poll s1/t1: ") ||
		!strings.Contains(fmt.Sprint(le["message"]), "TopicIdNotFound") {
		t.Fatalf("GET /sinks/nsink = %v", info)
	}
	list := a.do("GET", "/sinks", "").want(t, http.StatusOK).array(t)
	if i := slices.IndexFunc(list, func(m map[string]any) bool { return m["key"] == "bare" }); i < 0 || list[i]["status"] != "degraded" || list[i]["last_error"] == nil {
		t.Fatalf("GET /sinks = %v", list)
	}
	body := string(a.do("GET", "/metrics", "").want(t, http.StatusOK).body)
	for _, line := range []string{
		`ferry_connector_status{connector_key="nsink",connector_type="sink",status="degraded"} 1`,
		`ferry_connector_status{connector_key="nsink",connector_type="sink",status="running"} 0`,
		`ferry_connector_up{connector_key="nsink",connector_type="sink"} 0`,
	} {
		if !slices.Contains(strings.Split(body, "\n"), line) {
			t.Errorf("/metrics while degraded: missing %s", line)
		}
	}

	if err := e.admin.EnsureTopic(ctx, "s1", "t1", 1); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "nsink and bare running", func() bool {
		return e.status("sink", "nsink").State == connect.StateRunning && e.status("sink", "bare").State == connect.StateRunning
	})
	info = a.do("GET", "/sinks/nsink", "").want(t, http.StatusOK).object(t)
	if info["status"] != "running" || info["last_error"] != nil {
		t.Fatalf("GET /sinks/nsink after the topic is back = %v", info)
	}
	stats := a.do("GET", "/sinks/nsink/status", "").want(t, http.StatusOK).object(t)["stats"].(map[string]any)
	polls, _ := stats["poll_errors"].(float64)
	if polls < 1 || stats["topics_recreated"] != 1.0 {
		t.Fatalf("stats = %v; want poll_errors ≥ 1 and topics_recreated 1", stats)
	}
	body = string(a.do("GET", "/metrics", "").want(t, http.StatusOK).body)
	for _, line := range []string{
		`ferry_connector_status{connector_key="nsink",connector_type="sink",status="running"} 1`,
		`ferry_connector_status{connector_key="nsink",connector_type="sink",status="degraded"} 0`,
		fmt.Sprintf(`iggy_connector_errors_total{connector_key="nsink",connector_type="sink"} %d`, int(polls)),
		`ferry_sink_topic_recreated_total{connector_key="nsink"} 1`,
	} {
		if !slices.Contains(strings.Split(body, "\n"), line) {
			t.Errorf("/metrics after the topic is back: missing %s", line)
		}
	}
}
