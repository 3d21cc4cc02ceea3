package config

import (
	"bytes"
	"fmt"

	"github.com/goccy/go-yaml"
	toml "github.com/pelletier/go-toml/v2"
)

// Content types of the rendered plugin config, per format.
const (
	ContentTypeJSON = "application/json"
	ContentTypeYAML = "application/yaml"
	ContentTypeTOML = "application/toml"
	ContentTypeText = "text/plain"
)

// RenderPluginConfig renders c's plugin_config, secrets redacted ([RedactSecrets]), for the
// API's GET …/configs/plugin: format is json, yaml, toml or text; "" means c's
// plugin_config_format, and toml when that is unset too. It returns the body and its content
// type (application/json, application/yaml, application/toml, text/plain).
//
// json is compact JSON with sorted keys. text is the same bytes as json, as Iggy's runtime
// renders it (the JSON text of the value, so a string plugin_config comes out quoted). toml
// needs plugin_config to be a table; a null inside it (which no connector file can hold) is
// left out.
//
// Errors: [ErrNoPluginConfig] when c has no plugin_config; an error wrapping
// [ErrInvalidConfig] for an unknown format, a plugin_config that is not JSON, or one the
// format cannot hold (toml of a non-table).
func RenderPluginConfig(c *Common, format string) (body []byte, contentType string, err error) {
	pc := bytes.TrimSpace(c.PluginConfig)
	if len(pc) == 0 || string(pc) == "null" {
		return nil, "", ErrNoPluginConfig
	}
	f := format
	if f == "" {
		f = c.PluginConfigFormat
	}
	if f == "" {
		f = "toml"
	}
	switch f {
	case "json", "yaml", "toml", "text":
	default:
		return nil, "", fmt.Errorf("%w: unknown plugin config format %q (want json, yaml, toml or text)", ErrInvalidConfig, f)
	}
	v, err := decodeJSON(pc)
	if err != nil {
		return nil, "", fmt.Errorf("%w: plugin_config of %s is not valid JSON: %w", ErrInvalidConfig, c.Key, err)
	}
	v = RedactSecrets(v)
	switch f {
	case "json", "text":
		b, err := compactJSON(v)
		if err != nil {
			return nil, "", fmt.Errorf("%w: plugin_config of %s: %w", ErrInvalidConfig, c.Key, err)
		}
		if f == "text" {
			return b, ContentTypeText, nil
		}
		return b, ContentTypeJSON, nil
	case "yaml":
		b, err := yaml.Marshal(nativeJSON(v))
		if err != nil {
			return nil, "", fmt.Errorf("%w: plugin_config of %s cannot be rendered as yaml: %w", ErrInvalidConfig, c.Key, err)
		}
		return b, ContentTypeYAML, nil
	default: // toml
		m, ok := v.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("%w: plugin_config of %s cannot be rendered as toml: it is not a table", ErrInvalidConfig, c.Key)
		}
		b, err := toml.Marshal(nativeJSON(m))
		if err != nil {
			return nil, "", fmt.Errorf("%w: plugin_config of %s cannot be rendered as toml: %w", ErrInvalidConfig, c.Key, err)
		}
		return b, ContentTypeTOML, nil
	}
}
