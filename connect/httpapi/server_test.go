package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
)

func TestAPIKey(t *testing.T) {
	a := newEnv(t).serve(func(o *Options) {
		o.HTTP.APIKey = testKey
		o.HTTP.Metrics.Enabled = true
	})
	// Public: "/", "/health", and the status page's files.
	a.do("GET", "/", "").want(t, http.StatusOK)
	a.do("GET", "/health", "").want(t, http.StatusOK)
	if r := a.do("GET", "/ui/", "").want(t, http.StatusOK); !strings.Contains(string(r.body), "<") {
		t.Fatalf("GET /ui/ body %q, want the page", r.body)
	}
	if r := a.do("GET", "/ui", "").want(t, http.StatusMovedPermanently); r.header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui Location %q", r.header.Get("Location"))
	}
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/stats", ""}, {"GET", "/sinks", ""}, {"GET", "/sources", ""}, {"GET", "/sinks/nsink", ""},
		{"GET", "/sinks/nsink/configs", ""}, {"GET", "/sinks/nsink/configs/plugin", ""}, {"GET", "/sinks/nsink/status", ""},
		{"POST", "/sinks/nsink/restart", ""}, {"POST", "/sinks/nsink/pause", ""}, {"PUT", "/sinks/nsink/offsets", "{}"},
		{"GET", "/metrics", ""}, {"POST", "/ui/", ""}, {"GET", "/nope", ""},
	} {
		for _, hdr := range [][]string{nil, {"api-key", "wrong"}, {"api-key", testKey + "x"}, {"Authorization", testKey}} {
			r := a.do(rt.method, rt.path, rt.body, hdr...)
			if r.status != http.StatusUnauthorized || len(r.body) != 0 {
				t.Errorf("%s %s with %v: %d %q, want 401 and no body", rt.method, rt.path, hdr, r.status, r.body)
			}
		}
	}
	a.do("GET", "/sinks", "", "api-key", testKey).want(t, http.StatusOK)
	a.do("GET", "/stats", "", "api-key", testKey).want(t, http.StatusOK)
	a.do("GET", "/sinks/nope", "", "api-key", testKey).wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	if r := a.do("GET", "/metrics", "", "api-key", testKey); r.status == http.StatusNotFound {
		t.Log("metrics endpoint answers 404: connect/metrics' Handler is still a stub")
	} else {
		r.want(t, http.StatusOK)
	}
}

func TestNoAPIKeyOpen(t *testing.T) {
	a := newEnv(t).serve(nil)
	a.do("GET", "/sinks", "").want(t, http.StatusOK)
	a.do("GET", "/sinks", "", "api-key", "anything").want(t, http.StatusOK)
	// Metrics disabled: no route.
	a.do("GET", "/metrics", "").want(t, http.StatusNotFound)
}

