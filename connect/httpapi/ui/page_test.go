package ui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/ferryio/ferry/internal/browsertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAPI answers the JSON routes the page reads with contract-shaped bodies (contract:
// GET /sinks, /sources, /{kind}s/{key}/status; POST pause, resume, restart), so the page
// can be tested without a runtime. Each status read of sink "out" advances its counters.
type fakeAPI struct {
	key string // required api-key header; empty = none

	mu        sync.Mutex
	paused    bool
	delivered int64
	posts     []string // "POST /sinks/out/pause", ...
	keysSeen  []string // api-key headers of the JSON requests
}

func (f *fakeAPI) posted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.posts...)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keysSeen = append(f.keysSeen, r.Header.Get("api-key"))
	if f.key != "" && r.Header.Get("api-key") != f.key {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": "unauthorized", "reason": "invalid api key"})
		return
	}
	route := r.Method + " " + r.URL.Path
	switch route {
	case "GET /sinks":
		writeJSON(w, http.StatusOK, []any{
			info("out", "file out", "builtin:file", "running", nil),
			info("broken", "broken sink", "/plugins/libbroken.so", "error", lastError("consume: target unavailable")),
		})
	case "GET /sources":
		writeJSON(w, http.StatusOK, []any{info("gen", "generator", "builtin:random", "running", nil)})
	case "GET /sinks/out/status":
		f.delivered += 250
		writeJSON(w, http.StatusOK, map[string]any{
			"key": "out", "kind": "sink", "name": "file out", "id": 1, "status": "running", "paused": f.paused,
			"restart": map[string]any{"restarts": 0, "total": 0, "max_restarts": 5, "next_retry": nil, "gave_up": false},
			"stats":   sinkStats(f.delivered+10, f.delivered, f.delivered-40),
			"partitions": []any{
				partition(0, "owned", 1999, 1950, f.paused),
				partition(1, "draining", -1, -1, f.paused),
			},
		})
	case "GET /sinks/broken/status":
		writeJSON(w, http.StatusOK, map[string]any{
			"key": "broken", "kind": "sink", "name": "broken sink", "id": 7, "status": "error", "paused": false,
			"last_error": lastError("consume: target unavailable"),
			"restart":    map[string]any{"restarts": 2, "total": 3, "max_restarts": 5, "next_retry": time.Now().Add(30 * time.Second).UnixMicro(), "gave_up": false},
			"stats":      sinkStats(0, 0, 0),
			"partitions": []any{map[string]any{"stream": "qs", "topic": "events", "partition_id": 0, "state": "not_owned",
				"polled": -1, "delivered": -1, "done": -1, "stored": -1, "current_offset": 1999, "lag": 2000,
				"pending": 0, "uncommitted": 0, "paused": false}},
		})
	case "GET /sources/gen/status":
		writeJSON(w, http.StatusOK, map[string]any{
			"key": "gen", "kind": "source", "name": "generator", "id": 2, "status": "running",
			"restart": map[string]any{"restarts": 0, "total": 1, "max_restarts": 0, "next_retry": nil, "gave_up": false},
			"stats": map[string]any{"produced": 5000, "sent": 4990, "acked": 4990, "send_errors": 0, "failed_batches": 0,
				"retries": 0, "state_errors": 0, "dead_lettered": 4, "skipped": 5, "decode_errors": 1},
		})
	case "POST /sinks/out/pause", "POST /sinks/out/resume":
		f.posts = append(f.posts, route)
		f.paused = strings.HasSuffix(route, "/pause")
		w.WriteHeader(http.StatusNoContent)
	case "POST /sources/gen/restart":
		f.posts = append(f.posts, route)
		w.WriteHeader(http.StatusNoContent)
	case "POST /sinks/broken/pause":
		f.posts = append(f.posts, route)
		writeJSON(w, http.StatusConflict, map[string]any{"code": "sink_not_running", "reason": "sink broken is not running"})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"code": "error", "reason": "no route " + route})
	}
}

