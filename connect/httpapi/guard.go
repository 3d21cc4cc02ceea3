package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

// This file keeps other web pages away from an API without an api_key. A browser lets any
// page send requests to 127.0.0.1: a form or a no-cors fetch from another origin (CSRF), or
// a page whose own host name the attacker re-points at 127.0.0.1 (DNS rebinding, the
// browser then sends that name in Host). Without a key nothing else tells those requests
// from the operator's, so:
//
//   - every request must be addressed to a loopback host (127.0.0.0/8, ::1, localhost,
//     any port) or the host of http.address: a rebinding page's Host is its own name;
//   - a state-changing request (any method but GET, HEAD, OPTIONS) is refused unless its
//     Origin is listed in [http.cors] allowed_origins, or it comes from the API's own origin:
//     an Origin other than the API's, a Sec-Fetch-Site of cross-site, or same-site without
//     an Origin, is refused;
//   - a state-changing request with a body or a Content-Type must say JSON, so an HTML
//     form (or an old browser that sends no Origin) cannot reach a route.
//
// With an api_key set none of this applies: a page cannot add the api-key header to a
// cross-origin request unless [http.cors] allows it, a rebinding page does not know the
// key, and a keyed API is meant to be reached by names the runtime cannot list (DNS
// names, proxies). Routes that read a JSON body answer 415 without a JSON Content-Type in
// both cases.

// Error codes of the guard's answers (403).
const (
	codeHostNotAllowed     = "host_not_allowed"
	codeCrossOriginRefused = "cross_origin_refused"
)

// guard holds what the keyless checks compare against.
type guard struct {
	addrHost string   // the host of http.address, "" when it names none
	origins  []string // the exact origins of an enabled [http.cors] (never "*")
}

func newGuard(s *Server) *guard {
	g := &guard{addrHost: hostOnly(s.cfg.Address)}
	if s.cfg.CORS.Enabled {
		for _, o := range s.cfg.CORS.AllowedOrigins {
			if o != "" && o != "*" {
				g.origins = append(g.origins, o)
			}
		}
	}
	return g
}

// hostOnly is the host of a "host:port" or a bare host, without IPv6 brackets.
func hostOnly(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// hostAllowed reports whether a request's Host names this machine's loopback or the
// configured address.
func (g *guard) hostAllowed(hostport string) bool {
	host := hostOnly(hostport)
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") || (g.addrHost != "" && strings.EqualFold(host, g.addrHost)) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// safeMethod reports whether a method only reads.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkHost refuses a keyless API's request addressed to a host that is not loopback.
// It runs before everything else, CORS preflights included.
func (s *Server) checkHost(g *guard, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			s.writeError(w, r, &apiError{Status: http.StatusForbidden, Code: codeHostNotAllowed,
				Reason: fmt.Sprintf("Host %q is not allowed: without http.api_key the API answers only requests to 127.0.0.1, ::1, localhost or the host of http.address %q (set an api_key to serve other names)", r.Host, s.cfg.Address)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkOrigin refuses a keyless API's state-changing request that another site's page
// sent, and one whose body is not JSON. It runs after CORS (a preflight is answered
// first) and before the routes.
func (s *Server) checkOrigin(g *guard, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		if reason := g.crossOrigin(r); reason != "" {
			s.writeError(w, r, &apiError{Status: http.StatusForbidden, Code: codeCrossOriginRefused,
				Reason: reason + ": without http.api_key only pages of the API's own origin may change state (set an api_key, or list the page's origin in http.cors.allowed_origins)"})
			return
		}
		if (r.Header.Get("Content-Type") != "" || r.ContentLength != 0) && !isJSON(r) {
			rejectNotJSON(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin says why r comes from a page of another origin, or "" when it does not: a
// request without Origin and Sec-Fetch-Site is not a browser's (curl, ferry status). An
// origin listed in [http.cors] allowed_origins passes from any site: the operator chose it.
func (g *guard) crossOrigin(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin != "" && slices.Contains(g.origins, origin) {
		return ""
	}
	site := r.Header.Get("Sec-Fetch-Site")
	if site == "cross-site" {
		return fmt.Sprintf("Sec-Fetch-Site is cross-site (Origin %q)", origin)
	}
	if origin == "" {
		if site == "same-site" {
			// Another port or subdomain of this host, with no origin to compare.
			return "Sec-Fetch-Site is same-site and the request has no Origin"
		}
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(origin, scheme+"://"+r.Host) {
		return ""
	}
	return fmt.Sprintf("Origin %q is not the API's origin %q", origin, scheme+"://"+r.Host)
}

// rejectNotJSON is the 415 of a body that is not JSON, worded as axum's Json extractor.
func rejectNotJSON(w http.ResponseWriter) {
	rejection(w, http.StatusUnsupportedMediaType, "Expected request with `Content-Type: application/json`")
}
