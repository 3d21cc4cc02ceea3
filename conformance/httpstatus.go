package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// freeLoopback returns a loopback address no one listens on right now.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// apiStartLimit bounds how long after the probe's open the HTTP API may take to answer
// (a safety net: Ferry serves it before it starts connectors).
const apiStartLimit = 10 * time.Second

// errNoAPI marks an HTTP API that is off or not shaped like Iggy's runtime's (§4.7).
var errNoAPI = errors.New("no Iggy-style HTTP API")

// sinkInfo is the part of GET /sinks/{key} the scenario judges.
type sinkInfo struct {
	Key       string `json:"key"`
	Status    string `json:"status"`
	LastError *struct {
		Message string `json:"message"`
	} `json:"last_error"`
}

func httpGet(ctx context.Context, url string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

func (f *fixture) sinkInfo(ctx context.Context) (sinkInfo, error) {
	var si sinkInfo
	code, b, err := httpGet(ctx, "http://"+f.http+"/sinks/"+f.key)
	if err != nil {
		return si, fmt.Errorf("%w: GET /sinks/%s: %w", errNoAPI, f.key, err)
	}
	if code != http.StatusOK {
		return si, fmt.Errorf("%w: GET /sinks/%s: HTTP %d", errNoAPI, f.key, code)
	}
	if err := json.Unmarshal(b, &si); err != nil || si.Key != f.key || si.Status == "" {
		return si, fmt.Errorf("%w: GET /sinks/%s: not a SinkInfo: %.200s", errNoAPI, f.key, b)
	}
	return si, nil
}

// sinkMetrics reads the metrics endpoint: the sink's errors counter and the runtime's
// running sinks gauge (-1 = absent). served is false when the endpoint answers 404.
type sinkMetrics struct {
	served          bool
	errors, running float64
}

func (f *fixture) sinkMetrics(ctx context.Context) (sinkMetrics, error) {
	m := sinkMetrics{errors: -1, running: -1}
	code, b, err := httpGet(ctx, "http://"+f.http+"/metrics")
	if err != nil {
		return m, fmt.Errorf("GET /metrics: %w", err)
	}
	if code == http.StatusNotFound {
		return m, nil
	}
	if code != http.StatusOK {
		return m, fmt.Errorf("GET /metrics: HTTP %d", code)
	}
	m.served = true
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 || strings.HasPrefix(l, "#") {
			continue
		}
		v, err := strconv.ParseFloat(fs[len(fs)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case fs[0] == "iggy_connectors_sinks_running":
			m.running = v
		case strings.HasPrefix(fs[0], "iggy_connector_errors_total{") && strings.Contains(fs[0], `connector_key="`+f.key+`"`):
			m.errors = v
		}
	}
	return m, nil
}

func runStoppedStatus(ctx context.Context, r *Runner, mode string) Result {
	const expected = `consume fails, on_failure = stop stops the sink: GET /sinks/{key} status "error" (or "stopped") with last_error; /metrics: iggy_connector_errors_total ≥ 1 for the sink, iggy_connectors_sinks_running 0`
	f, p, err := r.begin(ctx, "stopped-status", mode, setup{partitions: 1, before: 50, http: true, conn: connector{batch: 50, onFailure: "stop", maxRetries: 0,
		probe: map[string]string{"fail_batch": "1", "fail_times": "1000000"}}})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.wait(ctx, "a failed consume", func() bool { return f.count('F') > 0 }); err != nil {
		return broken(expected, err)
	}
	// The API must answer with a SinkInfo soon after the probe was opened; a runtime whose
	// API is off or shaped differently gets "not supported".
	si, apiErr := f.sinkInfo(ctx)
	for deadline := time.Now().Add(apiStartLimit); apiErr != nil; si, apiErr = f.sinkInfo(ctx) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return unsupported(expected, apiErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A runtime that restarts a stopped sink shows it running again for a moment: wait for
	// one reading in which both the status and the metrics show it stopped.
	var m sinkMetrics
	err = f.wait(ctx, "the HTTP API to show the sink stopped", func() bool {
		if si, apiErr = f.sinkInfo(ctx); apiErr != nil {
			return false
		}
		if m, apiErr = f.sinkMetrics(ctx); apiErr != nil {
			return false
		}
		stopped := (si.Status == "error" || si.Status == "stopped") && si.LastError != nil && si.LastError.Message != ""
		return stopped && (!m.served || m.errors >= 1 && m.running == 0)
	})
	if err != nil && apiErr != nil {
		err = fmt.Errorf("%w (last reading: %w)", err, apiErr)
	}
	_ = p.term(20 * time.Second)
	t := f.tally()
	obs := fmt.Sprintf("status %q", si.Status)
	if si.LastError != nil {
		obs += fmt.Sprintf(", last_error %q", oneLine(si.LastError.Message))
	}
	if m.served {
		obs += fmt.Sprintf("; metrics: errors %g, sinks running %g", m.errors, m.running)
	} else {
		obs += "; metrics endpoint not served"
	}
	if err != nil {
		obs += "; " + err.Error()
	}
	return verdict(expected, obs, err == nil && t.clean(), t)
}
