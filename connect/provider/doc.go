// Package provider serves versioned connector configs to the runtime and to the HTTP API's
// configs routes, as Iggy's config providers do: [Local] keeps them as files in a
// config_dir (every version, the active one pinned in .active_versions.toml, writes made
// atomically); [HTTP] asks a remote config API ([connectors] config_type = "http") with
// upstream's requests, response extraction (response.data_path, response.error_path),
// timeout and retries. Both read the active configs at a reload (Scan), a connector's active
// config at its restart, every version of a key, and create, delete and activate versions.
//
// Configs are parsed by connect/config, as connector files are; create bodies are read with
// connect/configjson. Header values of the http provider (request_headers: an API key,
// typically) are never logged nor put in an error.
package provider
