package configjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/ferryio/ferry/connect/config"
)

// BodyFile is the File of the *config.Error values [provider.Local.CreateSink] and
// [provider.Local.CreateSource] return for a bad request body; their Key is the JSON field.
const BodyFile = "request body"

// bodyKeys lists the keys of one JSON object of a create body that are written to the file.
// A nil value takes the key's value whole; a non-nil one is a nested object (for an array,
// each of its elements) with those keys. Other keys are ignored, as upstream's serde does.
type bodyKeys map[string]bodyKeys

var (
	retryKeys      = bodyKeys{"max_retries": nil, "initial_backoff": nil, "max_backoff": nil}
	restartKeys    = bodyKeys{"max_restarts": nil, "initial_backoff": nil, "max_backoff": nil}
	deadLetterKeys = bodyKeys{"stream": nil, "topic": nil}
	commonKeys     = bodyKeys{
		"enabled": nil, "name": nil, "path": nil, "transforms": nil, "plugin_config_format": nil,
		"plugin_config": nil, "verbose": nil, "benchmark": nil,
		"on_failure": nil, "retry": retryKeys, "dead_letter": deadLetterKeys, "restart": restartKeys,
	}
	sinkBodyKeys = withKeys(commonKeys, bodyKeys{
		"streams": {"stream": nil, "topics": nil, "schema": nil, "avro_schema_json": nil, "avro_schema_path": nil,
			"batch_length": nil, "poll_interval": nil, "consumer_group": nil},
		"offset_commit": nil, "shutdown_timeout": nil, "max_in_flight": nil,
		"commit": {"interval": nil, "delay": nil, "max_uncommitted": nil},
	})
	sourceBodyKeys = withKeys(commonKeys, bodyKeys{
		"streams": {"stream": nil, "topic": nil, "schema": nil, "avro_schema_json": nil, "avro_schema_path": nil,
			"batch_length": nil, "linger_time": nil},
		"max_in_flight": nil,
	})
	requiredBodyKeys = []string{"enabled", "name", "path", "streams"}
)

func withKeys(a, b bodyKeys) bodyKeys {
	out := bodyKeys{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func bodyError(key, format string, args ...any) *config.Error {
	return &config.Error{File: BodyFile, Key: key, Msg: fmt.Sprintf(format, args...), Err: config.ErrInvalidConfig}
}

// fileHeader leads a file written for a create body, so that type, key and version come
// first; the other keys follow in name order.
type fileHeader struct {
	Type    config.ConnectorType `toml:"type"`
	Key     string               `toml:"key"`
	Enabled any                  `toml:"enabled"`
	Version uint64               `toml:"version"`
	Name    any                  `toml:"name"`
	Path    any                  `toml:"path"`
}

// bodyToTOML turns a CreateSinkConfig or CreateSourceConfig JSON body into the connector file
// for (typ, key, version). Only JSON syntax, required keys and nulls are checked here; the
// file's parser checks the rest.
func BodyToTOML(typ config.ConnectorType, key string, version uint64, body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, bodyError("", "not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bodyError("", "not valid JSON: data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, bodyError("", "want a JSON object")
	}
	for _, k := range requiredBodyKeys {
		if obj[k] == nil {
			return nil, bodyError(k, "required")
		}
	}
	keys := sinkBodyKeys
	if typ == config.TypeSource {
		keys = sourceBodyKeys
	}
	picked, err := pickBody(obj, keys, "")
	if err != nil {
		return nil, err
	}
	rest := picked.(map[string]any)
	h := fileHeader{Type: typ, Key: key, Enabled: rest["enabled"], Version: version, Name: rest["name"], Path: rest["path"]}
	delete(rest, "enabled")
	delete(rest, "name")
	delete(rest, "path")
	head, err := toml.Marshal(h)
	if err != nil {
		return nil, bodyError("", "cannot write as TOML: %v", err)
	}
	tail, err := toml.Marshal(rest)
	if err != nil {
		return nil, bodyError("", "cannot write as TOML: %v", err)
	}
	if len(rest) == 0 {
		return head, nil
	}
	return append(append(head, '\n'), tail...), nil
}

// pickBody returns v with only the keys in keys (nil: v whole), each converted for TOML. A
// null for a listed key is left out, as absent; a null inside a value taken whole is an error.
func pickBody(v any, keys bodyKeys, path string) (any, error) {
	if keys == nil {
		return tomlValue(v, path)
	}
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, sub := range keys {
			e, ok := v[k]
			if !ok || e == nil {
				continue
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			c, err := pickBody(e, sub, p)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := pickBody(e, keys, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return tomlValue(v, path) // the wrong type: the parser names it
}

// tomlValue converts a decoded JSON value for go-toml: integers to int64 (floats otherwise);
// a null is an error naming path, since a TOML file cannot hold one.
func tomlValue(v any, path string) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, bodyError(path, "null cannot be written to a connector file; leave the key out")
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, bodyError(path, "number %s out of range", v)
		}
		return f, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := tomlValue(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := tomlValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}

// asBodyError turns an error from parsing the file written for a body into one about the
// body: the same key (the JSON field has the TOML key's name) and message.
func AsBodyError(err error) error {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: %w", config.ErrInvalidConfig, err)
	}
	msg := strings.NewReplacer("TOML ", "JSON ", "into a table", "into an object").Replace(ce.Msg)
	return &config.Error{File: BodyFile, Key: ce.Key, Env: ce.Env, Msg: msg, Err: config.ErrInvalidConfig}
}

// ConnectorFromJSON reads body, a connector config in the JSON form of the HTTP API
// (Iggy's SinkConfig or SourceConfig, or a create body: enabled, name, path and streams
// required), as the config of connector (typ, key, version), with the environment
// overrides of env (nil for none). It returns a *Sink or a *Source whose File is file. It is
// how a remote config provider's answers are read: the same keys, checks and defaults as a
// connector file. An invalid body is an *config.Error with File file whose Key is the JSON field,
// wrapping [config.ErrInvalidConfig].
func ConnectorFromJSON(typ config.ConnectorType, key string, version uint64, body []byte, file string, env []string) (any, error) {
	data, err := BodyToTOML(typ, key, version, body)
	if err == nil {
		var c any
		if c, err = config.ParseConnectorData(file, data, env); err == nil {
			return c, nil
		}
		err = AsBodyError(err)
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		ce.File = file
	}
	return nil, err
}
