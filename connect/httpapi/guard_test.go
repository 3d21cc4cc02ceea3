package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
)

// hostReason is the reason of a keyless API's 403 to a request for host.
func hostReason(host string) string {
	return `Host "` + host + `" is not allowed: without http.api_key the API answers only requests to 127.0.0.1, ::1, localhost or the host of http.address "127.0.0.1:0" (set an api_key to serve other names)`
}

// crossReason is the reason of a keyless API's 403 to a state-changing request of another
// page.
func crossReason(why string) string {
	return why + ": without http.api_key only pages of the API's own origin may change state (set an api_key, or list the page's origin in http.cors.allowed_origins)"
}

// wantRunning fails unless the sink key still runs.
func (e *env) wantRunning(key string) {
	e.t.Helper()
	if st := e.status(connect.KindSink, key); st.State != connect.StateRunning || st.Paused {
		e.t.Fatalf("sink %s is %s (paused %t) after a refused request, want running", key, st.State, st.Paused)
	}
}

// TestKeylessRefusesForeignHost is the DNS-rebinding attack: a page whose host name the
// attacker points at 127.0.0.1 sends its own name in Host. Before the guard, the keyless
// API created a config for it (a path naming any shared library, run at the next restart).
func TestKeylessRefusesForeignHost(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	body := `{"enabled":true,"name":"evil","path":"/tmp/evil.so","streams":[{"stream":"s1","topics":["t1"],"schema":"json"}]}`
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:8081", "localhost.attacker.example",
		"127.0.0.1.nip.io", "0.0.0.0:8081", "[::]:8081", "10.0.0.1"} {
		a.do("GET", "/sinks", "", "Host", host).wantError(t, http.StatusForbidden, codeHostNotAllowed, hostReason(host))
		a.do("POST", "/sinks/evil/configs", body, "Host", host).wantError(t, http.StatusForbidden, codeHostNotAllowed, hostReason(host))
		a.do("POST", "/sinks/nsink/stop", "", "Host", host).wantError(t, http.StatusForbidden, codeHostNotAllowed, hostReason(host))
		// A CORS preflight too: the guard runs first.
		a.do("OPTIONS", "/sinks", "", "Host", host).wantError(t, http.StatusForbidden, codeHostNotAllowed, hostReason(host))
	}
	if m, _ := filepath.Glob(filepath.Join(e.dir, "sink_evil_*")); len(m) != 0 {
		t.Fatalf("a refused request wrote %v", m)
	}
	e.wantRunning("nsink")
	for _, host := range []string{"127.0.0.1", "127.0.0.1:8081", "127.9.9.9:1", "localhost", "LOCALHOST:8081", "[::1]:8081", "::1"} {
		a.do("GET", "/sinks", "", "Host", host).want(t, http.StatusOK)
	}
	// The host of http.address (loopback anyway when there is no key).
	b := e.serve(func(o *Options) { o.HTTP.Address = "127.0.0.7:8081" })
	b.do("GET", "/health", "", "Host", "127.0.0.7:8081").want(t, http.StatusOK)

	// With an api_key the key is the guard: a keyed API is reached by names the runtime
	// cannot list, and a rebinding page does not know the key.
	k := e.serve(func(o *Options) { o.HTTP.APIKey = testKey })
	k.do("GET", "/sinks", "", "Host", "api.example.com").want(t, http.StatusUnauthorized)
	k.do("GET", "/sinks", "", "Host", "api.example.com", "api-key", testKey).want(t, http.StatusOK)
}

