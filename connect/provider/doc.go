// Package provider serves versioned connector configs to the runtime and to the HTTP API's
// configs routes from a remote HTTP API: [HTTP] is Iggy's http config provider
// ([connectors] config_type = "http"). It reads the active config of every connector at
// start ([HTTP.Load]) and at a reload ([HTTP.Scan]), a connector's active config at its
// restart, every version of a key, and creates, deletes and activates versions, each with
// upstream's request, response extraction (response.data_path, response.error_path),
// timeout and retries.
//
// Configs are parsed by connect/config, as connector files are. Header values
// (request_headers: an API key, typically) are never logged nor put in an error.
package provider