func TestLoopbackRule(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		addr, key string
		ok        bool
	}{
		{"127.0.0.1:8081", "", true},
		{"127.8.9.10:0", "", true},
		{"localhost:8081", "", true},
		{"LOCALHOST:8081", "", true},
		{"[::1]:8081", "", true},
		{"0.0.0.0:8081", "", false},
		{":8081", "", false},
		{"[::]:8081", "", false},
		{"192.168.1.10:8081", "", false},
		{"example.com:8081", "", false},
		{"0.0.0.0:8081", testKey, true},
		{":8081", testKey, true},
	} {
		_, err := New(Options{Runtime: e.rt, HTTP: config.HTTP{Address: tc.addr, APIKey: config.Secret(tc.key)}})
		if tc.ok != (err == nil) {
			t.Errorf("New(address %q, key %t) = %v, want ok %t", tc.addr, tc.key != "", err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "http.address") {
			t.Errorf("error %q does not name http.address", err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	e := newEnv(t)
	if _, err := New(Options{HTTP: config.HTTP{Address: "127.0.0.1:0"}}); err == nil {
		t.Error("New without a Runtime succeeded")
	}
	base := config.HTTP{Address: "127.0.0.1:0", CORS: config.CORS{Enabled: true, AllowedMethods: []string{"GET"}, AllowedOrigins: []string{"*"}}}
	for name, mod := range map[string]func(*config.HTTP){
		"bad method":          func(h *config.HTTP) { h.CORS.AllowedMethods = []string{"GET", "FETCH"} },
		"bad header":          func(h *config.HTTP) { h.CORS.AllowedHeaders = []string{"content type"} },
		"bad exposed header":  func(h *config.HTTP) { h.CORS.ExposedHeaders = []string{"x:y"} },
		"bad origin":          func(h *config.HTTP) { h.CORS.AllowedOrigins = []string{"http://a\nb"} },
		"credentials and any": func(h *config.HTTP) { h.CORS.AllowCredentials = true },
		"tls files missing": func(h *config.HTTP) {
			h.TLS = config.HTTPTLS{Enabled: true, CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem"}
		},
		"metrics not a path":      func(h *config.HTTP) { h.Metrics = config.Metrics{Enabled: true, Endpoint: "metrics"} },
		"metrics clashes /stats":  func(h *config.HTTP) { h.Metrics = config.Metrics{Enabled: true, Endpoint: "/stats"} },
		"metrics clashes /health": func(h *config.HTTP) { h.Metrics = config.Metrics{Enabled: true, Endpoint: "/health"} },
	} {
		h := base
		h.CORS.AllowedMethods = append([]string(nil), base.CORS.AllowedMethods...)
		mod(&h)
		if _, err := New(Options{Runtime: e.rt, HTTP: h}); err == nil {
			t.Errorf("%s: New succeeded", name)
		} else if !strings.Contains(err.Error(), "http.") {
			t.Errorf("%s: error %q does not name the key", name, err)
		}
	}
	// A method's case does not matter; CORS disabled checks nothing.
	h := base
	h.CORS.AllowedMethods = []string{"get", "Patch", ""}
	if _, err := New(Options{Runtime: e.rt, HTTP: h}); err != nil {
		t.Errorf("lower-case methods: %v", err)
	}
	h.CORS = config.CORS{AllowedMethods: []string{"FETCH"}}
	if _, err := New(Options{Runtime: e.rt, HTTP: h}); err != nil {
		t.Errorf("disabled CORS: %v", err)
	}
}

func TestCORSPreflight(t *testing.T) {
	a := newEnv(t).serve(func(o *Options) {
		o.HTTP.APIKey = testKey
		o.HTTP.CORS = config.CORS{Enabled: true, AllowedMethods: []string{"GET", "post", "PUT", "DELETE"},
			AllowedOrigins: []string{"http://ui.example", "http://other.example"}, AllowedHeaders: []string{"content-type", "API-Key"},
			ExposedHeaders: []string{"", "X-Ferry"}, AllowCredentials: true, AllowPrivateNetwork: true}
	})
	// A preflight needs no api key and reaches no route.
	r := a.do("OPTIONS", "/sinks/nsink/restart", "", "Origin", "http://ui.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Private-Network", "true").want(t, http.StatusOK)
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":          "http://ui.example",
		"Access-Control-Allow-Methods":         "GET,POST,PUT,DELETE",
		"Access-Control-Allow-Headers":         "content-type,api-key",
		"Access-Control-Allow-Credentials":     "true",
		"Access-Control-Allow-Private-Network": "true",
		"Vary":                                 "origin",
		"Access-Control-Expose-Headers":        "",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("preflight %s = %q, want %q", name, got, want)
		}
	}
	if len(r.body) != 0 {
		t.Errorf("preflight body %q", r.body)
	}
	// An origin not in the list gets no Allow-Origin; no private-network header unless asked.
	r = a.do("OPTIONS", "/sinks", "", "Origin", "http://evil.example", "Access-Control-Request-Method", "GET").want(t, http.StatusOK)
	if got := r.header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("unlisted origin allowed: %q", got)
	}
	if got := r.header.Get("Access-Control-Allow-Private-Network"); got != "" {
		t.Errorf("private network without the request header: %q", got)
	}
	// A simple request: origin, credentials and exposed headers; the api key still applies.
	r = a.do("GET", "/sinks", "", "Origin", "http://other.example", "api-key", testKey).want(t, http.StatusOK)
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":      "http://other.example",
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Expose-Headers":    "x-ferry",
		"Access-Control-Allow-Methods":     "",
		"Vary":                             "origin",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("GET %s = %q, want %q", name, got, want)
		}
	}
	r = a.do("GET", "/sinks", "", "Origin", "http://other.example").want(t, http.StatusUnauthorized)
	if got := r.header.Get("Access-Control-Allow-Origin"); got != "http://other.example" {
		t.Errorf("401 Allow-Origin = %q", got)
	}
}

