// Package config reads and checks Ferry's configuration files, which are the files of Iggy's
// Rust connectors runtime (`iggy-connectors`): the runtime `config.toml` ([ParseRuntime]) and
// the connector files of a `config_dir` ([LoadConnectors], [ParseSinkFile],
// [ParseSourceFile]), with the same defaults and the same `IGGY_CONNECTORS_*` environment
// overrides, plus Ferry's own keys (for sinks offset_commit, commit and shutdown_timeout; for
// sinks and sources on_failure, retry, dead_letter and restart) and the `[embedded]` runtime
// section.
//
// It promises:
//   - plain structs with typed fields (time.Duration, string enums with constants);
//   - every error about a file is an [*Error] naming the file, the key as a dotted path
//     (`streams[0].batch_length`) and the line (0 when the value came from the environment,
//     whose variable is then named);
//   - secrets (iggy.password, iggy.token, http.api_key) never appear in String(), in slog
//     output or in errors.
//
// Differences from upstream, on purpose: a numeric or boolean environment value for a string
// field is taken as text (upstream fails to load); an empty connector key, a zero batch_length
// and an unknown `.active_versions.toml` version are reported (the last as a warning). In the API's JSON forms,
// batch_length, poll_interval, linger_time and consumer_group give the value in effect where
// upstream echoes the file (null when unset), and a create body whose plugin_config holds a
// null is refused, since the TOML file written for it cannot hold one.
//
// [LocalProvider] serves a config_dir to the HTTP API's configs routes (versions, the active
// one, creating, deleting and pinning versions); [SinkJSON], [SourceJSON] and
// [RenderPluginConfig] give the API's JSON forms and plugin config renderings, with secrets
// redacted ([RedactSecrets]). [ConnectorFromJSON] reads a config in that JSON form, as a
// remote config provider (connect/provider) serves it; the `[connectors]` keys of the http
// provider are checked here, its requests are made there.
//
// It does no network I/O and starts no goroutines. It may import only the standard library,
// go-toml, go-yaml (for rendering) and Ferry's sdk package; never connect, iggy, server or
// connectors.
package config
