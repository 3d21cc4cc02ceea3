package e2e

import (
	"context"
	"fmt"
	"github.com/ferryio/ferry/internal/testkit"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/oteltest"
)

// TestTelemetryOTLP runs ferry with [telemetry] on against a real OpenTelemetry
// Collector (scripts/otelcol.sh), over each transport, and reads back what the Collector
// received: the trace of a known batch (five messages at offsets 0 to 4 of partition 0,
// all polled at once) with its poll, consume and store spans and their attributes, the
// runtime's log lines, and the Prometheus counters pushed over OTLP; and the span of a
// source's one batch of five.
func TestTelemetryOTLP(t *testing.T) {
	col := oteltest.Connect(t)
	for _, transport := range []string{"grpc", "http"} {
		t.Run(transport, func(t *testing.T) {
			endpoint := col.GRPC
			if transport == "http" {
				endpoint = col.HTTP
			}
			telemetryRun(t, col, transport, endpoint)
		})
	}
}

func telemetryRun(t *testing.T, col *oteltest.Collector, transport, endpoint string) {
	service := fmt.Sprintf("ferry-e2e-%s-%d", transport, time.Now().UnixNano())
	dir := t.TempDir()
	addr := fiveMessages(t, dir)
	cfg := telemetryConfig(t, dir, addr, service, transport, endpoint)

	run := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--progress", "0")
	testkit.WaitFor(t, "the batch's stored offset", func() bool {
		if run.exited() {
			t.Fatalf("ferry run exited: %v", run.err)
		}
		p, err := offsets(t, addr, "s", "t", "iggy-connect-sink-out")
		return err == nil && p[0].stored == 4
	})
	run.stop(20 * time.Second) // the shutdown flushes the last spans, records and metrics

	// The trace of the batch: exactly one, with its three children.
	var spans []oteltest.Span
	testkit.WaitFor(t, "the batches' spans at the Collector", func() bool {
		spans = col.Spans(t, service)
		return len(spans) >= 6
	})
	byName := map[string][]oteltest.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	for _, name := range []string{"ferry.sink.batch", "ferry.sink.poll", "ferry.sink.consume", "ferry.sink.store", "ferry.source.batch", "ferry.source.send"} {
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans named %s, want 1; all spans: %+v", len(byName[name]), name, spans)
		}
	}
	root := byName["ferry.sink.batch"][0]
	wantRoot := map[string]any{
		"messaging.system": "iggy", "ferry.connector.key": "out", "messaging.consumer.group.name": "iggy-connect-sink-out",
		"iggy.stream": "s", "iggy.topic": "t", "iggy.partition": int64(0),
		"iggy.offset.first": int64(0), "iggy.offset.last": int64(4), "messaging.batch.message_count": int64(5),
		"ferry.batch.stored": true,
	}
	assertAttrs(t, root, wantRoot)
	if root.ParentID != "" || root.Kind != 5 || root.Scope != "github.com/ferryio/ferry" {
		t.Fatalf("batch span: parent %q kind %d scope %q, want a consumer root span of github.com/ferryio/ferry", root.ParentID, root.Kind, root.Scope)
	}
	for _, name := range []string{"ferry.sink.poll", "ferry.sink.consume", "ferry.sink.store"} {
		s := byName[name][0]
		if s.TraceID != root.TraceID || s.ParentID != root.SpanID {
			t.Fatalf("%s: trace %s parent %s, want trace %s parent %s", name, s.TraceID, s.ParentID, root.TraceID, root.SpanID)
		}
		if s.Start < root.Start || s.End > root.End || s.End < s.Start {
			t.Fatalf("%s [%d, %d] is not inside the batch's span [%d, %d]", name, s.Start, s.End, root.Start, root.End)
		}
	}
	assertAttrs(t, byName["ferry.sink.consume"][0], map[string]any{"ferry.batch.result": "delivered"})
	assertAttrs(t, byName["ferry.sink.store"][0], map[string]any{"iggy.offset.stored": int64(4)})
	if poll, consume, store := byName["ferry.sink.poll"][0], byName["ferry.sink.consume"][0], byName["ferry.sink.store"][0]; poll.End > consume.Start || consume.End > store.Start {
		t.Fatalf("spans out of order: poll ends %d, consume [%d, %d], store starts %d", poll.End, consume.Start, consume.End, store.Start)
	}

	srcBatch, srcSend := byName["ferry.source.batch"][0], byName["ferry.source.send"][0]
	assertAttrs(t, srcBatch, map[string]any{"messaging.system": "iggy", "ferry.connector.key": "gen", "iggy.stream": "s",
		"iggy.topic": "generated", "messaging.batch.message_count": int64(5), "ferry.batch.acked": true})
	assertAttrs(t, srcSend, map[string]any{"messaging.batch.message_count": int64(5)})
	if srcBatch.Kind != 4 || srcSend.ParentID != srcBatch.SpanID || srcSend.TraceID != srcBatch.TraceID {
		t.Fatalf("source spans: batch kind %d, send parent %s trace %s; want a producer span (4) and its child", srcBatch.Kind, srcSend.ParentID, srcSend.TraceID)
	}

	// The runtime's log lines, with their attributes.
	var logs []oteltest.LogRecord
	testkit.WaitFor(t, "the shutdown line at the Collector", func() bool {
		logs = col.Logs(t, service)
		for _, r := range logs {
			if r.Body == "All connectors closed. Runtime shutdown complete." {
				return true
			}
		}
		return false
	})
	found, loaded := false, false
	for _, r := range logs {
		if r.Body == "All sources and sinks spawned." {
			found = true
			if r.Severity != "INFO" || r.SeverityNumber != 9 || r.Scope != "github.com/ferryio/ferry" {
				t.Fatalf("spawned line: severity %q (%d) scope %q, want INFO (9) of github.com/ferryio/ferry", r.Severity, r.SeverityNumber, r.Scope)
			}
		}
		if r.Body == "config loaded" {
			loaded = true
			if r.Attrs["sinks"] != int64(1) || r.Attrs["sources"] != int64(1) {
				t.Fatalf("config loaded: attributes %v, want sinks 1 and sources 1", r.Attrs)
			}
		}
	}
	if !found || !loaded {
		t.Fatalf("log records \"All sources and sinks spawned.\" (%t) and \"config loaded\" (%t) among %d", found, loaded, len(logs))
	}

	// The metrics: the last push (the one at the shutdown) of the consumed counter says
	// five, as a cumulative sum.
	var last *oteltest.Point
	testkit.WaitFor(t, "the consumed counter's last push at the Collector", func() bool {
		last = nil
		for _, p := range col.Points(t, service) {
			if p.Metric == "iggy_connector_messages_consumed_total" && p.Attrs["connector_key"] == "out" {
				last = &p
			}
		}
		return last != nil && last.Value == 5
	})
	if last.Type != "sum" || !last.Monotonic || last.Attrs["connector_type"] != "sink" {
		t.Fatalf("last consumed point: %+v, want a monotonic sum for the sink", *last)
	}
}

