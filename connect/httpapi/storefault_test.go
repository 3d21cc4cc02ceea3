package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/provider"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
	"github.com/ferryio/ferry/server/servertest"
)

const storeFaultSink = `type = "sink"
key = "fsink"
enabled = true
version = 0
name = "sink whose stores fail"
path = "builtin:null"
offset_commit = "after_consuming"

[[streams]]
stream = "s1"
topics = ["t1"]
schema = "raw"
batch_length = 10
poll_interval = "5ms"

[retry]
initial_backoff = "1ms"
max_backoff = "20ms"
`

// TestStoreFailureReported (issue 22): while the server refuses a sink's offset stores
// with 4006 (its storage hook: a full disk on demand), GET /sinks/{key}/offsets and the
// status route report the partition's consecutive failures and last store error, and
// /metrics its failure gauge; once stores succeed the fields are gone again and the
// answers are what they were before (the same keys).
func TestStoreFailureReported(t *testing.T) {
	var faulted atomic.Bool
	kit := iggykit.Start(t, servertest.WithWriteFault(func() error {
		if faulted.Load() {
			return errors.New("no space left on device (test fault)")
		}
		return nil
	}))
	admin := kit.Admin
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.EnsureTopic(ctx, "s1", "t1", 1); err != nil {
		t.Fatal(err)
	}
	msgs := make([]iggy.Message, 10)
	for i := range msgs {
		msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "m%d", i)}
	}
	if _, err := admin.SendMessages(ctx, iggy.Name("s1"), iggy.Name("t1"), wire.ToPartition(0), msgs); err != nil {
		t.Fatal(err)
	}
	// The group exists before the fault (creating it is a write); joining it is not.
	if _, err := admin.CreateConsumerGroup(ctx, iggy.Name("s1"), iggy.Name("t1"), "iggy-connect-sink-fsink"); err != nil {
		t.Fatal(err)
	}
	faulted.Store(true)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fsink.toml"), []byte(storeFaultSink), 0o600); err != nil {
		t.Fatal(err)
	}
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := config.DefaultRuntime()
	rc.State.Path = t.TempDir()
	rt := runkit.Start(t, connect.Options{Connectors: conns, Runtime: rc, Client: kit.Dial(),
		Builtins: connectors.Registry(), Configs: &provider.Local{Dir: dir}})
	t.Cleanup(func() { faulted.Store(false) }) // first: the stop stores, the server's close syncs
	a := serveOpts(t, Options{Runtime: rt, Version: "0.5.0", Logger: quietLog,
		HTTP: config.HTTP{Enabled: true, Address: "127.0.0.1:0", Metrics: config.Metrics{Enabled: true, Endpoint: "/metrics"}}})

	const storeErr = `iggy: store offset stream "s1" topic "t1" partition 0 group "iggy-connect-sink-fsink": CannotSaveMessagesToSegment (4006)`
	failures := func(m map[string]any) float64 {
		f, _ := m["store_failures"].(float64)
		return f
	}
	offsets := func() map[string]any {
		list := a.do("GET", "/sinks/fsink/offsets", "").want(t, http.StatusOK).array(t)
		if len(list) != 1 {
			t.Fatalf("GET /sinks/fsink/offsets = %v, want one partition", list)
		}
		return withoutAge(t, list[0])
	}
	var o map[string]any
	testkit.WaitFor(t, "3 failed stores in GET /sinks/fsink/offsets", func() bool {
		o = offsets()
		return failures(o) >= 3
	})
	wantKeys(t, "offsets during the fault", o, "stream", "topic", "partition_id", "current_offset", "stored_offset", "lag",
		"uncommitted", "owned", "store_failures", "last_store_error")
	le, _ := o["last_store_error"].(map[string]any)
	if o["stored_offset"] != nil || o["current_offset"] != 9.0 || o["uncommitted"] != 10.0 || o["owned"] != true ||
		le == nil || le["message"] != storeErr || le["timestamp"].(float64) <= 0 {
		t.Fatalf("GET /sinks/fsink/offsets during the fault = %v", o)
	}
	m := a.do("GET", "/sinks/fsink/status", "").want(t, http.StatusOK).object(t)
	p := m["partitions"].([]any)[0].(map[string]any)
	le, _ = p["last_store_error"].(map[string]any)
	if m["status"] != "running" || p["state"] != "owned" || failures(p) < 3 || le == nil || le["message"] != storeErr ||
		p["delivered"] != 9.0 || p["done"] != 9.0 || p["stored"] != -1.0 {
		t.Fatalf("status during the fault = %v", m)
	}
	gauge := regexp.MustCompile(`(?m)^ferry_sink_consecutive_store_failures\{connector_key="fsink",partition="0",stream="s1",topic="t1"\} (\d+)$`)
	scrape := func() int {
		body := a.do("GET", "/metrics", "").want(t, http.StatusOK).body
		g := gauge.FindSubmatch(body)
		if g == nil {
			t.Fatalf("no failure gauge in /metrics:\n%s", body)
		}
		n, _ := strconv.Atoi(string(g[1]))
		return n
	}
	if n := scrape(); n < 3 {
		t.Fatalf("ferry_sink_consecutive_store_failures = %d during the fault, want at least 3", n)
	}

	faulted.Store(false)
	// Exactly these keys and values: the store fields are gone.
	testkit.WaitFor(t, "offset 9 stored", func() bool { return maps.Equal(offsets(), partitionOffsets(9, 9, 0, 0, true)) })
	m = a.do("GET", "/sinks/fsink/status", "").want(t, http.StatusOK).object(t)
	p = m["partitions"].([]any)[0].(map[string]any)
	wantKeys(t, "partition after the fault", p, "stream", "topic", "partition_id", "state", "polled", "delivered", "done", "stored",
		"current_offset", "lag", "pending", "uncommitted", "paused", "offsets_age_ms")
	if n := scrape(); n != 0 {
		t.Fatalf("ferry_sink_consecutive_store_failures = %d after the fault, want 0", n)
	}
	if st, _ := rt.Connector(connect.KindSink, "fsink"); st.Stats.StoresRefused != 0 || st.Stats.StoreErrors < 3 || st.Stats.Committed != 10 {
		t.Fatalf("stats after the fault: %+v", st.Stats)
	}
}
