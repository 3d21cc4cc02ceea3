package provider

import "errors"

// ErrConfigNotFound is wrapped by the [Local] and [HTTP] methods when the connector config asked
// for (a key, a version, or the version pinned in .active_versions.toml) has no file.
var ErrConfigNotFound = errors.New("connector config not found")

// ErrProviderRequest is wrapped by the errors of a request to a remote config provider
// that failed: unreachable, timed out, answered with an error status, or with an error at
// its response.error_path (the HTTP API answers them 500 http_request_failed, as upstream).
var ErrProviderRequest = errors.New("config provider request failed")