func assertAttrs(t *testing.T, s oteltest.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attrs[k]; !ok || got != v {
			t.Fatalf("%s: attribute %s = %v (%T), want %v (%T); all: %v", s.Name, k, got, got, v, v, s.Attrs)
		}
	}
}

// telemetryConfig writes, under dir, a file sink of s/t (key out), a random source of one
// batch of five to s/generated (key gen), and a runtime config for Iggy at addr with
// [telemetry] on, every signal to endpoint over transport, metrics every 200 ms; it
// returns the config's path.
func telemetryConfig(t *testing.T, dir, addr, service, transport, endpoint string) string {
	t.Helper()
	conns := filepath.Join(dir, "connectors")
	out := filepath.Join(dir, "out.txt")
	writeFile(t, filepath.Join(conns, "out.toml"), fileSink("s", "t", "after_consuming", out, 100, 1000))
	// A source of one batch of five messages, to another topic.
	writeFile(t, filepath.Join(conns, "gen.toml"), randomSource("s", "generated", 5, 1000, 5))
	cfg := filepath.Join(dir, "config.toml")
	writeFile(t, cfg, fmt.Sprintf(`[iggy]
address = %q
username = "iggy"
password = "iggy"

[state]
path = %q

[connectors]
config_type = "local"
config_dir = %q

[http]
enabled = false

[telemetry]
enabled = true
service_name = %q

[telemetry.logs]
transport = %q
endpoint = %q

[telemetry.traces]
transport = %q
endpoint = %q

[telemetry.metrics]
enabled = true
transport = %q
endpoint = %q
interval = "200ms"
`, addr, filepath.Join(dir, "state"), conns, service, transport, endpoint, transport, endpoint, transport, endpoint))

	return cfg
}

// fiveMessages starts a server, creates s/t and s/generated (the source's) and sends five
// messages to partition 0 of s/t; it returns the server's address. They are sent before ferry starts, so its first poll
// (batch_length 100) gets all five.
func fiveMessages(t *testing.T, dir string) string {
	t.Helper()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The source's topic too: no connector creates its own (ferry run --create-topics does).
	for _, topic := range []string{"t", "generated"} {
		if err := c.EnsureTopic(ctx, "s", topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	msgs := make([]iggy.Message, 5)
	for i := range msgs {
		msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "message %d", i)}
	}
	if _, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(0), msgs); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestTelemetryReceiverDown: with every signal sent to a port nobody listens on, ferry
// delivers and stores as usual, says the exports failed (on stderr), and exits 0 within
// the stop's bound plus the telemetry flush's 5 s, over either transport.
func TestTelemetryReceiverDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	for _, transport := range []string{"grpc", "http"} {
		t.Run(transport, func(t *testing.T) {
			dir := t.TempDir()
			addr := fiveMessages(t, dir)
			cfg := telemetryConfig(t, dir, addr, "ferry-e2e-down", transport, endpoint)
			run := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--progress", "0")
			testkit.WaitFor(t, "the batch's stored offset", func() bool {
				if run.exited() {
					t.Fatalf("ferry run exited: %v", run.err)
				}
				p, err := offsets(t, addr, "s", "t", "iggy-connect-sink-out")
				return err == nil && p[0].stored == 4
			})
			start := time.Now()
			run.stop(20 * time.Second)
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("the stop took %s with the receiver down", d)
			}
			out := run.out.String()
			if !strings.Contains(out, "OpenTelemetry export failed") && !strings.Contains(out, "telemetry not flushed") {
				t.Fatalf("no word of the failed exports in the output:\n%s", tail(out, 30))
			}
			if n := countLines(filepath.Join(dir, "out.txt")); n != 5 {
				t.Fatalf("the file sink wrote %d lines, want 5", n)
			}
		})
	}
}
