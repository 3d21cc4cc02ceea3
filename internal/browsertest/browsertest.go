// Package browsertest drives a real headless Chromium for the tests of the status page
// (connect/httpapi/ui, tests/e2e). It is a test helper: only _test.go files import it.
//
// The browser is the one FERRY_CHROMIUM names (CI sets it, see .ci/run); when the
// variable is unset, /usr/bin/chromium; when that is missing too the test is skipped. A
// browser that is configured or present but does not start fails the test: a broken
// install must not pass as "skipped".
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ferryio/ferry/internal/syncbuf"
)

// EnvChromium names the environment variable with the browser's path.
const EnvChromium = "FERRY_CHROMIUM"

// DefaultPath is the browser used when EnvChromium is unset (Debian's chromium package).
const DefaultPath = "/usr/bin/chromium"

// startTimeout bounds the browser's start and its first blank page.
const startTimeout = 60 * time.Second

// Browser is one headless browser with one tab. Its methods fail the test on error; use
// them from the test's goroutine only.
type Browser struct {
	ctx    context.Context // the tab
	output *syncbuf.Buffer // the browser's stdout and stderr

	mu     sync.Mutex
	jsErrs []string // uncaught exceptions and console.error calls of the page
}

// Start launches the browser and opens a blank tab; the browser is closed when the test
// ends. See the package comment for which browser, and when the test is skipped.
func Start(t testing.TB) *Browser {
	t.Helper()
	path := os.Getenv(EnvChromium)
	if path == "" {
		if _, err := os.Stat(DefaultPath); err != nil {
			t.Skipf("no browser: %s is unset and %s is missing (.ci/run installs it)", EnvChromium, DefaultPath)
		}
		path = DefaultPath
	}
	b := &Browser{output: &syncbuf.Buffer{}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000),
		chromedp.CombinedOutput(b.output),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b.ctx = ctx
	// cancel kills the browser and waits for it; it must run once only (a second call
	// after a failed start waits for ever).
	stop := sync.OnceFunc(func() {
		cancel()
		cancelAlloc()
	})
	consoleDone := make(chan struct{})
	t.Cleanup(func() {
		stop()
		<-consoleDone
	})

	// The first action starts the browser; it runs on ctx itself (a timeout on the first
	// call's context would bound the browser's life), with a watchdog for the bound.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.Navigate("about:blank")) }()
	var err error
	select {
	case err = <-started:
	case <-time.After(startTimeout):
		stop()
		err = fmt.Errorf("no blank page within %s: %w", startTimeout, <-started)
	}
	if err != nil {
		close(consoleDone)
		t.Fatalf("browser %s (from %s) does not work: %v\n--- browser output:\n%s",
			path, source(), err, b.output.String())
	}
	messages := chromedp.Console(ctx)
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			b.record(m)
		}
	}()
	return b
}

func source() string {
	if os.Getenv(EnvChromium) != "" {
		return EnvChromium
	}
	return "the default path"
}

// record keeps the page's own errors: exceptions and console.error calls. Entries of the
// browser's log (Source set: a 401 or a missing favicon) are the network's, not the page's.
func (b *Browser) record(m chromedp.ConsoleMessage) {
	if m.Source != "" || (m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException) {
		return
	}
	b.mu.Lock()
	b.jsErrs = append(b.jsErrs, m.String())
	b.mu.Unlock()
}

// JSErrors returns the page's uncaught exceptions and console.error messages so far.
func (b *Browser) JSErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.jsErrs...)
}

// Run runs actions in the tab within timeout, failing the test on error.
func (b *Browser) Run(t testing.TB, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v%s", err, b.diagnostics())
	}
}

// Eval evaluates a JavaScript expression in b's page and returns its value, decoded from
// JSON into a T.
func Eval[T any](t testing.TB, b *Browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browser: evaluating %s: %v%s", expr, err, b.diagnostics())
	}
	return v
}

// WaitTrue evaluates the JavaScript expression expr every 50 ms until it is truthy,
// failing the test (with the page's text) when timeout passes first.
func (b *Browser) WaitTrue(t testing.TB, timeout time.Duration, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("browser: evaluating %s: %v%s", what, err, b.diagnostics())
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s%s", timeout, what, b.diagnostics())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// diagnostics describes the page for a failure message: its URL, its text and the
// JavaScript errors seen.
func (b *Browser) diagnostics() string {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Location())
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
	s := fmt.Sprintf("\n--- page %s:\n%s", url, text)
	if errs := b.JSErrors(); len(errs) > 0 {
		s += "\n--- JavaScript errors:\n" + strings.Join(errs, "\n")
	}
	return s
}

// Context returns the tab's chromedp context, for actions the methods do not cover
// (screenshots, other results). Derive a timeout from it; never cancel it.
func (b *Browser) Context() context.Context { return b.ctx }
