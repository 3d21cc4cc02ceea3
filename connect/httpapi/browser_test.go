package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/internal/browsertest"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
)

// attackPage is a page of another loopback origin that tries to drive the keyless API at
// API: a no-cors fetch without a body (stop), one with a text body (stop), and a form
// POST into an iframe (pause). window.done counts the attempts the browser finished.
const attackPage = `<!doctype html><html><body>
<iframe name="target" id="target"></iframe>
<form id="f" method="POST" action="API/sinks/nsink/pause" target="target"><input name="a" value="b"></form>
<script>
window.done = 0;
const finish = () => { window.done++; };
fetch("API/sinks/nsink/stop", {method: "POST", mode: "no-cors"}).then(finish, finish);
fetch("API/sinks/nsink/stop", {method: "POST", mode: "no-cors", body: "x"}).then(finish, finish);
document.getElementById("target").addEventListener("load", finish, {once: true});
document.getElementById("f").submit();
</script></body></html>`

// TestBrowserCrossOriginRefused drives a real headless Chromium. The status page, served
// by the keyless API itself, pauses and resumes a sink (its POSTs carry its own origin).
// Then a page on another loopback port, the attack that once stopped the sink, sends a
// no-cors fetch and a form POST: the browser delivers all three to the API (its log shows
// each refused as cross_origin_refused), and the sink keeps running, not paused.
func TestBrowserCrossOriginRefused(t *testing.T) {
	b := browsertest.Start(t)
	e := newEnv(t)
	logs := &syncbuf.Buffer{}
	a := e.serve(func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const wait = 20 * time.Second
	row := `tr[data-kind="sink"][data-key="nsink"]`
	b.Run(t, wait, chromedp.Navigate(a.base+"/ui/"))
	b.WaitTrue(t, wait, "sink nsink running on the page", `document.querySelector('`+row+` > .status')?.textContent === "running"`)
	b.Run(t, wait, chromedp.Click(chromedp.CSS(row+" button.pause")))
	testkit.WaitFor(t, "nsink paused by the status page", func() bool { return e.status(connect.KindSink, "nsink").Paused })
	b.WaitTrue(t, wait, "resume enabled", `!document.querySelector('`+row+` button.resume').disabled`)
	b.Run(t, wait, chromedp.Click(chromedp.CSS(row+" button.resume")))
	testkit.WaitFor(t, "nsink resumed by the status page", func() bool { return !e.status(connect.KindSink, "nsink").Paused })

	// The attacker's page: same host, another port, so another origin.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := strings.ReplaceAll(attackPage, "API", a.base)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	b.Run(t, wait, chromedp.Navigate("http://"+ln.Addr().String()+"/"))
	b.WaitTrue(t, wait, "the page's three attempts finished", `window.done === 3`)
	refused := func(path string) int {
		return strings.Count(logs.String(), "method=POST path="+path+" status=403 code=cross_origin_refused")
	}
	testkit.WaitFor(t, "the API to refuse the two fetches and the form, or the sink to stop", func() bool {
		st := e.status(connect.KindSink, "nsink")
		return (refused("/sinks/nsink/stop") == 2 && refused("/sinks/nsink/pause") == 1) || st.State != connect.StateRunning || st.Paused
	})
	e.wantRunning("nsink")
	if stop, pause := refused("/sinks/nsink/stop"), refused("/sinks/nsink/pause"); stop != 2 || pause != 1 {
		t.Fatalf("refused %d stops and %d pauses, want 2 and 1", stop, pause)
	}
}
