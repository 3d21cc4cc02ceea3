package sdk

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The field constructors: one per Go type a config struct holds. Each checks the JSON
// shape of the value (as TOML writes it), converts it and binds it to dst.

// String declares a string field.
func (f *Fields) String(name string, dst *string) *Field[string] {
	return newField(f, name, TypeString, dst, parseString, strconv.Quote)
}

// OutputPath declares a non-empty string naming a file the connector writes; `ferry
// check` also checks on disk that it could be written (see [TypeOutputPath]).
func (f *Fields) OutputPath(name string, dst *string) *Field[string] {
	fd := newField(f, name, TypeOutputPath, dst, parseString, strconv.Quote)
	return fd.Check(func(s string) error {
		if s == "" {
			return errors.New("empty path")
		}
		return nil
	})
}

// URL declares a string that must parse as an absolute URL with one of schemes (any
// scheme when none is given). The field holds the URL as written.
func (f *Fields) URL(name string, dst *string, schemes ...string) *Field[string] {
	fd := newField(f, name, TypeURL, dst, parseString, strconv.Quote)
	if len(schemes) > 0 {
		fd.d.meta.Enum = schemes
	}
	return fd.Check(func(s string) error {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("not a URL: %v", RedactURLError(err))
		}
		if u.Scheme == "" || (u.Host == "" && u.Opaque == "") {
			return fmt.Errorf("%q is not an absolute URL (want e.g. %s://host:port)", RedactURL(s), firstOr(schemes, "scheme"))
		}
		if len(schemes) > 0 && !slices.Contains(schemes, strings.ToLower(u.Scheme)) {
			return fmt.Errorf("scheme %q not supported (want %s)", u.Scheme, strings.Join(schemes, ", "))
		}
		return nil
	})
}

func firstOr(xs []string, d string) string {
	if len(xs) > 0 {
		return xs[0]
	}
	return d
}

// Secret declares a string that must never be shown: `ferry connectors` marks it, logs,
// status and the HTTP API show it redacted (its value's String is "***").
func (f *Fields) Secret(name string, dst *Secret) *Field[Secret] {
	fd := newField(f, name, TypeSecret, dst, func(raw json.RawMessage) (Secret, error) {
		s, err := parseString(raw)
		return Secret{s}, err
	}, func(s Secret) string { return strconv.Quote(s.String()) })
	fd.d.meta.Secret = true
	return fd
}

// Bool declares a bool field.
func (f *Fields) Bool(name string, dst *bool) *Field[bool] {
	return newField(f, name, TypeBool, dst, func(raw json.RawMessage) (bool, error) {
		x, err := jsonValue(raw)
		if err != nil {
			return false, err
		}
		b, ok := x.(bool)
		if !ok {
			return false, wantErr(TypeBool, x)
		}
		return b, nil
	}, strconv.FormatBool)
}

// Int declares an integer field (negative values allowed unless Min says otherwise).
func (f *Fields) Int(name string, dst *int) *Field[int] {
	fd := newField(f, name, TypeInteger, dst, func(raw json.RawMessage) (int, error) {
		n, err := parseInt(raw, TypeInteger)
		if err == nil && (n < math.MinInt || n > math.MaxInt) {
			err = errors.New("out of range")
		}
		return int(n), err
	}, strconv.Itoa)
	fd.cmp = cmp.Compare[int]
	return fd
}

// Int64 declares a 64-bit integer field.
func (f *Fields) Int64(name string, dst *int64) *Field[int64] {
	fd := newField(f, name, TypeInteger, dst, func(raw json.RawMessage) (int64, error) {
		return parseInt(raw, TypeInteger)
	}, func(v int64) string { return strconv.FormatInt(v, 10) })
	fd.cmp = cmp.Compare[int64]
	return fd
}

// Uint64 declares an integer field of at least 0.
func (f *Fields) Uint64(name string, dst *uint64) *Field[uint64] {
	fd := newField(f, name, TypeUnsigned, dst, func(raw json.RawMessage) (uint64, error) {
		x, err := jsonValue(raw)
		if err != nil {
			return 0, err
		}
		n, ok := x.(json.Number)
		if !ok {
			return 0, wantErr(TypeUnsigned, x)
		}
		v, err := strconv.ParseUint(n.String(), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want an unsigned, got %s", n)
		}
		return v, nil
	}, func(v uint64) string { return strconv.FormatUint(v, 10) })
	fd.cmp = cmp.Compare[uint64]
	return fd
}

