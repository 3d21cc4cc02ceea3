package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// recorder is a config API that records the requests it gets and answers every one
// with a valid, empty set of active configs.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, r.Clone(context.Background()))
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"sinks": {}, "sources": {}}`))
}

func (rc *recorder) requests() []*http.Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*http.Request(nil), rc.reqs...)
}

// serveOn starts h on addr (host:0), over TLS when tls is true.
func serveOn(t *testing.T, addr string, h http.Handler, tls bool) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// redirector answers every request with status and a Location of to + the request's
// path; it counts what it got.
func redirector(to string, status int, got *recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.mu.Lock()
		got.reqs = append(got.reqs, r.Clone(context.Background()))
		got.mu.Unlock()
		http.Redirect(w, r, to+r.URL.Path, status)
	})
}

// TestHTTPProviderRefusesRedirects: a config API that redirects (to another host, from
// https to http, within its own origin, a create answered 307) gets one request and no
// more; the host it points to gets none, so the api-key header never leaves base_url's
// origin. The error names the Location and why it was refused; nothing is retried, and
// the refusal is logged without the key. Before, Go's client followed each redirect
// with every request header, Api-Key and Authorization included, in clear text after
// https → http.
func TestHTTPProviderRefusesRedirects(t *testing.T) {
	other := &recorder{}
	elsewhere := serveOn(t, "127.0.0.2:0", other, false) // another host
	plain := serveOn(t, "127.0.0.1:0", other, false)     // the same host, plain http
	const fix = "the config provider follows no redirect (set connectors.base_url, or the operation's url_templates, to where the API answers)"

	cases := []struct {
		name   string
		tls    bool
		to     string // the Location's origin ("" = the API's own)
		status int
		call   func(p *HTTP) error
		method string
		path   string
		why    string
	}{
		{name: "another host", to: elsewhere.URL, status: http.StatusFound,
			call: func(p *HTTP) error { _, err := p.Load(context.Background()); return err }, method: "GET", path: "/configs/active",
			why: "it leads to another origin (" + elsewhere.URL + "), which would receive the request headers; "},
		{name: "https to http", tls: true, to: plain.URL, status: http.StatusMovedPermanently,
			call: func(p *HTTP) error { _, _, err := p.Scan(); return err }, method: "GET", path: "/configs/active",
			why: "it leads from https to http, where the request headers would travel in clear text; "},
		{name: "create to another host", to: elsewhere.URL, status: http.StatusTemporaryRedirect,
			call: func(p *HTTP) error {
				_, err := p.CreateSink("k", []byte(`{"enabled": true, "name": "n", "path": "builtin:null", "streams": [{"stream": "s", "topics": ["t"], "schema": "json"}]}`))
				return err
			}, method: "POST", path: "/sinks/k/configs",
			why: "it leads to another origin (" + elsewhere.URL + "), which would receive the request headers; "},
		{name: "same origin", status: http.StatusSeeOther,
			call: func(p *HTTP) error { return p.SetActiveSink("k", 2) }, method: "PUT", path: "/sinks/k/configs/active"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(other.requests())
			api := &recorder{}
			var srv *httptest.Server
			var to string
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { redirector(to, tc.status, api).ServeHTTP(w, r) })
			srv = serveOn(t, "127.0.0.1:0", h, tc.tls)
			to = tc.to
			if to == "" {
				to = srv.URL + "/v2"
			}
			c := settings(srv.URL, false)
			c.RequestHeaders["Authorization"] = "Bearer s3cret-api-key-42"
			p, logged := newProvider(t, c)
			if tc.tls {
				p.client.Transport = srv.Client().Transport // trusts the test certificate
			}

			err := tc.call(p)
			want := "config provider request failed: " + tc.method + " " + srv.URL + tc.path + ": HTTP " +
				strconv.Itoa(tc.status) + ": redirect to " + to + tc.path + " refused: " + tc.why + fix
			if !errors.Is(err, ErrProviderRequest) || err.Error() != want {
				t.Fatalf("err %v\nwant %s", err, want)
			}
			if n := len(api.requests()); n != 1 {
				t.Fatalf("the API got %d requests, want 1 (a redirect is not retried)", n)
			}
			if got := other.requests()[before:]; len(got) != 0 {
				t.Fatalf("the redirect's target got %d requests (api-key %q, authorization %q)", len(got),
					got[0].Header.Get("Api-Key"), got[0].Header.Get("Authorization"))
			}
			if r := api.requests()[0]; r.Header.Get("Api-Key") != "s3cret-api-key-42" {
				t.Fatalf("the API itself got no api-key: %v", r.Header)
			}
			out := logged.String()
			if !strings.Contains(out, `level=WARN msg="config provider: redirect refused" method=`+tc.method) || !strings.Contains(out, "status="+strconv.Itoa(tc.status)) {
				t.Fatalf("the refusal is not logged:\n%s", out)
			}
			mustNotContainSecret(t, "the logs", out)
		})
	}
}