// TestKeylessRefusesCrossOrigin is the CSRF attack: a page of another origin (another
// loopback port, another site) sends a state-changing request the browser lets through
// without a preflight: a no-cors fetch or a form. Before the guard it stopped the sink.
func TestKeylessRefusesCrossOrigin(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	own := a.base // http://127.0.0.1:PORT
	for _, tc := range []struct {
		hdr []string
		why string
	}{
		{[]string{"Origin", "http://127.0.0.1:9999"}, `Origin "http://127.0.0.1:9999" is not the API's origin "` + own + `"`},
		{[]string{"Origin", "http://evil.example"}, `Origin "http://evil.example" is not the API's origin "` + own + `"`},
		{[]string{"Origin", "null"}, `Origin "null" is not the API's origin "` + own + `"`},
		{[]string{"Origin", "https://" + strings.TrimPrefix(own, "http://")}, `Origin "https://` + strings.TrimPrefix(own, "http://") + `" is not the API's origin "` + own + `"`},
		{[]string{"Sec-Fetch-Site", "cross-site"}, `Sec-Fetch-Site is cross-site (Origin "")`},
		{[]string{"Sec-Fetch-Site", "cross-site", "Origin", own}, `Sec-Fetch-Site is cross-site (Origin "` + own + `")`},
		{[]string{"Sec-Fetch-Site", "same-site"}, "Sec-Fetch-Site is same-site and the request has no Origin"},
		{[]string{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:9999"}, `Origin "http://127.0.0.1:9999" is not the API's origin "` + own + `"`},
	} {
		a.do("POST", "/sinks/nsink/stop", "", tc.hdr...).wantError(t, http.StatusForbidden, codeCrossOriginRefused, crossReason(tc.why))
		a.do("POST", "/sinks/nsink/pause", "", tc.hdr...).wantError(t, http.StatusForbidden, codeCrossOriginRefused, crossReason(tc.why))
		a.do("DELETE", "/sinks/nsink/configs?version=2", "", tc.hdr...).wantError(t, http.StatusForbidden, codeCrossOriginRefused, crossReason(tc.why))
		a.do("PUT", "/sinks/nsink/configs/active", `{"version":2}`, tc.hdr...).wantError(t, http.StatusForbidden, codeCrossOriginRefused, crossReason(tc.why))
		// Reading stays open: a no-cors page cannot read the answer, and CORS decides for the rest.
		a.do("GET", "/sinks/nsink/status", "", tc.hdr...).want(t, http.StatusOK)
	}
	e.wantRunning("nsink")
	if _, err := os.Stat(filepath.Join(e.dir, "sink_nsink_2.toml")); err != nil {
		t.Fatalf("a refused DELETE removed version 2: %v", err)
	}

	// The page's own origin (the status page), and requests of no browser (curl), pass.
	a.do("POST", "/sinks/nsink/pause", "", "Origin", own, "Sec-Fetch-Site", "same-origin").want(t, http.StatusNoContent)
	a.do("POST", "/sinks/nsink/resume", "", "Origin", strings.ToUpper(own)).want(t, http.StatusNoContent)
	a.do("POST", "/sinks/nsink/pause", "", "Sec-Fetch-Site", "none").want(t, http.StatusNoContent)
	a.do("POST", "/sinks/nsink/resume", "").want(t, http.StatusNoContent)
	e.wantRunning("nsink")

	// An origin listed in [http.cors] allowed_origins may; "*" lets no page change state.
	c := e.serve(func(o *Options) {
		o.HTTP.CORS = config.CORS{Enabled: true, AllowedOrigins: []string{"http://ui.example"}, AllowedMethods: []string{"POST"}}
	})
	c.do("POST", "/sinks/nsink/pause", "", "Origin", "http://ui.example", "Sec-Fetch-Site", "cross-site").want(t, http.StatusNoContent)
	c.do("POST", "/sinks/nsink/resume", "", "Origin", "http://ui.example").want(t, http.StatusNoContent)
	c.do("POST", "/sinks/nsink/stop", "", "Origin", "http://other.example", "Sec-Fetch-Site", "cross-site").wantError(t,
		http.StatusForbidden, codeCrossOriginRefused, crossReason(`Sec-Fetch-Site is cross-site (Origin "http://other.example")`))
	star := e.serve(func(o *Options) {
		o.HTTP.CORS = config.CORS{Enabled: true, AllowedOrigins: []string{"*"}}
	})
	star.do("POST", "/sinks/nsink/stop", "", "Origin", "http://evil.example").wantError(t, http.StatusForbidden, codeCrossOriginRefused,
		crossReason(`Origin "http://evil.example" is not the API's origin "`+star.base+`"`))
	e.wantRunning("nsink")

	// With an api_key a page cannot send the key without CORS granting it: the key decides.
	k := e.serve(func(o *Options) { o.HTTP.APIKey = testKey })
	k.do("POST", "/sinks/nsink/stop", "", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site").want(t, http.StatusUnauthorized)
	k.do("POST", "/sinks/nsink/pause", "", "Origin", "http://evil.example", "api-key", testKey).want(t, http.StatusNoContent)
	k.do("POST", "/sinks/nsink/resume", "", "api-key", testKey).want(t, http.StatusNoContent)
	e.wantRunning("nsink")
}

// TestKeylessRefusesFormBodies: a form (or a no-cors fetch with a text body) is a simple
// request a browser sends cross-origin without a preflight; an old browser sends it without
// Origin. A state-changing request with a body or a Content-Type must say JSON.
func TestKeylessRefusesFormBodies(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	const notJSON = "Expected request with `Content-Type: application/json`"
	for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain;charset=UTF-8", "", "application/jsonx"} {
		for _, path := range []string{"/sinks/nsink/stop", "/sinks/nsink/pause", "/sources/gen/restart"} {
			a.do("POST", path, "a=b", "Content-Type", ct).wantText(t, http.StatusUnsupportedMediaType, notJSON)
			if ct != "" {
				a.do("POST", path, "", "Content-Type", ct).wantText(t, http.StatusUnsupportedMediaType, notJSON)
			}
		}
		a.do("PUT", "/sinks/nsink/offsets", offsetsBody1, "Content-Type", ct).wantText(t, http.StatusUnsupportedMediaType, notJSON)
		a.do("POST", "/sinks/evil/configs", `{}`, "Content-Type", ct).wantText(t, http.StatusUnsupportedMediaType, notJSON)
	}
	e.wantRunning("nsink")
	if st := e.status(connect.KindSource, "gen"); st.State != connect.StateRunning || st.Restart.Total != 0 {
		t.Fatalf("source gen after refused restarts: %s, %d restarts", st.State, st.Restart.Total)
	}
	// No body and no Content-Type (curl -X POST), or JSON: served.
	a.do("POST", "/sinks/nsink/pause", "").want(t, http.StatusNoContent)
	a.do("POST", "/sinks/nsink/resume", "{}", "Content-Type", "application/json; charset=utf-8").want(t, http.StatusNoContent)

	// With a key only the routes that read JSON want it (PUT offsets included).
	k := e.serve(func(o *Options) { o.HTTP.APIKey = testKey })
	k.do("PUT", "/sinks/nsink/offsets", offsetsBody1, "Content-Type", "text/plain", "api-key", testKey).wantText(t, http.StatusUnsupportedMediaType, notJSON)
	k.do("POST", "/sinks/nsink/pause", "", "Content-Type", "application/x-www-form-urlencoded", "api-key", testKey).want(t, http.StatusNoContent)
	k.do("POST", "/sinks/nsink/resume", "", "api-key", testKey).want(t, http.StatusNoContent)
}
