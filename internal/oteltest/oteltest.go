// Package oteltest connects tests to the OpenTelemetry Collector of scripts/otelcol.sh
// (ferry-otelcol on loopback) and reads back what it received: the file exporter's OTLP
// JSON lines, one export request a line, decoded into spans, log records and metric data
// points of one service. It knows nothing of Ferry.
package oteltest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Collector is the Collector under test.
type Collector struct {
	Dir  string // where it writes traces.jsonl, logs.jsonl and metrics.jsonl
	GRPC string // its OTLP/gRPC endpoint, http://127.0.0.1:port
	HTTP string // its OTLP/HTTP endpoint, http://127.0.0.1:port
}

// Connect returns the Collector of FERRY_OTELCOL_*. The test is skipped when
// FERRY_OTELCOL_DIR is unset (`eval "$(bash scripts/otelcol.sh start)"` sets it; CI does)
// and fails when it is set but the Collector does not answer on both endpoints.
func Connect(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{Dir: os.Getenv("FERRY_OTELCOL_DIR"), GRPC: os.Getenv("FERRY_OTELCOL_GRPC"), HTTP: os.Getenv("FERRY_OTELCOL_HTTP")}
	if c.Dir == "" {
		t.Skip("FERRY_OTELCOL_DIR is not set: run `eval \"$(bash scripts/otelcol.sh start)\"` for the telemetry tests")
	}
	for _, ep := range []string{c.GRPC, c.HTTP} {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			t.Fatalf("oteltest: endpoint %q: want http://host:port", ep)
		}
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Fatalf("oteltest: the Collector does not answer at %s: %v", ep, err)
		}
		_ = conn.Close()
	}
	return c
}

// Span is one span as the Collector received it.
type Span struct {
	Service                   string
	Scope                     string
	TraceID, SpanID, ParentID string // hex
	Name                      string
	Kind                      int // OTLP SpanKind: 1 internal, 5 consumer
	Start, End                uint64
	Attrs                     map[string]any // string, int64, bool or float64
	StatusCode                int            // 0 unset, 1 ok, 2 error
	StatusMessage             string
	Events                    []string
}

// LogRecord is one log record as the Collector received it.
type LogRecord struct {
	Service         string
	Scope           string
	Severity        string
	SeverityNumber  int
	Body            string
	Attrs           map[string]any
	TraceID, SpanID string
}

// Point is one metric data point as the Collector received it.
type Point struct {
	Service   string
	Metric    string
	Type      string // sum, gauge, histogram or summary
	Monotonic bool   // sums only
	Value     float64
	Attrs     map[string]any
	Time      uint64
}

type anyValue struct {
	StringValue *string  `json:"stringValue"`
	IntValue    *string  `json:"intValue"`
	BoolValue   *bool    `json:"boolValue"`
	DoubleValue *float64 `json:"doubleValue"`
}

type keyValue struct {
	Key   string   `json:"key"`
	Value anyValue `json:"value"`
}

type resource struct {
	Attributes []keyValue `json:"attributes"`
}

type scope struct {
	Name string `json:"name"`
}

