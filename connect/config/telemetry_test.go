package config

import (
	"strings"
	"testing"
	"time"
)

// TestTelemetryValidation: [telemetry] mistakes are refused naming the key, and only for
// what is enabled; [telemetry.metrics] has its defaults and reads the environment.
func TestTelemetryValidation(t *testing.T) {
	base := "[connectors]\nconfig_dir = \"conn\"\n"
	for _, c := range []struct {
		name, toml string
		env        []string
		wantErr    string // "" = accepted
	}{
		{"off, anything goes", "[telemetry]\nenabled = false\n[telemetry.traces]\nendpoint = \"nonsense\"\n", nil, ""},
		{"defaults", "[telemetry]\nenabled = true\n", nil, ""},
		{"bad transport even off", "[telemetry.logs]\ntransport = \"udp\"\n", nil,
			`telemetry.logs.transport: unknown value "udp" (want grpc or http)`},
		{"metrics transport", "[telemetry.metrics]\ntransport = \"zmq\"\n", nil,
			`telemetry.metrics.transport: unknown value "zmq" (want grpc or http)`},
		{"endpoint without scheme", "[telemetry]\nenabled = true\n[telemetry.traces]\nendpoint = \"localhost:4317\"\n", nil,
			`telemetry.traces.endpoint: "localhost:4317": want an http:// or https:// URL with a host`},
		{"endpoint without host", "[telemetry]\nenabled = true\n[telemetry.logs]\nendpoint = \"http:///v1/logs\"\n", nil,
			`telemetry.logs.endpoint: "http:///v1/logs": want an http:// or https:// URL with a host`},
		{"metrics endpoint checked when on", "[telemetry]\nenabled = true\n[telemetry.metrics]\nenabled = true\nendpoint = \"ftp://x\"\n", nil,
			`telemetry.metrics.endpoint: "ftp://x": want an http:// or https:// URL`},
		{"metrics endpoint not checked when off", "[telemetry]\nenabled = true\n[telemetry.metrics]\nendpoint = \"ftp://x\"\n", nil, ""},
		{"metrics interval", "[telemetry]\nenabled = true\n[telemetry.metrics]\nenabled = true\ninterval = \"0s\"\n", nil,
			`telemetry.metrics.interval: "0s": want a positive duration`},
		{"metrics interval from env", "[telemetry]\nenabled = true\n[telemetry.metrics]\nenabled = true\n",
			[]string{"IGGY_CONNECTORS_TELEMETRY_METRICS_INTERVAL=soon"},
			`telemetry.metrics.interval (from IGGY_CONNECTORS_TELEMETRY_METRICS_INTERVAL): "soon": want a positive duration`},
		{"empty service name", "[telemetry]\nenabled = true\nservice_name = \"\"\n", nil,
			"telemetry.service_name: required when telemetry is enabled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "config.toml", base+c.toml)
			_, err := ParseRuntimeEnv(p, c.env)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}

	p := writeFile(t, t.TempDir(), "config.toml", base+"[telemetry]\nenabled = true\n")
	r, err := ParseRuntimeEnv(p, []string{"IGGY_CONNECTORS_TELEMETRY_METRICS_ENABLED=true",
		"IGGY_CONNECTORS_TELEMETRY_METRICS_TRANSPORT=http", "IGGY_CONNECTORS_TELEMETRY_METRICS_INTERVAL=1m 30s"})
	if err != nil {
		t.Fatal(err)
	}
	m := r.Telemetry.Metrics
	if !m.Enabled || m.Transport != "http" || m.Endpoint != "http://localhost:4317" || m.MetricsInterval() != 90*time.Second {
		t.Fatalf("metrics: %+v (interval %s)", m, m.MetricsInterval())
	}
	d := DefaultRuntime().Telemetry
	if d.Enabled || d.ServiceName != "iggy-connectors" || d.Metrics.Enabled || d.Metrics.Interval != "60s" || d.Traces.Endpoint != "http://localhost:4317" {
		t.Fatalf("defaults: %+v", d)
	}
}
