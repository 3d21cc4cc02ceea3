// Package telemetry exports Ferry's logs, traces and metrics over OTLP with the
// OpenTelemetry Go SDK, as the runtime config's [telemetry] section says
// (docs/telemetry.md). It builds the SDK's providers and hands out what the rest of the
// process uses: a tracer for the runtime's batch spans, a slog handler for the logs, and
// a periodic push of the Prometheus metrics. It knows nothing of connectors.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	otelprom "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferryio/ferry/connect/config"
)

// ScopeName is the instrumentation scope of everything Ferry exports.
const ScopeName = "github.com/ferryio/ferry"

// Telemetry is the SDK's providers built from [telemetry]. The zero of each field means
// that signal is off.
type Telemetry struct {
	// Tracer opens the runtime's spans (connect.Options.Tracer).
	Tracer trace.Tracer
	// Logs is a slog handler that exports each record it is given; the caller puts it
	// beside its own handler.
	Logs slog.Handler

	res    *resource.Resource
	tp     *sdktrace.TracerProvider
	lp     *sdklog.LoggerProvider
	mp     *sdkmetric.MeterProvider
	errLog *slog.Logger
}

// Start builds the log and trace exporters of an enabled cfg; it returns nil (and no
// error) when cfg is not enabled. version is the service.version of the resource. level
// is the lowest level of the records Logs exports (the process's log level). errLog
// gets the SDK's own errors (an unreachable receiver): a logger that does not export,
// so a failing export never feeds itself.
func Start(ctx context.Context, cfg config.Telemetry, version string, level slog.Leveler, errLog *slog.Logger) (*Telemetry, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.version", version),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	t := &Telemetry{res: res, errLog: errLog}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		errLog.Warn("OpenTelemetry export failed", "error", err)
	}))

	spans, err := traceExporter(ctx, cfg.Traces)
	if err != nil {
		return nil, err
	}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(spans))
	t.Tracer = t.tp.Tracer(ScopeName)

	logs, err := logExporter(ctx, cfg.Logs)
	if err != nil {
		return nil, errors.Join(err, t.tp.Shutdown(ctx))
	}
	t.lp = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewBatchProcessor(logs)))
	t.Logs = &levelHandler{level: level, next: otelslog.NewHandler(ScopeName, otelslog.WithLoggerProvider(t.lp))}
	return t, nil
}

// StartMetrics pushes what g gathers (the Prometheus metrics) over OTLP every
// cfg.Interval, when cfg is enabled. The metrics keep their Prometheus names; counters
// become cumulative sums, gauges gauges.
func (t *Telemetry) StartMetrics(ctx context.Context, cfg config.OTLPMetrics, g prometheus.Gatherer) error {
	if t == nil || !cfg.Enabled {
		return nil
	}
	exp, err := metricExporter(ctx, cfg)
	if err != nil {
		return err
	}
	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(cfg.MetricsInterval()),
		sdkmetric.WithProducer(otelprom.NewMetricProducer(otelprom.WithGatherer(g))))
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(t.res), sdkmetric.WithReader(reader))
	return nil
}

// Shutdown flushes what is buffered (the last spans, records and a last metrics push)
// and stops the exporters; ctx bounds it.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.lp != nil {
		errs = append(errs, t.lp.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}

// httpURL returns endpoint with the signal's path (/v1/traces, /v1/logs, /v1/metrics)
// when it has none: an http endpoint names either the receiver or the signal's URL.
func httpURL(endpoint, signalPath string) string {
	u, err := url.Parse(endpoint)
	if err != nil { // validated by config
		return endpoint
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = signalPath
	}
	return u.String()
}

func traceExporter(ctx context.Context, e config.OTLPExporter) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	if e.Transport == "http" {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(httpURL(e.Endpoint, "/v1/traces")))
	} else {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(e.Endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry.traces: %s exporter for %s: %w", e.Transport, e.Endpoint, err)
	}
	return exp, nil
}

func logExporter(ctx context.Context, e config.OTLPExporter) (sdklog.Exporter, error) {
	var exp sdklog.Exporter
	var err error
	if e.Transport == "http" {
		exp, err = otlploghttp.New(ctx, otlploghttp.WithEndpointURL(httpURL(e.Endpoint, "/v1/logs")))
	} else {
		exp, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpointURL(e.Endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry.logs: %s exporter for %s: %w", e.Transport, e.Endpoint, err)
	}
	return exp, nil
}

func metricExporter(ctx context.Context, m config.OTLPMetrics) (sdkmetric.Exporter, error) {
	var exp sdkmetric.Exporter
	var err error
	if m.Transport == "http" {
		exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(httpURL(m.Endpoint, "/v1/metrics")))
	} else {
		exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(m.Endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry.metrics: %s exporter for %s: %w", m.Transport, m.Endpoint, err)
	}
	return exp, nil
}

// levelHandler passes on the records at or above level: the exported logs are the ones
// the process prints, no more.
type levelHandler struct {
	level slog.Leveler
	next  slog.Handler
}

func (h *levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() && h.next.Enabled(ctx, l)
}

func (h *levelHandler) Handle(ctx context.Context, r slog.Record) error { return h.next.Handle(ctx, r) }

func (h *levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &levelHandler{level: h.level, next: h.next.WithAttrs(attrs)}
}

func (h *levelHandler) WithGroup(name string) slog.Handler {
	return &levelHandler{level: h.level, next: h.next.WithGroup(name)}
}

// TracerOrNil is t's tracer, nil when t is (telemetry off).
func (t *Telemetry) TracerOrNil() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.Tracer
}
