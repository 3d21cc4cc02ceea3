package source

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// jsonValue turns one column's text form, as pgoutput sends it, into the JSON value
// upstream's source writes for that type: booleans and integers as JSON values, numeric
// as an exact JSON number, json/jsonb as the document itself, bytea as base64, timestamptz
// as RFC 3339 in UTC, arrays as JSON arrays of the same conversions, everything else as
// its PostgreSQL text.
func jsonValue(types *pgtype.Map, oid uint32, text []byte) (json.RawMessage, error) {
	s := string(text)
	switch oid {
	case pgtype.BoolOID:
		return json.RawMessage(strconv.FormatBool(s == "t")), nil
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID, pgtype.XIDOID:
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			if _, uerr := strconv.ParseUint(s, 10, 64); uerr != nil {
				return nil, fmt.Errorf("integer %q: %w", s, err)
			}
		}
		return json.RawMessage(s), nil
	case pgtype.Float4OID, pgtype.Float8OID:
		if strings.ContainsAny(s, "aAiI") {
			return quote(s), nil // NaN and ±Infinity have no JSON number
		}
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return nil, fmt.Errorf("float %q: %w", s, err)
		}
		return json.RawMessage(s), nil
	case pgtype.NumericOID:
		if _, ok := new(big.Float).SetString(s); !ok {
			return quote(s), nil // NaN, ±Infinity
		}
		return json.RawMessage(normalNumber(s)), nil
	case pgtype.JSONOID, pgtype.JSONBOID:
		// Compact, as upstream writes a decoded document (jsonb's text has spaces).
		var b bytes.Buffer
		if err := json.Compact(&b, text); err != nil {
			return nil, fmt.Errorf("json value: %w", err)
		}
		return b.Bytes(), nil
	case pgtype.ByteaOID:
		b, err := byteaText(s)
		if err != nil {
			return nil, err
		}
		return quote(base64.StdEncoding.EncodeToString(b)), nil
	case pgtype.TimestamptzOID:
		return quote(timestamptz(s)), nil
	}
	if t, ok := types.TypeForOID(oid); ok {
		if ac, ok := t.Codec.(*pgtype.ArrayCodec); ok {
			return arrayValue(types, ac.ElementType.OID, s)
		}
	}
	return quote(s), nil
}

// appendJSONValue appends jsonValue's rendering of a column to dst. The commonest cases
// (an integer, text of printable ASCII that JSON writes as it is) are appended without
// allocating; the rest go through jsonValue, so the output is the same.
func appendJSONValue(dst []byte, types *pgtype.Map, oid uint32, text []byte) ([]byte, error) {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		if plainInteger(text) {
			return append(dst, text...), nil
		}
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		if plainText(text) {
			dst = append(dst, '"')
			dst = append(dst, text...)
			return append(dst, '"'), nil
		}
	}
	v, err := jsonValue(types, oid, text)
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

// plainInteger reports whether b is an optional minus and 1 to 18 digits: an int64, and a
// JSON number as it is.
func plainInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// plainText reports whether b is printable ASCII that encoding/json writes unescaped in a
// string (no quote, backslash or HTML-sensitive character).
func plainText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// arrayValue converts an array's text form element by element (multi-dimensional arrays
// become nested JSON arrays).
func arrayValue(types *pgtype.Map, elem uint32, s string) (json.RawMessage, error) {
	return parseArrayText(types, elem, s)
}

// parseArrayText reads PostgreSQL's array text format ({a,"b c",NULL,{1,2}}).
func parseArrayText(types *pgtype.Map, elem uint32, s string) (json.RawMessage, error) {
	if i := strings.Index(s, "="); i > 0 && strings.HasPrefix(s, "[") {
		s = s[i+1:] // explicit bounds: [0:1]={…}
	}
	p := arrayParser{s: s, types: types, elem: elem}
	v, err := p.value()
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", s, err)
	}
	return v, nil
}

type arrayParser struct {
	s     string
	i     int
	types *pgtype.Map
	elem  uint32
}

func (p *arrayParser) value() (json.RawMessage, error) {
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, fmt.Errorf("byte %d: want '{'", p.i)
	}
	p.i++
	out := []byte{'['}
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return append(out, ']'), nil
	}
	for {
		v, err := p.element()
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
		switch {
		case p.i < len(p.s) && p.s[p.i] == ',':
			out = append(out, ',')
			p.i++
		case p.i < len(p.s) && p.s[p.i] == '}':
			p.i++
			return append(out, ']'), nil
		default:
			return nil, fmt.Errorf("byte %d: want ',' or '}'", p.i)
		}
	}
}

func (p *arrayParser) element() (json.RawMessage, error) {
	switch {
	case p.i >= len(p.s):
		return nil, fmt.Errorf("byte %d: unterminated", p.i)
	case p.s[p.i] == '{':
		return p.value()
	case p.s[p.i] == '"':
		str, err := p.quoted()
		if err != nil {
			return nil, err
		}
		return jsonValue(p.types, p.elem, []byte(str))
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ',' && p.s[p.i] != '}' {
		p.i++
	}
	if word := p.s[start:p.i]; word != "NULL" {
		return jsonValue(p.types, p.elem, []byte(word))
	}
	return json.RawMessage("null"), nil
}

func (p *arrayParser) quoted() (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case '\\':
			if p.i+1 >= len(p.s) {
				return "", fmt.Errorf("byte %d: dangling backslash", p.i)
			}
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		case '"':
			p.i++
			return b.String(), nil
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", fmt.Errorf("byte %d: unterminated quote", p.i)
}

// quote returns s as a JSON string.
func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// normalNumber makes numeric text a valid JSON number ("5." and ".5" are not).
func normalNumber(s string) string {
	if strings.HasPrefix(s, ".") {
		s = "0" + s
	} else if strings.HasPrefix(s, "-.") {
		s = "-0" + s[1:]
	}
	return strings.TrimSuffix(s, ".")
}

// byteaText decodes bytea's hex output format (\x…); the escape format is accepted too.
func byteaText(s string) ([]byte, error) {
	if strings.HasPrefix(s, `\x`) {
		b, err := hex.DecodeString(s[2:])
		if err != nil {
			return nil, fmt.Errorf("bytea: %w", err)
		}
		return b, nil
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\\' {
			out = append(out, '\\')
			i++
			continue
		}
		if i+3 >= len(s) {
			return nil, fmt.Errorf("bytea: escape at byte %d is cut short", i)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return nil, fmt.Errorf("bytea: escape at byte %d: %w", i, err)
		}
		out = append(out, byte(v))
		i += 3
	}
	return out, nil
}

// timestamptz renders PostgreSQL's ISO output (2024-01-15 10:30:00.5+00, offsets to the
// second) as RFC 3339 in UTC; infinity and values it cannot read stay as PostgreSQL wrote
// them.
func timestamptz(s string) string {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07:00:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
	}
	return s
}