func TestCORSAnyOrigin(t *testing.T) {
	a := newEnv(t).serve(func(o *Options) {
		def := config.DefaultRuntime().HTTP.CORS
		def.Enabled = true
		o.HTTP.CORS = def
	})
	r := a.do("OPTIONS", "/sinks", "", "Origin", "http://anything.example", "Access-Control-Request-Method", "GET").want(t, http.StatusOK)
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":      "*",
		"Access-Control-Allow-Methods":     "GET,POST,PUT,DELETE",
		"Access-Control-Allow-Headers":     "content-type",
		"Access-Control-Allow-Credentials": "",
		"Vary":                             "",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("preflight %s = %q, want %q", name, got, want)
		}
	}
	r = a.do("GET", "/health", "").want(t, http.StatusOK)
	if got := r.header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("GET Allow-Origin = %q", got)
	}
}

func TestCORSDisabled(t *testing.T) {
	a := newEnv(t).serve(nil)
	r := a.do("OPTIONS", "/sinks", "", "Origin", "http://x.example", "Access-Control-Request-Method", "GET")
	if r.status != http.StatusMethodNotAllowed || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("OPTIONS without CORS: %d %v", r.status, r.header)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferry test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	a := newEnv(t).serve(func(o *Options) {
		o.HTTP.TLS = config.HTTPTLS{Enabled: true, CertFile: certFile, KeyFile: keyFile}
	})
	plain := a.base
	a.base = "https://" + strings.TrimPrefix(a.base, "http://")
	tr := a.client.Transport.(*http.Transport)
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	a.do("GET", "/health", "").want(t, http.StatusOK)
	a.do("GET", "/sinks", "").want(t, http.StatusOK)

	// Plain HTTP to the TLS port is refused by the TLS layer.
	c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	if resp, err := c.Get(plain + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the TLS listener")
		}
	}
	// A client that does not trust the certificate fails the handshake.
	u := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}, Timeout: 5 * time.Second}
	defer u.CloseIdleConnections()
	if resp, err := u.Get(a.base + "/health"); err == nil {
		resp.Body.Close()
		t.Fatal("untrusted certificate accepted")
	}
}

func TestServeStopsWithContext(t *testing.T) {
	e := newEnv(t)
	srv, err := New(Options{Runtime: e.rt, HTTP: config.HTTP{Address: "127.0.0.1:0"}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != "127.0.0.1:0" {
		t.Fatalf("Addr before Serve = %q", srv.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	testkit.WaitFor(t, "listening", func() bool { return srv.Addr() != "127.0.0.1:0" })
	c := &http.Client{Transport: &http.Transport{}}
	resp, err := c.Get("http://" + srv.Addr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.CloseIdleConnections()
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ListenAndServe = %v, want nil after ctx ended", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ListenAndServe did not return")
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("stop took %s", d)
	}
	if _, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
		t.Fatal("still listening after the stop")
	}
}

// TestShutdownBounded: a connection that never finishes its request does not hold the
// stop past the one-second grace.
func TestShutdownBounded(t *testing.T) {
	e := newEnv(t)
	srv, err := New(Options{Runtime: e.rt, HTTP: config.HTTP{Address: "127.0.0.1:0"}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n")); err != nil { // headers never end
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return")
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("stop took %s, want at most about a second", d)
	}
}
