package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ferryio/ferry/internal/browsertest"
	"github.com/ferryio/ferry/internal/testkit"
)

// uiAPIKey is the [http] api_key of TestStatusPage's runtime.
const uiAPIKey = "e2e-key"

// enableHTTP turns on the HTTP API of the config.toml runtimeConfig wrote, at addr, with key.
func enableHTTP(t *testing.T, cfg, addr, key string) {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	off := "[http]\nenabled = false\n"
	if !strings.Contains(string(b), off) {
		t.Fatalf("%s has no %q", cfg, off)
	}
	on := fmt.Sprintf("[http]\nenabled = true\naddress = %q\napi_key = %q\n", addr, key)
	writeFile(t, cfg, strings.Replace(string(b), off, on, 1))
}

// apiGet GETs http://addr+path with the api key; it returns the status code and body, or
// code 0 when nothing answered.
func apiGet(t *testing.T, addr, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("api-key", uiAPIKey)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body
}

// sinkPaused reads GET /sinks/{key}/status and returns its status and paused fields.
func sinkPaused(t *testing.T, addr, key string) (string, bool) {
	t.Helper()
	code, body := apiGet(t, addr, "/sinks/"+key+"/status")
	if code != http.StatusOK {
		t.Fatalf("GET /sinks/%s/status: %d %s", key, code, body)
	}
	var st struct {
		Status string `json:"status"`
		Paused bool   `json:"paused"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("GET /sinks/%s/status: %v: %s", key, err, body)
	}
	return st.Status, st.Paused
}

// ferryStatus runs `ferry status` against the runtime's API and returns its output.
func ferryStatus(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(ferryBin, append([]string{"status", "--url", "http://" + addr, "--timeout", "5s"}, args...)...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestStatusPage drives the status page of a real `ferry run --embedded` (HTTP API on, with
// an api_key; a slow random source feeding a file sink) in headless Chromium:
//
//   - /ui/ loads without the key (the page is public) and asks for the key, because the
//     JSON routes answer 401 without it; once the key is entered the sink row shows status
//     "running", not paused;
//   - clicking the row's Pause button pauses the sink: the row's paused indicator turns on
//     (polled from the DOM: the change follows the POST and the next status read, no fixed
//     delay) and GET /sinks/out/status says "paused": true; `ferry status` shows it too;
//   - Resume turns it off again, and the page raised no JavaScript error.
//
// The browser is the one FERRY_CHROMIUM names (.ci/run sets it); see internal/browsertest.
func TestStatusPage(t *testing.T) {
	b := browsertest.Start(t)
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	// 200 msg/s for 5000 s: the pipeline keeps running through the test.
	writeFile(t, filepath.Join(conns, "source.toml"), randomSource("ui", "events", 1_000_000, 200, 20))
	writeFile(t, filepath.Join(conns, "sink.toml"), fileSink("ui", "events", "sink_controlled", filepath.Join(dir, "out.jsonl"), 20, 100000))
	cfg := runtimeConfig(t, dir, conns)
	addr := freeAddr(t)
	enableHTTP(t, cfg, addr, uiAPIKey)

	p := startFerry(t, "run", dir, nil, "run", "--config", cfg, "--embedded", "--progress", "0")
	testkit.WaitFor(t, "GET /health", func() bool {
		if p.exited() {
			t.Fatalf("run exited: %v", p.err)
		}
		code, body := apiGet(t, addr, "/health")
		return code == http.StatusOK && strings.Contains(string(body), `"healthy"`)
	})
	testkit.WaitFor(t, "sink out running with messages delivered", func() bool {
		code, body := apiGet(t, addr, "/sinks/out/status")
		var st struct {
			Status string `json:"status"`
			Stats  struct {
				Delivered int64 `json:"delivered"`
			} `json:"stats"`
		}
		return code == http.StatusOK && json.Unmarshal(body, &st) == nil && st.Status == "running" && st.Stats.Delivered > 0
	})

	const wait = 10 * time.Second
	row := `tr[data-kind="sink"][data-key="out"]`
	b.Run(t, 20*time.Second, chromedp.Navigate("http://"+addr+"/ui/"))
	b.WaitTrue(t, wait, "the API key form", `!document.querySelector("#auth").hidden`)
	b.Run(t, wait,
		chromedp.SendKeys(chromedp.CSS("#api-key"), uiAPIKey),
		chromedp.Click(chromedp.CSS(`#auth button[type="submit"]`)))
	b.WaitTrue(t, wait, `sink out "running"`, `document.querySelector('`+row+` > .status')?.textContent === "running"`)
	b.WaitTrue(t, wait, "sink out not paused", `document.querySelector('`+row+`').dataset.paused === "false"`)
	b.WaitTrue(t, wait, "source gen running", `document.querySelector('tr[data-kind="source"][data-key="gen"] > .status')?.textContent === "running"`)

	b.Run(t, wait, chromedp.Click(chromedp.CSS(row+" button.pause")))
	b.WaitTrue(t, wait, "sink out paused on the page", `document.querySelector('`+row+`').dataset.paused === "true"`+
		` && document.querySelector('`+row+` > .paused').textContent === "paused"`)
	if status, paused := sinkPaused(t, addr, "out"); status != "running" || !paused {
		t.Fatalf("after Pause the API says status %q paused %v, want running, paused", status, paused)
	}
	out, err := ferryStatus(t, addr, "--api-key", uiAPIKey)
	if err != nil {
		t.Fatalf("ferry status: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^sink +out +running \(paused\) `).MatchString(out) {
		t.Fatalf("ferry status does not show sink out paused:\n%s", out)
	}
	if out, err := ferryStatus(t, addr); err == nil || !strings.Contains(out, "the API needs --api-key") {
		t.Fatalf("ferry status without the key: %v\n%s", err, out)
	}

	b.Run(t, wait, chromedp.Click(chromedp.CSS(row+" button.resume")))
	b.WaitTrue(t, wait, "sink out resumed on the page", `document.querySelector('`+row+`').dataset.paused === "false"`)
	if status, paused := sinkPaused(t, addr, "out"); status != "running" || paused {
		t.Fatalf("after Resume the API says status %q paused %v, want running, not paused", status, paused)
	}
	if errs := b.JSErrors(); len(errs) > 0 {
		t.Fatalf("JavaScript errors on the page:\n%s", strings.Join(errs, "\n"))
	}
	p.stop(20 * time.Second)
}
