package telemetry

import (
	"context"
	"testing"

	"github.com/ferryio/ferry/connect/config"
)

// TestHTTPURL: an http endpoint without a path gets the signal's; one with a path is used
// as written, as upstream's exporter uses it.
func TestHTTPURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://collector:4318", "http://collector:4318/v1/traces"},
		{"http://collector:4318/", "http://collector:4318/v1/traces"},
		{"https://otlp.example.com/v1/traces", "https://otlp.example.com/v1/traces"},
		{"http://collector:4318/custom/path", "http://collector:4318/custom/path"},
	} {
		if got := httpURL(c.in, "/v1/traces"); got != c.want {
			t.Errorf("httpURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestStartOff: a disabled section builds nothing, and the nil Telemetry is usable.
func TestStartOff(t *testing.T) {
	tel, err := Start(context.Background(), config.DefaultRuntime().Telemetry, "v", nil, nil)
	if err != nil || tel != nil {
		t.Fatalf("Start(disabled) = %v, %v; want nil, nil", tel, err)
	}
	if tel.TracerOrNil() != nil {
		t.Fatal("tracer of a nil Telemetry")
	}
	if err := tel.StartMetrics(context.Background(), config.OTLPMetrics{Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
