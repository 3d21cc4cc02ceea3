package ferrycli

import (
	"context"
	"log/slog"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/telemetry"
)

// telemetryFlushTimeout bounds the flush of the last telemetry at exit.
const telemetryFlushTimeout = 5 * time.Second

// startTelemetry starts the OTLP export of [telemetry] when it is enabled and returns the
// logger to use from then on: log, and beside it the export of the same records. The
// SDK's own errors go to log only.
func startTelemetry(ctx context.Context, cfg config.Telemetry, level, version string, log *slog.Logger) (*telemetry.Telemetry, *slog.Logger, error) {
	lv, err := parseLogLevel(level)
	if err != nil {
		return nil, nil, err
	}
	tel, err := telemetry.Start(ctx, cfg, version, lv, log.With("component", "telemetry"))
	if err != nil || tel == nil {
		return nil, log, err
	}
	out := slog.New(slog.NewMultiHandler(log.Handler(), tel.Logs))
	out.Info("telemetry enabled", "service_name", cfg.ServiceName,
		"logs", cfg.Logs.Transport+" "+cfg.Logs.Endpoint, "traces", cfg.Traces.Transport+" "+cfg.Traces.Endpoint,
		"metrics", metricsTarget(cfg.Metrics))
	return tel, out, nil
}

func metricsTarget(m config.OTLPMetrics) string {
	if !m.Enabled {
		return "off"
	}
	return m.Transport + " " + m.Endpoint + " every " + m.Interval
}