func info(key, name, path, status string, lastErr any) map[string]any {
	m := map[string]any{"id": 1, "key": key, "name": name, "path": path, "enabled": true, "status": status}
	if lastErr != nil {
		m["last_error"] = lastErr
	}
	return m
}

func lastError(msg string) map[string]any {
	return map[string]any{"message": msg, "timestamp": time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC).UnixMicro()}
}

// sinkStats are a sink's stats; of the polled − delivered messages, 7 were dead-lettered
// and 3 skipped (2 of those 10 failed decode) when polled > 0.
func sinkStats(polled, delivered, committed int64) map[string]any {
	var dead, skipped, decode int64
	if polled > 0 {
		dead, skipped, decode = 7, 3, 2
	}
	return map[string]any{"polled": polled, "delivered": delivered, "committed": committed, "consume_errors": 0,
		"failed_batches": 0, "dead_lettered": dead, "skipped": skipped, "decode_errors": decode, "stores": 3, "store_errors": 0,
		"stores_refused": 0, "commits_accepted": 3, "commits_rejected": 0, "retries": 0, "filtered": 0}
}

func partition(id int, state string, current, stored int64, paused bool) map[string]any {
	lag := current - stored
	return map[string]any{"stream": "qs", "topic": "events", "partition_id": id, "state": state,
		"polled": current, "delivered": current, "done": stored, "stored": stored, "current_offset": current,
		"lag": lag, "pending": 0, "uncommitted": lag, "paused": paused}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// serve mounts the page under prefix+"/ui/" (prefix stripped, as the API server mounts
// Handler) and the fake API under prefix.
func serve(t *testing.T, prefix string, api *fakeAPI) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(prefix+"/ui/", http.StripPrefix(prefix+"/ui", Handler()))
	mux.Handle(prefix+"/", http.StripPrefix(prefix, api))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + prefix + "/ui/"
}

// Selectors and expressions the tests share.
const (
	outRow    = `tr[data-kind="sink"][data-key="out"]`
	brokenRow = `tr[data-kind="sink"][data-key="broken"]`
	genRow    = `tr[data-kind="source"][data-key="gen"]`
)

