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

// errNoAPI marks an HTTP API that is off or not shaped like Iggy's runtime's (docs/http-api.md).
var errNoAPI = errors.New("no Iggy-style HTTP API")

// connectorInfo is the part of GET /sinks/{key} and GET /sources/{key} the scenarios judge.
type connectorInfo struct {
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

// apiWatch reads one connector's status and the metrics from a runtime's HTTP API.
type apiWatch struct {
	addr    string // the API's address
	kind    string // "sinks" or "sources", the route and the running gauge
	key     string
	waitFor func(ctx context.Context, what string, cond func() bool) error
}

func (w apiWatch) info(ctx context.Context) (connectorInfo, error) {
	var ci connectorInfo
	route := "/" + w.kind + "/" + w.key
	code, b, err := httpGet(ctx, "http://"+w.addr+route)
	if err != nil {
		return ci, fmt.Errorf("%w: GET %s: %w", errNoAPI, route, err)
	}
	if code != http.StatusOK {
		return ci, fmt.Errorf("%w: GET %s: HTTP %d", errNoAPI, route, code)
	}
	if err := json.Unmarshal(b, &ci); err != nil || ci.Key != w.key || ci.Status == "" {
		return ci, fmt.Errorf("%w: GET %s: not a connector's info: %.200s", errNoAPI, route, b)
	}
	return ci, nil
}

// apiMetrics is what the metrics endpoint says: the connector's errors counter and the
// runtime's running gauge of its kind (-1 = absent). served is false when the endpoint
// answers 404.
type apiMetrics struct {
	served          bool
	errors, running float64
}

func (w apiWatch) metrics(ctx context.Context) (apiMetrics, error) {
	m := apiMetrics{errors: -1, running: -1}
	code, b, err := httpGet(ctx, "http://"+w.addr+"/metrics")
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
		case fs[0] == "iggy_connectors_"+w.kind+"_running":
			m.running = v
		case strings.HasPrefix(fs[0], "iggy_connector_errors_total{") && strings.Contains(fs[0], `connector_key="`+w.key+`"`):
			m.errors = v
		}
	}
	return m, nil
}

// stopped waits until one reading shows the connector stopped: status "error" or
// "stopped" with a last_error, and, when metrics are served, its errors counted and none of
// its kind running. The API must answer with a connector's info within apiStartLimit;
// unsupported is set when it does not (off, or shaped unlike Iggy's). observed describes
// the last reading; err says why it never showed the connector stopped.
func (w apiWatch) stopped(ctx context.Context) (observed string, unsupported, err error) {
	ci, apiErr := w.info(ctx)
	for deadline := time.Now().Add(apiStartLimit); apiErr != nil; ci, apiErr = w.info(ctx) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", apiErr, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A runtime that restarts a stopped connector shows it running again for a moment:
	// wait for one reading in which both the status and the metrics show it stopped.
	var m apiMetrics
	noun := strings.TrimSuffix(w.kind, "s")
	err = w.waitFor(ctx, "the HTTP API to show the "+noun+" stopped", func() bool {
		if ci, apiErr = w.info(ctx); apiErr != nil {
			return false
		}
		if m, apiErr = w.metrics(ctx); apiErr != nil {
			return false
		}
		stopped := (ci.Status == "error" || ci.Status == "stopped") && ci.LastError != nil && ci.LastError.Message != ""
		return stopped && (!m.served || m.errors >= 1 && m.running == 0)
	})
	if err != nil && apiErr != nil {
		err = fmt.Errorf("%w (last reading: %w)", err, apiErr)
	}
	obs := fmt.Sprintf("status %q", ci.Status)
	if ci.LastError != nil {
		obs += fmt.Sprintf(", last_error %q", oneLine(ci.LastError.Message))
	}
	if m.served {
		obs += fmt.Sprintf("; metrics: errors %g, %s running %g", m.errors, w.kind, m.running)
	} else {
		obs += "; metrics endpoint not served"
	}
	if err != nil {
		obs += "; " + err.Error()
	}
	return obs, nil, err
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
	obs, noAPI, err := apiWatch{addr: f.http, kind: "sinks", key: f.key, waitFor: f.wait}.stopped(ctx)
	if noAPI != nil {
		return unsupported(expected, noAPI)
	}
	_ = p.term(20 * time.Second)
	t := f.tally()
	return verdict(expected, obs, err == nil && t.clean(), t)
}
