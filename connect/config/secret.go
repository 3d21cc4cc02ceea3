package config

import "log/slog"

// Secret is a string that never prints: String, MarshalText and LogValue give "***" (or "" when
// empty). Use Reveal to read the value. It decodes from TOML and environment like a string.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns "***", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "***"
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return `config.Secret("` + s.String() + `")` }

// MarshalText renders the redacted form, so JSON output never holds the value. go-toml
// does not call it for string kinds; [Runtime.String] redacts explicitly.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue renders the redacted form in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