func text(sel string) string {
	return `(document.querySelector(` + jsString(sel) + `)?.textContent ?? null)`
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func textIs(sel, want string) string { return text(sel) + ` === ` + jsString(want) }

func noJSErrors(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	if errs := b.JSErrors(); len(errs) > 0 {
		t.Fatalf("JavaScript errors on the page:\n%s", strings.Join(errs, "\n"))
	}
}

// TestPageRendersAndActs loads the page in a real browser against the fake API (mounted
// under a path prefix, as behind a reverse proxy) and checks every rendered field of a
// sink, its partitions (a sink in error's too) and a source, with the dead-lettered,
// skipped and decode-error counts, then that Pause, Resume and Restart POST their
// routes and the rows follow the new state, and that a refused action is reported.
func TestPageRendersAndActs(t *testing.T) {
	api := &fakeAPI{}
	url := serve(t, "/proxy/ferry", api)
	b := browsertest.Start(t)
	b.Run(t, 20*time.Second, chromedp.Navigate(url))

	const wait = 10 * time.Second
	b.WaitTrue(t, wait, "sink out running", textIs(outRow+" > .status", "running"))
	for sel, want := range map[string]string{
		outRow + " > .key":           "out",
		outRow + " > .name":          "file out",
		outRow + " > .paused":        "no",
		outRow + " > .restarts":      "0/5",
		outRow + " > .next-retry":    "—",
		outRow + " > .last-error":    "",
		brokenRow + " > .status":     "error",
		brokenRow + " > .last-error": "consume: target unavailable",
		brokenRow + " > .restarts":   "2/5",
		genRow + " > .status":        "running",
		genRow + " > .name":          "generator",
		genRow + " > .produced":      "5,000",
		genRow + " > .sent":          "4,990",
		genRow + " > .restarts":      "0",
		// Why fewer were delivered (sent) than polled (produced).
		outRow + " > .dead-lettered":    "7",
		outRow + " > .skipped":          "3",
		outRow + " > .decode-errors":    "2",
		brokenRow + " > .dead-lettered": "0",
		genRow + " > .dead-lettered":    "4",
		genRow + " > .skipped":          "5",
		genRow + " > .decode-errors":    "1",
		// A sink in error still shows its partitions' lag.
		`tr[data-partitions-for="broken"] tr[data-partition="0"] > .lag`:         "2,000",
		`tr[data-partitions-for="broken"] tr[data-partition="0"] > .state`:       "not_owned",
		`tr[data-partitions-for="out"] tr[data-partition="0"] > .current-offset`: "1999",
		`tr[data-partitions-for="out"] tr[data-partition="0"] > .stored`:         "1950",
		`tr[data-partitions-for="out"] tr[data-partition="0"] > .lag`:            "49",
		`tr[data-partitions-for="out"] tr[data-partition="0"] > .uncommitted`:    "49",
		`tr[data-partitions-for="out"] tr[data-partition="0"] > .paused`:         "no",
		`tr[data-partitions-for="out"] tr[data-partition="0"] > .state`:          "owned",
		`tr[data-partitions-for="out"] tr[data-partition="1"] > .current-offset`: "—",
		`tr[data-partitions-for="out"] tr[data-partition="1"] > .state`:          "draining",
	} {
		b.WaitTrue(t, wait, sel+" = "+want, textIs(sel, want))
	}
	b.WaitTrue(t, wait, "next retry of broken", `/^in \d+s \(/.test(`+text(brokenRow+" > .next-retry")+`)`)
	// The fake delivers 250 messages between two reads about a second apart.
	b.WaitTrue(t, wait, "a throughput for out", `/^[1-9][0-9,]*$/.test(`+text(outRow+" > .rate")+`)`)
	b.WaitTrue(t, wait, "a zero throughput for broken", textIs(brokenRow+" > .rate", "0.0"))
	b.WaitTrue(t, wait, "pause enabled, resume disabled",
		`!document.querySelector('`+outRow+` button.pause').disabled && document.querySelector('`+outRow+` button.resume').disabled`)

	b.Run(t, wait, chromedp.Click(chromedp.CSS(outRow+" button.pause")))
	b.WaitTrue(t, wait, "out paused", `document.querySelector('`+outRow+`').dataset.paused === "true"`)
	b.WaitTrue(t, wait, "paused cell", textIs(outRow+" > .paused", "paused"))
	b.WaitTrue(t, wait, "partition 0 paused", textIs(`tr[data-partitions-for="out"] tr[data-partition="0"] > .paused`, "paused"))
	b.WaitTrue(t, wait, "notice", textIs("#notice", "Paused sink out."))
	b.WaitTrue(t, wait, "resume enabled", `!document.querySelector('`+outRow+` button.resume').disabled`)

	b.Run(t, wait, chromedp.Click(chromedp.CSS(outRow+" button.resume")))
	b.WaitTrue(t, wait, "out resumed", `document.querySelector('`+outRow+`').dataset.paused === "false"`)

	b.Run(t, wait, chromedp.Click(chromedp.CSS(genRow+" button.restart")))
	b.WaitTrue(t, wait, "restart notice", textIs("#notice", "Restarted source gen."))

	b.Run(t, wait, chromedp.Click(chromedp.CSS(brokenRow+" button.pause")))
	b.WaitTrue(t, wait, "refusal reported",
		textIs("#notice", "Pause sink broken failed: 409 sink_not_running: sink broken is not running"))

	want := []string{"POST /sinks/out/pause", "POST /sinks/out/resume", "POST /sources/gen/restart", "POST /sinks/broken/pause"}
	if got := api.posted(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("POSTs %q, want %q", got, want)
	}
	if !browsertest.Eval[bool](t, b, `document.querySelector("#auth").hidden`) {
		t.Fatal("the API key form is shown, but the API needs no key")
	}
	noJSErrors(t, b)
}

// TestPageAsksForAPIKey: the API answers 401 until the page sends the right api-key
// header; the page shows its key form, and after the key is entered it renders the rows
// and sends the key with every request.
func TestPageAsksForAPIKey(t *testing.T) {
	api := &fakeAPI{key: "s3cret"}
	url := serve(t, "", api)
	b := browsertest.Start(t)
	b.Run(t, 20*time.Second, chromedp.Navigate(url))

	const wait = 10 * time.Second
	b.WaitTrue(t, wait, "the key form", `!document.querySelector("#auth").hidden`)
	b.WaitTrue(t, wait, "the key prompt", textIs("#auth-message", "The API needs an API key."))
	b.Run(t, wait,
		chromedp.SendKeys(chromedp.CSS("#api-key"), "wrong"),
		chromedp.Click(chromedp.CSS(`#auth button[type="submit"]`)))
	b.WaitTrue(t, wait, "the refusal", textIs("#auth-message", "The API refused the API key; enter another."))
	b.WaitTrue(t, wait, "the form again", `!document.querySelector("#auth").hidden`)

	b.Run(t, wait,
		chromedp.SendKeys(chromedp.CSS("#api-key"), "s3cret"),
		chromedp.Click(chromedp.CSS(`#auth button[type="submit"]`)))
	b.WaitTrue(t, wait, "sink out running", textIs(outRow+" > .status", "running"))
	b.WaitTrue(t, wait, "form hidden", `document.querySelector("#auth").hidden`)
	if stored := browsertest.Eval[string](t, b, `sessionStorage.getItem("ferry.apiKey")`); stored != "s3cret" {
		t.Fatalf("sessionStorage holds %q", stored)
	}

	b.Run(t, wait, chromedp.Click(chromedp.CSS(outRow+" button.pause")))
	b.WaitTrue(t, wait, "out paused", `document.querySelector('`+outRow+`').dataset.paused === "true"`)
	api.mu.Lock()
	seen := api.keysSeen
	api.mu.Unlock()
	last := seen[len(seen)-1]
	if last != "s3cret" {
		t.Fatalf("last request carried api-key %q", last)
	}
	noJSErrors(t, b)
}

// At 1400 px (the browser's window) the connectors' tables were wider than the page and
// their Actions column was cut off: every cell, the action buttons included, must now end
// inside the viewport.
func TestPageFitsAt1400px(t *testing.T) {
	url := serve(t, "", &fakeAPI{})
	b := browsertest.Start(t)
	b.Run(t, 20*time.Second, chromedp.Navigate(url))
	b.WaitTrue(t, 10*time.Second, "sink out running", textIs(outRow+" > .status", "running"))
	const overflow = `[...document.querySelectorAll("table.connectors > thead th, table.connectors > tbody > tr > td, td.actions button")]
		.filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
		.map(e => (e.className || e.tagName) + " " + e.textContent.trim().slice(0, 20) + " ends at " + Math.round(e.getBoundingClientRect().right))`
	if got := browsertest.Eval[[]string](t, b, overflow); len(got) > 0 {
		t.Errorf("at a viewport of %d px these end outside it: %q", browsertest.Eval[int](t, b, "document.documentElement.clientWidth"), got)
	}
}

// Without JavaScript the page said only "Loading…": a <noscript> names the command and
// the JSON routes that show the same.
func TestPageWithoutJavaScript(t *testing.T) {
	body, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	const want = "<noscript><p class=\"banner\">This page needs JavaScript. The same figures: <code>ferry status --url URL</code> on a terminal, or the JSON of <code>GET /sinks</code>, <code>GET /sources</code> and <code>GET /sinks/{key}/offsets</code>.</p></noscript>"
	if !strings.Contains(string(body), want) {
		t.Errorf("index.html lacks %s", want)
	}
}
