package config

import (
	"bytes"
	"encoding/json"
	"strings"
)

// secretKeyWords mark the object keys whose values [RedactSecrets] hides: a key is secret when
// its lower-cased name contains one of them.
var secretKeyWords = []string{"password", "passwd", "secret", "token", "api_key", "apikey", "credential",
	"private_key", "connection_string", "dsn", "auth"}

// Redacted replaces a secret value.
const Redacted = "***"

// isSecretKey reports whether an object key names a secret.
func isSecretKey(k string) bool {
	lk := strings.ToLower(k)
	for _, w := range secretKeyWords {
		if strings.Contains(lk, w) {
			return true
		}
	}
	return false
}

// RedactSecrets returns a copy of v, a decoded JSON value (maps, slices, scalars), in which the
// whole value of every object key whose lower-cased name contains password, passwd, secret,
// token, api_key, apikey, credential, private_key, connection_string, dsn or auth is
// [Redacted], in objects at every depth, including objects inside arrays. v is not changed.
func RedactSecrets(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if isSecretKey(k) {
				out[k] = Redacted
			} else {
				out[k] = RedactSecrets(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = RedactSecrets(e)
		}
		return out
	}
	return v
}

// decodeJSON decodes data keeping numbers as json.Number, so re-encoding keeps them exact.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// compactJSON encodes v as compact JSON with sorted keys and without HTML escaping, the
// form of Common.PluginConfig.
func compactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// redactedJSON returns the JSON document data with its secrets redacted; ok is false when
// data is not JSON.
func redactedJSON(data []byte) ([]byte, bool) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, false
	}
	b, err := compactJSON(RedactSecrets(v))
	return b, err == nil
}

// nativeJSON returns v with every json.Number turned into an int64 when it is an integer
// that fits, else a float64, for encoders that do not know json.Number (YAML, TOML).
func nativeJSON(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = nativeJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = nativeJSON(e)
		}
		return out
	}
	return v
}
