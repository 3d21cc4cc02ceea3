package ferrycli

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/httpapi"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

func TestMain(m *testing.M) {
	embeddedPasswordIterations = 1000 // servertest's cost (see the variable)
	goleak.VerifyTestMain(m)
}

// testRuntime is a real runtime without connectors over the embedded server.
func testRuntime(t *testing.T) *connect.Runtime {
	t.Helper()
	kit := iggykit.Start(t)
	rt := runkit.New(t, connect.Options{Connectors: &config.Connectors{}, Client: kit.Dial()})
	return rt
}

func TestStartAPI(t *testing.T) {
	rt := testRuntime(t)
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	rc := config.DefaultRuntime()
	rc.HTTP.Address = "127.0.0.1:0"
	ln, err := listenAPI(rc)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	url, stop, err := serveAPI(context.Background(), rc, ln, state, rt, nil, "0.5.0", nil, log)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="HTTP API started" address=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		stop()
		t.Fatalf("no start line with the address in %q", logs.String())
	}
	if got, err := readAPIURL(state); err != nil || got != url || url != "http://"+m[1] || strings.HasSuffix(m[1], ":0") {
		stop()
		t.Fatalf("http.url holds %q, %v; want %q, the bound address %s", got, err, url, m[1])
	}
	c := &http.Client{Transport: &http.Transport{}}
	resp, err := c.Get("http://" + m[1] + "/stats")
	if err != nil {
		stop()
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.CloseIdleConnections()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"connectors_runtime_version":"0.5.0"`) {
		t.Errorf("GET /stats: %d %s", resp.StatusCode, body)
	}
	stop()
	if resp, err := c.Get("http://" + m[1] + "/health"); err == nil {
		resp.Body.Close()
		t.Error("API still answers after stop")
	}
	if _, err := readAPIURL(state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("http.url after stop: %v; want it removed", err)
	}
}

func TestStartAPIDisabledAndRefused(t *testing.T) {
	rt := testRuntime(t)
	log := slog.New(slog.DiscardHandler)
	rc := config.DefaultRuntime()
	rc.HTTP.Enabled = false
	rc.HTTP.Address = "0.0.0.0:1" // not even checked when disabled
	ln, err := listenAPI(rc)
	if err != nil || ln != nil {
		t.Fatalf("disabled: %v, %v", ln, err)
	}
	_, stop, err := serveAPI(context.Background(), rc, nil, t.TempDir(), rt, nil, "", nil, log)
	if err != nil || stop == nil {
		t.Fatalf("disabled: %v", err)
	}
	stop()
	rc.HTTP.Enabled = true
	if err := httpapi.Validate(rc.HTTP); err == nil || !strings.Contains(err.Error(), "http.address") {
		t.Fatalf("non-loopback without api_key: %v", err)
	}
}
