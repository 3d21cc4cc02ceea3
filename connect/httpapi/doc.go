// Package httpapi is Ferry's HTTP API: Iggy's connectors runtime API (the same routes,
// JSON shapes, status codes and error codes, so existing clients work unchanged) plus
// Ferry's additions (connector status, offsets, pause/resume, stop) and the status page.
// docs/http-api.md describes every route.
//
// What it promises:
//   - every route but "/", "/health" and the page's static files (GET /ui/...) needs the
//     configured api-key header when http.api_key is set; the comparison is constant-time;
//   - a non-loopback listen address is refused when no api_key is set;
//   - without an api_key, a request for a host that is not loopback is refused, and so is a
//     state-changing request of another origin or with a body that is not JSON (guard.go:
//     no DNS rebinding, no cross-site request forgery);
//   - no answer holds a secret: connector configs are rendered with secret-looking
//     plugin_config values redacted, and the runtime config is never served;
//   - a connection is bounded in time (headers, whole request, answer, idle) and in number
//     (limits.go: Limits), so slow or many clients cannot hold the listener;
//   - the server stops when the context given to Serve ends (within a second).
//
// It reads the runtime through the Runtime interface (connect.Runtime implements it) and
// connector config versions through ConfigStore (connect/provider's Local or HTTP), rendered
// in connect/configjson's JSON forms.
//
// Must not import: server, connectors, cmd (internal/archtest). The runtime never
// imports this package.
package httpapi