// Float declares a number field.
func (f *Fields) Float(name string, dst *float64) *Field[float64] {
	fd := newField(f, name, TypeNumber, dst, func(raw json.RawMessage) (float64, error) {
		x, err := jsonValue(raw)
		if err != nil {
			return 0, err
		}
		n, ok := x.(json.Number)
		if !ok {
			return 0, wantErr(TypeNumber, x)
		}
		v, err := n.Float64()
		if err != nil || math.IsInf(v, 0) {
			return 0, fmt.Errorf("want a number, got %s", n)
		}
		return v, nil
	}, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) })
	fd.cmp = cmp.Compare[float64]
	return fd
}

// Duration declares a duration written as a string ParseDuration reads ("1s", "250ms",
// "1m 30s"; "0", "none" and "disabled" are zero).
func (f *Fields) Duration(name string, dst *time.Duration) *Field[time.Duration] {
	fd := newField(f, name, TypeDuration, dst, func(raw json.RawMessage) (time.Duration, error) {
		s, err := parseString(raw)
		if err != nil {
			return 0, fmt.Errorf("want a duration like \"1s\" or \"250ms\", got %s", strings.TrimPrefix(err.Error(), "want a string, got "))
		}
		d, err := ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("want a duration like \"1s\" or \"250ms\", got %q", s)
		}
		return d, nil
	}, FormatDuration)
	fd.cmp = cmp.Compare[time.Duration]
	return fd
}

// Size declares a byte size: a string with a decimal or binary unit ("8MiB", "10MB",
// "512 KiB") or an integer count of bytes.
func (f *Fields) Size(name string, dst *ByteSize) *Field[ByteSize] {
	fd := newField(f, name, TypeSize, dst, func(raw json.RawMessage) (ByteSize, error) {
		x, err := jsonValue(raw)
		if err != nil {
			return 0, err
		}
		switch v := x.(type) {
		case string:
			return ParseByteSize(v)
		case json.Number:
			n, err := strconv.ParseUint(v.String(), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("want a size like \"8MiB\" or a count of bytes, got %s", v)
			}
			return ByteSize(n), nil
		}
		return 0, fmt.Errorf("want a size like \"8MiB\" or a count of bytes, got %s", describe(x))
	}, func(b ByteSize) string { return strconv.Quote(b.String()) })
	fd.cmp = cmp.Compare[ByteSize]
	return fd
}

// Strings declares a list of strings.
func (f *Fields) Strings(name string, dst *[]string) *Field[[]string] {
	return newField(f, name, TypeStrings, dst, func(raw json.RawMessage) ([]string, error) {
		x, err := jsonValue(raw)
		if err != nil {
			return nil, err
		}
		xs, ok := x.([]any)
		if !ok {
			return nil, wantErr(TypeStrings, x)
		}
		out := make([]string, len(xs))
		for i, e := range xs {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d: want a string, got %s", i, describe(e))
			}
			out[i] = s
		}
		return out, nil
	}, func(v []string) string {
		b, _ := json.Marshal(v)
		return string(b)
	})
}

// Ints declares a list of integers ([200, 201, 204]).
func (f *Fields) Ints(name string, dst *[]int) *Field[[]int] {
	return newField(f, name, TypeInts, dst, func(raw json.RawMessage) ([]int, error) {
		x, err := jsonValue(raw)
		if err != nil {
			return nil, err
		}
		xs, ok := x.([]any)
		if !ok {
			return nil, wantErr(TypeInts, x)
		}
		out := make([]int, len(xs))
		for i, e := range xs {
			n, ok := e.(json.Number)
			if !ok {
				return nil, fmt.Errorf("element %d: want an integer, got %s", i, describe(e))
			}
			v, err := strconv.Atoi(n.String())
			if err != nil {
				return nil, fmt.Errorf("element %d: want an integer, got %s", i, n)
			}
			out[i] = v
		}
		return out, nil
	}, func(v []int) string {
		b, _ := json.Marshal(v)
		return string(b)
	})
}

// StringMap declares a table of string values ({ "X-Header" = "value" }).
func (f *Fields) StringMap(name string, dst *map[string]string) *Field[map[string]string] {
	return newField(f, name, TypeStringMap, dst, func(raw json.RawMessage) (map[string]string, error) {
		x, err := jsonValue(raw)
		if err != nil {
			return nil, err
		}
		m, ok := x.(map[string]any)
		if !ok {
			return nil, wantErr(TypeStringMap, x)
		}
		out := make(map[string]string, len(m))
		for k, e := range m {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("key %q: want a string, got %s", k, describe(e))
			}
			out[k] = s
		}
		return out, nil
	}, func(v map[string]string) string {
		b, _ := json.Marshal(v)
		return string(b)
	})
}

