package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// Secret is a configured value that must never be shown: a password, a key, a token.
// Everything that prints it (fmt, slog, encoding/json) sees "***"; only Reveal returns
// the value, for the one call that sends it to the target.
type Secret struct{ v string }

// NewSecret returns a Secret holding s.
func NewSecret(s string) Secret { return Secret{s} }

// RedactedText is what a secret is shown as.
const RedactedText = "***"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty (not configured).
func (s Secret) IsZero() bool { return s.v == "" }

// String returns "***", or "" for an empty secret.
func (s Secret) String() string {
	if s.v == "" {
		return ""
	}
	return RedactedText
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return "sdk.Secret(" + strconv.Quote(s.String()) + ")" }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes "***" (or "" for an empty secret), never the value.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads the value from a JSON string.
func (s *Secret) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &s.v) }

// RedactURL returns raw with the password of its user info replaced by "***" (raw as it
// is when it does not parse or has none).
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); !has {
		return raw
	}
	return strings.Replace(u.Redacted(), ":xxxxx@", ":"+RedactedText+"@", 1)
}

// RedactURLError returns err's text with the URL it quotes redacted (url.Parse quotes the
// whole input, password included).
func RedactURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s %q: %v", ue.Op, RedactedText, ue.Err)
	}
	return err.Error()
}

// ByteSize is a number of bytes, written in a config as "8MiB", "10MB" or a plain count.
type ByteSize uint64

// Byte size units.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
	TiB ByteSize = 1 << 40
)

// sizeUnits are the suffixes ParseByteSize accepts, longest first so "MiB" wins over "B".
var sizeUnits = []struct {
	suffix string
	mult   uint64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"b", 1},
}

// ParseByteSize reads a byte size as Iggy's runtime does: a number with an optional unit,
// decimal (KB, MB, GB, TB; K, M, G, T) or binary (KiB, MiB, GiB, TiB), case-insensitive,
// spaces allowed before the unit; fractions allowed ("1.5MiB").
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size (want e.g. 8MiB, 10MB or 1048576)", s)
	}
	total := v * float64(mult)
	if total >= math.MaxUint64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(total), nil
}

// String renders b in the largest binary unit that divides it ("8MiB"), else in bytes.
func (b ByteSize) String() string {
	for _, u := range []struct {
		n    ByteSize
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if b >= u.n && b%u.n == 0 {
			return strconv.FormatUint(uint64(b/u.n), 10) + u.name
		}
	}
	return strconv.FormatUint(uint64(b), 10) + "B"
}
