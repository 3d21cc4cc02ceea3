package config

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"unicode"
)

// The one redaction rule of Ferry, used by every String, log and HTTP API path that
// shows configuration ([RedactSecrets], [Common.RedactedPluginConfig], the renderers):
//
//   - an object key names a secret when its lower-cased name contains one of
//     secretKeyWords, or one of its words (split at _ - . and camelCase) is one of
//     secretKeyParts (so "key", "api_key", "apiKey" and "secret_key" are secret, while
//     the well-known non-secret names in publicKeyNames stay visible); its whole value
//     is [Redacted], at every depth;
//   - in every other string, the password of a URL ("postgres://u:pw@h/db") and the
//     value of a password= / pwd= pair of a key-value DSN are [Redacted].
var secretKeyWords = []string{"password", "passwd", "secret", "token", "credential", "api_key", "apikey", "private_key",
	"connection_string", "connectionstring", "connection_uri", "connectionuri", "dsn", "auth"}

var secretKeyParts = map[string]bool{"key": true, "apikey": true, "pwd": true}

// publicKeyNames are keys with a "key" word that name data, not secrets.
var publicKeyNames = map[string]bool{"primary_key": true, "primary_keys": true, "partition_key": true,
	"message_key": true, "key_field": true, "sort_key": true, "routing_key": true, "foreign_key": true,
	"upsert_key": true,                      // builtin:postgres
	"stream_key": true, "stream_keys": true} // builtin:redis: stream names

// Redacted replaces a secret value.
const Redacted = "***"

// IsSecretKey reports whether an object key names a secret: its value is redacted
// wherever configuration is shown. Every plugin_config field a built-in connector declares
// secret (sdk.Fields.Secret) must be one (ferrycli TestSecretFieldsAreRedacted).
func IsSecretKey(k string) bool {
	lk := strings.ToLower(k)
	for _, w := range secretKeyWords {
		if strings.Contains(lk, w) {
			return true
		}
	}
	if publicKeyNames[lk] {
		return false
	}
	for _, part := range keyWords(k) {
		if secretKeyParts[part] {
			return true
		}
	}
	return false
}

// keyWords splits a key into lower-cased words at _ - . space and camelCase humps.
func keyWords(k string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range k {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ':
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		cur = append(cur, r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	flush()
	return words
}

// dsnPassword matches the password of a key-value DSN ("host=h password=pw").
var dsnPassword = regexp.MustCompile(`(?i)\b(password|pwd)\s*=\s*('[^']*'|"[^"]*"|[^\s;&]+)`)

// RedactString returns s with the password of every URL in it and every password=
// or pwd= value [Redacted]; other text is kept.
func RedactString(s string) string {
	if strings.Contains(s, "://") {
		fields := strings.Fields(s)
		for _, f := range fields {
			if !strings.Contains(f, "://") {
				continue
			}
			u, err := url.Parse(f)
			if err != nil || u.User == nil {
				continue
			}
			if _, has := u.User.Password(); !has {
				continue
			}
			u.User = url.UserPassword(u.User.Username(), Redacted)
			s = strings.Replace(s, f, strings.Replace(u.String(), url.QueryEscape(Redacted), Redacted, 1), 1)
		}
	}
	return dsnPassword.ReplaceAllString(s, "${1}="+Redacted)
}

// RedactSecrets returns a copy of v, a decoded JSON value (maps, slices, scalars), with
// the redaction rule above applied: the whole value of every secret-named key is
// [Redacted], in objects at every depth, including objects inside arrays, and every
// other string goes through [RedactString]. v is not changed.
func RedactSecrets(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if IsSecretKey(k) {
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
	case string:
		return RedactString(v)
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

// RedactJSON returns the JSON document data with its secrets redacted; ok is false when
// data is not JSON.
func RedactJSON(data []byte) ([]byte, bool) {
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
