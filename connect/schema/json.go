package schema

import (
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Why fastjson: the sink path decodes, transforms and re-encodes every message of a json
// stream, and encoding/json into map[string]any costs a map, a string per key and an
// interface per value, loses key order and rewrites number literals. fastjson parses into
// a reusable Parser (no allocation per message once warm), keeps object keys in document
// order, keeps number literals as written, and supports Set/Del on objects in place. Its
// own MarshalTo quotes re-escaped strings with strconv.AppendQuote, which is not JSON for
// control characters, so AppendJSON below is Ferry's encoder.

// AppendJSON appends v as compact JSON to dst: keys in their order, number literals as
// written, strings escaped as JSON requires and no more (no HTML escaping, as upstream's
// serializer).
func AppendJSON(dst []byte, v *fastjson.Value) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		dst = append(dst, '{')
		first := true
		o.Visit(func(k []byte, v *fastjson.Value) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			dst = AppendJSON(dst, v)
		})
		return append(dst, '}')
	case fastjson.TypeArray:
		a, _ := v.Array()
		dst = append(dst, '[')
		for i, e := range a {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSON(dst, e)
		}
		return append(dst, ']')
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return AppendString(dst, s)
	default: // numbers (their literal), true, false, null
		return v.MarshalTo(dst)
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal: '"', '\\' and control characters are
// escaped (\b \f \n \r \t, else \u00XX), everything else is copied.
func AppendString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// parseJSON parses p strictly: valid UTF-8 and valid JSON (fastjson's Parser alone skips
// string escapes it does not read; ValidateBytes checks them).
func parseJSON(p *fastjson.Parser, data []byte) (*fastjson.Value, error) {
	if !utf8.Valid(data) {
		return nil, errNotUTF8(data)
	}
	if err := fastjson.ValidateBytes(data); err != nil {
		return nil, err
	}
	return p.ParseBytes(data)
}
