package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// preflight runs the sink's Preflight on cfg: its errors one per line, "" for none.
func preflight(t *testing.T, cfg map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return joined(New().Preflight(ctxT(t), raw))
}

func joined(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	return errors.Join(errs...).Error()
}

// seen is what an endpoint received: each request's method, body length and token.
type seen struct {
	mu   sync.Mutex
	reqs []string
}

func (s *seen) add(r *nethttp.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, fmt.Sprintf("%s %d %s", r.Method, len(body), r.Header.Get("Authorization")))
}

func (s *seen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// TestHTTPPreflight: a HEAD without a body, with the configured headers, reaches the
// endpoint; a 404 or 405 to it passes (a POST-only route), 401 names headers, 503 the URL;
// with health_check_enabled the health check's method and success_status_codes decide.
func TestHTTPPreflight(t *testing.T) {
	var got seen
	status := map[string]int{"/hook": nethttp.StatusMethodNotAllowed, "/missing": nethttp.StatusNotFound,
		"/locked": nethttp.StatusUnauthorized, "/down": nethttp.StatusServiceUnavailable, "/health": nethttp.StatusInternalServerError}
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		got.add(r)
		w.WriteHeader(status[r.URL.Path])
	}))
	t.Cleanup(srv.Close)
	headers := map[string]string{"Authorization": "Bearer tok-secret"}
	for _, path := range []string{"/hook", "/missing"} {
		if e := preflight(t, map[string]any{"url": srv.URL + path, "headers": headers}); e != "" {
			t.Errorf("%s: %s", path, e)
		}
	}
	if want := []string{"HEAD 0 Bearer tok-secret", "HEAD 0 Bearer tok-secret"}; fmt.Sprint(got.all()) != fmt.Sprint(want) {
		t.Errorf("the endpoint received %q, want %q", got.all(), want)
	}
	e := preflight(t, map[string]any{"url": srv.URL + "/locked", "headers": headers})
	want := fmt.Sprintf("plugin_config.url: HEAD %s/locked answered 401 Unauthorized: the server refuses the credentials sent; set the right ones in plugin_config.headers (an Authorization header, a key)", srv.URL)
	if e != want {
		t.Errorf("401:\n got %s\nwant %s", e, want)
	}
	if strings.Contains(e, "tok-secret") {
		t.Errorf("the error shows the token: %s", e)
	}
	e = preflight(t, map[string]any{"url": srv.URL + "/down"})
	want = fmt.Sprintf("plugin_config.url: HEAD %s/down answered 503 Service Unavailable: the server (or a proxy before it) is up, but what serves the URL is not", srv.URL)
	if e != want {
		t.Errorf("503:\n got %s\nwant %s", e, want)
	}
	e = preflight(t, map[string]any{"url": srv.URL + "/health", "health_check_enabled": true, "health_check_method": "GET"})
	want = fmt.Sprintf("plugin_config.health_check_enabled: the health check GET %s/health answered 500, not one of success_status_codes [200 201 202 204]: fix the endpoint, or health_check_method or success_status_codes", srv.URL)
	if e != want {
		t.Errorf("health check:\n got %s\nwant %s", e, want)
	}
	if e := preflight(t, map[string]any{"url": srv.URL + "/health", "health_check_enabled": true, "success_status_codes": []int{200, 500}}); e != "" {
		t.Errorf("health check with 500 a success: %s", e)
	}
	if n := len(got.all()); n != 6 {
		t.Errorf("%d requests, want 6", n)
	}
	for _, r := range got.all() {
		if !strings.HasPrefix(r, "HEAD 0") && !strings.HasPrefix(r, "GET 0") {
			t.Errorf("a request that may write: %s", r)
		}
	}
}

// TestHTTPPreflightReach: a certificate the system does not trust names
// tls_danger_accept_invalid_certs (and passes with it), https:// to a plain server, a
// closed port and a name that does not resolve each name the URL and the fix.
func TestHTTPPreflightReach(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(nethttp.HandlerFunc(func(nethttp.ResponseWriter, *nethttp.Request) {}))
	t.Cleanup(tlsSrv.Close)
	e := preflight(t, map[string]any{"url": tlsSrv.URL + "/hook"})
	want := fmt.Sprintf("plugin_config.url: HEAD %s/hook: tls: failed to verify certificate: x509: certificate signed by unknown authority: the server's certificate is not valid here: give the server one the system trusts for that host name, or set tls_danger_accept_invalid_certs = true (development only)", tlsSrv.URL)
	if e != want {
		t.Errorf("untrusted certificate:\n got %s\nwant %s", e, want)
	}
	if e := preflight(t, map[string]any{"url": tlsSrv.URL + "/hook", "tls_danger_accept_invalid_certs": true}); e != "" {
		t.Errorf("with tls_danger_accept_invalid_certs: %s", e)
	}
	plain := httptest.NewServer(nethttp.HandlerFunc(func(nethttp.ResponseWriter, *nethttp.Request) {}))
	t.Cleanup(plain.Close)
	https := "https://" + strings.TrimPrefix(plain.URL, "http://")
	e = preflight(t, map[string]any{"url": https})
	want = fmt.Sprintf("plugin_config.url: HEAD %s: http: server gave HTTP response to HTTPS client: the server does not speak TLS on that port: use http://, or the server's TLS port", https)
	if e != want {
		t.Errorf("https to a plain server:\n got %s\nwant %s", e, want)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	e = preflight(t, map[string]any{"url": "http://" + dead + "/hook"})
	want = fmt.Sprintf("plugin_config.url: HEAD http://%s/hook: dial tcp %s: connect: connection refused: check the URL's host and port, and that the server runs", dead, dead)
	if e != want {
		t.Errorf("closed port:\n got %s\nwant %s", e, want)
	}
	e = preflight(t, map[string]any{"url": "http://ferry-check.invalid/hook"})
	if !strings.HasPrefix(e, "plugin_config.url: HEAD http://ferry-check.invalid/hook: dial tcp: lookup ferry-check.invalid") ||
		!strings.HasSuffix(e, ": check the URL's host name") {
		t.Errorf("a name that does not resolve: %s", e)
	}
}