// JSON declares a field of any JSON value, kept as written (the connector reads it).
func (f *Fields) JSON(name string, dst *json.RawMessage) *Field[json.RawMessage] {
	return newField(f, name, TypeJSON, dst, func(raw json.RawMessage) (json.RawMessage, error) {
		if _, err := jsonValue(raw); err != nil {
			return nil, err
		}
		return append(json.RawMessage(nil), bytes.TrimSpace(raw)...), nil
	}, func(v json.RawMessage) string { return string(v) })
}

// EnumChoice is one value an enum field takes, with the other spellings that mean it.
type EnumChoice[E ~string] struct {
	Value   E
	Aliases []string
}

// Choice returns the choice of value v, also written as any of aliases.
func Choice[E ~string](v E, aliases ...string) EnumChoice[E] {
	return EnumChoice[E]{Value: v, Aliases: aliases}
}

// Enum declares a string field that takes one of choices (compared without regard to
// case); dst gets the choice's Value whichever of its spellings the file used.
func Enum[E ~string](f *Fields, name string, dst *E, choices ...EnumChoice[E]) *Field[E] {
	var values []string
	for _, c := range choices {
		values = append(values, string(c.Value))
	}
	fd := newField(f, name, TypeEnum, dst, func(raw json.RawMessage) (E, error) {
		s, err := parseString(raw)
		if err != nil {
			return "", err
		}
		for _, c := range choices {
			if strings.EqualFold(s, string(c.Value)) {
				return c.Value, nil
			}
			for _, a := range c.Aliases {
				if strings.EqualFold(s, a) {
					return c.Value, nil
				}
			}
		}
		return "", fmt.Errorf("unknown value %q (want %s)", s, orList(values))
	}, func(v E) string { return strconv.Quote(string(v)) })
	for _, c := range choices {
		shown := string(c.Value)
		if len(c.Aliases) > 0 {
			shown += " (also " + strings.Join(c.Aliases, ", ") + ")"
		}
		fd.d.meta.Enum = append(fd.d.meta.Enum, shown)
	}
	return fd
}

// orList renders ["a","b","c"] as "a, b or c".
func orList(xs []string) string {
	switch len(xs) {
	case 0:
		return "nothing"
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// Tables declares a list of tables ([[plugin_config.NAME]] in TOML), each decoded into a
// T by declare's fields; their errors name the element ("columns[2].type").
func Tables[T any](f *Fields, name string, dst *[]T, declare func(t *T, f *Fields)) *Field[[]T] {
	fd := newField(f, name, TypeTables, dst, func(raw json.RawMessage) ([]T, error) {
		var elems []json.RawMessage
		x, err := jsonValue(raw)
		if err != nil {
			return nil, err
		}
		if _, ok := x.([]any); !ok {
			return nil, wantErr(TypeTables, x)
		}
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, err
		}
		out := make([]T, len(elems))
		var errs []error
		for i, e := range elems {
			obj, err := configObject(e)
			if err != nil || isNull(e) {
				errs = append(errs, &FieldError{fmt.Sprintf("%s[%d]", name, i), "want a table"})
				continue
			}
			sub := &Fields{prefix: fmt.Sprintf("%s[%d].", name, i)}
			declare(&out[i], sub)
			errs = append(errs, sub.decode(obj)...)
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return out, nil
	}, func(v []T) string { return fmt.Sprintf("%d tables", len(v)) })
	var zero T
	sub := &Fields{}
	declare(&zero, sub)
	fd.d.meta.Fields = sub.describe()
	return fd
}

// jsonValue decodes one JSON value, numbers kept as json.Number.
func jsonValue(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	return x, nil
}

func parseString(raw json.RawMessage) (string, error) {
	x, err := jsonValue(raw)
	if err != nil {
		return "", err
	}
	s, ok := x.(string)
	if !ok {
		return "", wantErr(TypeString, x)
	}
	return s, nil
}

func parseInt(raw json.RawMessage, t FieldType) (int64, error) {
	x, err := jsonValue(raw)
	if err != nil {
		return 0, err
	}
	n, ok := x.(json.Number)
	if !ok {
		return 0, wantErr(t, x)
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want %s %s, got %s", article(t), t, n)
	}
	return v, nil
}

func wantErr(t FieldType, x any) error {
	return fmt.Errorf("want %s %s, got %s", article(t), t, describe(x))
}