type traceLine struct {
	ResourceSpans []struct {
		Resource   resource `json:"resource"`
		ScopeSpans []struct {
			Scope scope `json:"scope"`
			Spans []struct {
				TraceID      string     `json:"traceId"`
				SpanID       string     `json:"spanId"`
				ParentSpanID string     `json:"parentSpanId"`
				Name         string     `json:"name"`
				Kind         int        `json:"kind"`
				Start        string     `json:"startTimeUnixNano"`
				End          string     `json:"endTimeUnixNano"`
				Attributes   []keyValue `json:"attributes"`
				Events       []struct {
					Name string `json:"name"`
				} `json:"events"`
				Status struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type logLine struct {
	ResourceLogs []struct {
		Resource  resource `json:"resource"`
		ScopeLogs []struct {
			Scope      scope `json:"scope"`
			LogRecords []struct {
				SeverityText   string     `json:"severityText"`
				SeverityNumber int        `json:"severityNumber"`
				Body           anyValue   `json:"body"`
				Attributes     []keyValue `json:"attributes"`
				TraceID        string     `json:"traceId"`
				SpanID         string     `json:"spanId"`
			} `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

type dataPoint struct {
	Attributes []keyValue `json:"attributes"`
	AsDouble   *float64   `json:"asDouble"`
	AsInt      *string    `json:"asInt"`
	Count      *string    `json:"count"` // histograms, summaries
	Time       string     `json:"timeUnixNano"`
}

type metricLine struct {
	ResourceMetrics []struct {
		Resource     resource `json:"resource"`
		ScopeMetrics []struct {
			Metrics []struct {
				Name string `json:"name"`
				Sum  *struct {
					DataPoints  []dataPoint `json:"dataPoints"`
					IsMonotonic bool        `json:"isMonotonic"`
				} `json:"sum"`
				Gauge *struct {
					DataPoints []dataPoint `json:"dataPoints"`
				} `json:"gauge"`
				Histogram *struct {
					DataPoints []dataPoint `json:"dataPoints"`
				} `json:"histogram"`
				Summary *struct {
					DataPoints []dataPoint `json:"dataPoints"`
				} `json:"summary"`
			} `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

// Spans returns the spans of service received so far, in the order received.
func (c *Collector) Spans(t testing.TB, service string) []Span {
	t.Helper()
	var out []Span
	c.lines(t, "traces.jsonl", func(b []byte) error {
		var l traceLine
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		for _, rs := range l.ResourceSpans {
			if svc := serviceName(rs.Resource); svc == service {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						sp := Span{Service: svc, Scope: ss.Scope.Name, TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentSpanID,
							Name: s.Name, Kind: s.Kind, Start: parseUint(s.Start), End: parseUint(s.End), Attrs: attrs(s.Attributes),
							StatusCode: s.Status.Code, StatusMessage: s.Status.Message}
						for _, e := range s.Events {
							sp.Events = append(sp.Events, e.Name)
						}
						out = append(out, sp)
					}
				}
			}
		}
		return nil
	})
	return out
}

// Logs returns the log records of service received so far, in the order received.
func (c *Collector) Logs(t testing.TB, service string) []LogRecord {
	t.Helper()
	var out []LogRecord
	c.lines(t, "logs.jsonl", func(b []byte) error {
		var l logLine
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		for _, rl := range l.ResourceLogs {
			if svc := serviceName(rl.Resource); svc == service {
				for _, sl := range rl.ScopeLogs {
					for _, r := range sl.LogRecords {
						body, _ := value(r.Body).(string)
						out = append(out, LogRecord{Service: svc, Scope: sl.Scope.Name, Severity: r.SeverityText, SeverityNumber: r.SeverityNumber,
							Body: body, Attrs: attrs(r.Attributes), TraceID: r.TraceID, SpanID: r.SpanID})
					}
				}
			}
		}
		return nil
	})
	return out
}

// Points returns the metric data points of service received so far, in the order
// received; a histogram's or summary's Value is its count.
func (c *Collector) Points(t testing.TB, service string) []Point {
	t.Helper()
	var out []Point
	c.lines(t, "metrics.jsonl", func(b []byte) error {
		var l metricLine
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		for _, rm := range l.ResourceMetrics {
			svc := serviceName(rm.Resource)
			if svc != service {
				continue
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					add := func(typ string, mono bool, dps []dataPoint) {
						for _, dp := range dps {
							p := Point{Service: svc, Metric: m.Name, Type: typ, Monotonic: mono, Attrs: attrs(dp.Attributes), Time: parseUint(dp.Time)}
							switch {
							case dp.AsDouble != nil:
								p.Value = *dp.AsDouble
							case dp.AsInt != nil:
								p.Value = float64(parseUint(*dp.AsInt))
							case dp.Count != nil:
								p.Value = float64(parseUint(*dp.Count))
							}
							out = append(out, p)
						}
					}
					switch {
					case m.Sum != nil:
						add("sum", m.Sum.IsMonotonic, m.Sum.DataPoints)
					case m.Gauge != nil:
						add("gauge", false, m.Gauge.DataPoints)
					case m.Histogram != nil:
						add("histogram", false, m.Histogram.DataPoints)
					case m.Summary != nil:
						add("summary", false, m.Summary.DataPoints)
					}
				}
			}
		}
		return nil
	})
	return out
}

// lines calls fn with each complete line of the Collector's file name; a line the
// exporter is still writing (no newline yet) is left for the next read.
func (c *Collector) lines(t testing.TB, name string, fn func([]byte) error) {
	t.Helper()
	f, err := os.Open(filepath.Join(c.Dir, name))
	if err != nil {
		t.Fatalf("oteltest: %v", err)
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		b, err := r.ReadBytes('\n')
		if err != nil { // io.EOF: a partial last line, or none
			return
		}
		if err := fn(b); err != nil {
			t.Fatalf("oteltest: %s line %d: %v", name, n, err)
		}
	}
}

func serviceName(r resource) string {
	for _, kv := range r.Attributes {
		if kv.Key == "service.name" {
			s, _ := value(kv.Value).(string)
			return s
		}
	}
	return ""
}

func attrs(kvs []keyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = value(kv.Value)
	}
	return m
}

func value(v anyValue) any {
	switch {
	case v.StringValue != nil:
		return *v.StringValue
	case v.IntValue != nil:
		n, err := strconv.ParseInt(*v.IntValue, 10, 64)
		if err != nil {
			return fmt.Sprintf("bad int %q", *v.IntValue)
		}
		return n
	case v.BoolValue != nil:
		return *v.BoolValue
	case v.DoubleValue != nil:
		return *v.DoubleValue
	}
	return nil
}

func parseUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
