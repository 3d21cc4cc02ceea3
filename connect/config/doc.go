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
// and an unknown `.active_versions.toml` version are reported (the last as a warning).
//
// Its one job is reading and checking configuration. [ReadDir] gives every version of every
// connector of a config_dir to connect/provider, which serves and writes them (and talks to
// the http config provider, whose `[connectors]` keys are checked here);
// connect/configjson holds the HTTP API's JSON forms. [RenderPluginConfig] renders a
// connector's plugin_config in its formats, and [RedactSecrets] hides secrets in them.
//
// It does no network I/O and starts no goroutines. It may import only the standard library,
// go-toml, go-yaml (for rendering) and Ferry's sdk package; never connect, iggy, server or
// connectors.
package config
