package ferrycli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// gatedSink is a sink whose Open waits until the test closes release: a target slow to
// answer while the runtime starts.
type gatedSink struct {
	opening chan<- struct{}
	release <-chan struct{}
}

func (g gatedSink) Open(ctx context.Context, _ sdk.SinkEnv) error {
	g.opening <- struct{}{}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (gatedSink) Consume(context.Context, sdk.TopicMetadata, sdk.MessagesMetadata, []sdk.ConsumedMessage) error {
	return nil
}
func (gatedSink) Close(context.Context) error { return nil }

// TestHealthWaitsForTheConnectorsStart: while a connector is still opening, GET /health
// answers 503 (the API and the status page already answer); once every connector's first
// start ended it answers 200 and a sibling that opened is running. Iggy's runtime
// serves its API only after the connectors started, and its tests read the connectors'
// status as soon as /health answers.
func TestHealthWaitsForTheConnectorsStart(t *testing.T) {
	opening, release := make(chan struct{}, 1), make(chan struct{})
	reg := connectors.Registry()
	reg.AddSink("gated", func() sdk.Sink { return gatedSink{opening, release} }, sdk.ConfigSpec{AnyFields: true})
	gated := `type = "sink"
key = "zgated"
enabled = true
version = 0
name = "gated"
path = "builtin:gated"

[[streams]]
stream = "s"
topics = ["t"]
schema = "raw"
`
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	cfgPath, _, _, api := startRunWith(t, map[string]string{"zgated.toml": gated}, reg, func(string) bool {
		select {
		case <-opening:
			return true
		default:
			return false
		}
	})
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(api + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != http.StatusServiceUnavailable ||
		body != `{"reason":"starting: the connectors' first start has not ended","status":"unhealthy"}` {
		t.Errorf("/health while a sink opens: %d %s", code, body)
	}
	if code, body := get("/sinks/zgated/status"); code != http.StatusOK || !strings.Contains(body, `"status":"starting"`) {
		t.Errorf("the opening sink: %d %s", code, body)
	}
	if _, err := runControl(t, cfgPath, "health"); err == nil || err.Error() != `GET /health: 503 Service Unavailable: {"reason":"starting: the connectors' first start has not ended","status":"unhealthy"}` {
		t.Errorf("ferry health while a sink opens: %v", err)
	}
	close(release)
	released = true
	testkit.WaitFor(t, "/health to answer 200", func() bool {
		code, body := get("/health")
		return code == http.StatusOK && body == `{"status":"healthy"}`
	})
	if out, err := runControl(t, cfgPath, "health"); err != nil || out != "{\"status\":\"healthy\"}\n" {
		t.Errorf("ferry health once started: %q, %v", out, err)
	}
	for _, key := range []string{"out", "zgated"} {
		if code, body := get("/sinks/" + key + "/status"); code != http.StatusOK || !strings.Contains(body, `"status":"running"`) {
			t.Errorf("sink %s once /health answers: %d %s", key, code, body)
		}
	}
}
