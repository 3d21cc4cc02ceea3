package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ferryio/ferry/connect/config"
)

// cors answers [http.cors] the way Iggy's runtime does (tower-http's CorsLayer): every
// OPTIONS request is a preflight, answered 200 with an empty body before the api-key
// check; other requests get the origin, credentials and exposed headers added to their
// answer.
type cors struct {
	anyOrigin      bool     // allowed_origins starts with "*"
	origins        []string // else the exact origins allowed (empty: none)
	methods        string   // Access-Control-Allow-Methods, "" = not sent
	headers        string   // Access-Control-Allow-Headers, "" = not sent
	expose         string   // Access-Control-Expose-Headers, "" = not sent
	credentials    bool
	privateNetwork bool
}

// corsMethods are the method names allowed_methods accepts (case-insensitive), as Iggy's.
var corsMethods = []string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "CONNECT", "PATCH", "TRACE"}

// newCORS checks c (Iggy panics at startup on what is an error here) and builds the
// layer.
func newCORS(c config.CORS) (*cors, error) {
	out := &cors{credentials: c.AllowCredentials, privateNetwork: c.AllowPrivateNetwork}
	var methods []string
	for _, m := range c.AllowedMethods {
		if m == "" {
			continue
		}
		up := strings.ToUpper(m)
		if !slices.Contains(corsMethods, up) {
			return nil, fmt.Errorf("httpapi: http.cors.allowed_methods: invalid HTTP method %q (want one of %s)", m, strings.Join(corsMethods, ", "))
		}
		methods = append(methods, up)
	}
	out.methods = strings.Join(methods, ",")
	if len(c.AllowedOrigins) > 0 && c.AllowedOrigins[0] == "*" {
		out.anyOrigin = true
	} else {
		for _, o := range c.AllowedOrigins {
			if !validHeaderValue(o) {
				return nil, fmt.Errorf("httpapi: http.cors.allowed_origins: %q is not a valid header value", o)
			}
			out.origins = append(out.origins, o)
		}
	}
	var err error
	if out.headers, err = headerList("allowed_headers", c.AllowedHeaders); err != nil {
		return nil, err
	}
	if out.expose, err = headerList("exposed_headers", c.ExposedHeaders); err != nil {
		return nil, err
	}
	if out.credentials && out.anyOrigin {
		return nil, errors.New("httpapi: http.cors: allow_credentials = true cannot be combined with allowed_origins = [\"*\"]")
	}
	return out, nil
}

// headerList joins the non-empty header names of list with ",", lower-cased as
// tower-http sends them.
func headerList(field string, list []string) (string, error) {
	var names []string
	for _, h := range list {
		if h == "" {
			continue
		}
		if !validToken(h) {
			return "", fmt.Errorf("httpapi: http.cors.%s: %q is not a valid header name", field, h)
		}
		names = append(names, strings.ToLower(h))
	}
	return strings.Join(names, ","), nil
}

// validToken reports whether s is an HTTP token (a header name).
func validToken(s string) bool {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return s != ""
}

// validHeaderValue reports whether s may be sent as a header value.
func validHeaderValue(s string) bool {
	for _, c := range []byte(s) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func (c *cors) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		origin := r.Header.Get("Origin")
		if c.credentials {
			h.Set("Access-Control-Allow-Credentials", "true")
		}
		if c.privateNetwork && r.Header.Get("Access-Control-Request-Private-Network") == "true" {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		switch {
		case c.anyOrigin:
			h.Set("Access-Control-Allow-Origin", "*")
		default:
			// The answer depends on the request's origin.
			h.Add("Vary", "origin")
			if origin != "" && slices.Contains(c.origins, origin) {
				h.Set("Access-Control-Allow-Origin", origin)
			}
		}
		if r.Method == http.MethodOptions {
			if c.methods != "" {
				h.Set("Access-Control-Allow-Methods", c.methods)
			}
			if c.headers != "" {
				h.Set("Access-Control-Allow-Headers", c.headers)
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if c.expose != "" {
			h.Set("Access-Control-Expose-Headers", c.expose)
		}
		next.ServeHTTP(w, r)
	})
}
