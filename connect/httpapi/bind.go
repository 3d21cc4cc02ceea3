package httpapi

// This file is where the API meets connect/config's provider: the sentinels a
// ConfigStore's errors are matched against, and the renderers of connector configs
// (secrets redacted by config's renderers).

import (
	"encoding/json"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/configjson"
	"github.com/ferryio/ferry/connect/provider"
)

// The ConfigStore's errors, matched with errors.Is.
var (
	errConfigNotFound = provider.ErrConfigNotFound
	errInvalidConfig  = config.ErrInvalidConfig
	errNoPluginConfig = config.ErrNoPluginConfig
	// errProviderRequest: a remote config provider failed (500 http_request_failed).
	errProviderRequest = provider.ErrProviderRequest
)

// renderSink renders a sink config as Iggy's SinkConfig JSON object, redacted.
func renderSink(s *config.Sink) ([]byte, error) { return json.Marshal(configjson.SinkJSON(s)) }

// renderSource renders a source config as Iggy's SourceConfig JSON object, redacted.
func renderSource(s *config.Source) ([]byte, error) { return json.Marshal(configjson.SourceJSON(s)) }

// renderPluginConfig renders c's plugin_config, redacted, in format (json, yaml, toml,
// text; "" = the connector's plugin_config_format, else toml) with its Content-Type.
func renderPluginConfig(c *config.Common, format string) ([]byte, string, error) {
	return config.RenderPluginConfig(c, format)
}

// The real parts the API is built over.
var (
	_ Runtime     = (*connect.Runtime)(nil)
	_ ConfigStore = (*provider.Local)(nil)
	_ ConfigStore = (*provider.HTTP)(nil)
)
