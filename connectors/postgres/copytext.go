package postgres

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5/pgtype"
)

// COPY's text format (copy_format = "text"): one line per row, fields separated by tabs,
// \N for NULL, and in every field the backslash, tab, newline and carriage return written
// as \\, \t, \n and \r. Each field is the type's text input, as an INSERT literal would
// be: PostgreSQL parses numeric, timestamptz and jsonb from it, which costs it less CPU
// per row than their binary forms here (docs/benchmarks.md).

// appendCopyTextRows appends the text COPY stream of rows idx (each row without its
// trailing rejection slot) to buf.
func appendCopyTextRows(buf []byte, m *pgtype.Map, oids []uint32, rows [][]any, idx []int) ([]byte, error) {
	var stamps stampCache
	for _, i := range idx {
		r := rows[i]
		vals := r[:len(r)-1]
		if len(vals) != len(oids) {
			return buf, fmt.Errorf("row has %d values for %d columns", len(vals), len(oids))
		}
		for j, v := range vals {
			if j > 0 {
				buf = append(buf, '\t')
			}
			var err error
			if buf, err = appendCopyTextValue(buf, m, oids[j], v, &stamps); err != nil {
				return buf, err
			}
		}
		buf = append(buf, '\n')
	}
	return buf, nil
}

// appendCopyTextValue appends one field in COPY's text format.
func appendCopyTextValue(buf []byte, m *pgtype.Map, oid uint32, v any, stamps *stampCache) ([]byte, error) {
	switch oid {
	case pgtype.NumericOID:
		switch id := v.(type) {
		case *msgID:
			return appendDecimal128(buf, id.hi, id.lo), nil
		case msgID:
			return appendDecimal128(buf, id.hi, id.lo), nil
		}
	case pgtype.Int8OID:
		switch n := v.(type) {
		case *int64:
			return strconv.AppendInt(buf, *n, 10), nil
		case int64:
			return strconv.AppendInt(buf, n, 10), nil
		}
	case pgtype.Int4OID:
		if n, ok := v.(int32); ok {
			return strconv.AppendInt(buf, int64(n), 10), nil
		}
	case pgtype.TimestamptzOID:
		switch t := v.(type) {
		case *time.Time:
			return appendTimestamptz(buf, *t, stamps)
		case time.Time:
			return appendTimestamptz(buf, t, stamps)
		}
	case pgtype.TextOID, pgtype.VarcharOID:
		switch str := v.(type) {
		case *string:
			return appendCopyEscaped(buf, *str), nil
		case string:
			return appendCopyEscaped(buf, str), nil
		}
	case pgtype.JSONBOID, pgtype.JSONOID:
		if j, ok := rawJSON(v); ok {
			if j == nil {
				return append(buf, `\N`...), nil
			}
			return appendCopyEscaped(buf, j), nil
		}
	case pgtype.ByteaOID:
		if b, ok := rawBytes(v); ok {
			if b == nil {
				return append(buf, `\N`...), nil
			}
			buf = append(buf, `\\x`...) // bytea's hex input; its backslash escaped for COPY
			return appendHex(buf, b), nil
		}
	}
	if v == nil {
		return append(buf, `\N`...), nil
	}
	// Anything else: pgx's text form of the value for the column's type, escaped.
	sp := len(buf)
	out, err := m.Encode(oid, pgtype.TextFormatCode, v, buf)
	if err != nil {
		return buf[:sp], errCopyFallback
	}
	if out == nil {
		return append(buf[:sp], `\N`...), nil
	}
	if !needsCopyEscape(out[sp:]) {
		return out, nil
	}
	field := append([]byte(nil), out[sp:]...)
	return appendCopyEscaped(out[:sp], field), nil
}

// appendCopyEscaped appends s with COPY text's escapes: backslash, tab, newline and
// carriage return (the only bytes that could end or mangle a field). It skips eight bytes
// a step while none of them is a backslash or below 0x20 (a superset of the four), and
// copies the runs between escapes whole.
func appendCopyEscaped[T ~string | ~[]byte](buf []byte, s T) []byte {
	var b []byte
	switch v := any(s).(type) {
	case string:
		b = unsafe.Slice(unsafe.StringData(v), len(v)) // read only
	default:
		b = []byte(s) // a []byte type: no copy
	}
	pos, i := 0, 0
	for i < len(b) {
		for i+8 <= len(b) && !copySpecialIn8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for end := min(len(b), i+8); i < end; i++ {
			if e := copyEscape[b[i]]; e != 0 {
				buf = append(append(buf, b[pos:i]...), '\\', e)
				pos = i + 1
			}
		}
	}
	return append(buf, b[pos:]...)
}

// copyEscape is the letter after the backslash for each byte COPY's text format escapes.
var copyEscape = [256]byte{'\\': '\\', '\t': 't', '\n': 'n', '\r': 'r'}

// copySpecialIn8 reports whether any of the eight bytes in x is a backslash or below
// 0x20 (each test is exact as to whether some byte matches).
func copySpecialIn8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b := x ^ '\\'*ones
	return ((x-0x20*ones)&^x|(b-ones)&^b)&highs != 0
}

func needsCopyEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c == '\t' || c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}

func appendHex(buf, b []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range b {
		buf = append(buf, digits[c>>4], digits[c&0xf])
	}
	return buf
}

// appendDecimal128 appends the unsigned 128-bit number hi·2^64 + lo in decimal.
func appendDecimal128(buf []byte, hi, lo uint64) []byte {
	if hi == 0 {
		return strconv.AppendUint(buf, lo, 10)
	}
	const chunk = 1e19  // the largest power of ten below 2^64
	var parts [3]uint64 // 2^128 < 10^57: at most three chunks of 19 digits
	n := 0
	for hi != 0 || lo != 0 {
		var r uint64
		qhi := hi / chunk
		lo, r = bits.Div64(hi%chunk, lo, chunk)
		hi = qhi
		parts[n] = r
		n++
	}
	buf = strconv.AppendUint(buf, parts[n-1], 10)
	for k := n - 2; k >= 0; k-- {
		var tmp [20]byte
		d := strconv.AppendUint(tmp[:0], parts[k], 10)
		for range 19 - len(d) {
			buf = append(buf, '0')
		}
		buf = append(buf, d...)
	}
	return buf
}

// stampCache keeps the text of the last second appendTimestamptz wrote: a batch's
// timestamps mostly share their second, and only the microseconds differ.
type stampCache struct {
	sec  int64
	text [19]byte // YYYY-MM-DD hh:mm:ss
	set  bool
}

// appendTimestamptz appends t in UTC as YYYY-MM-DD hh:mm:ss.ffffffZ (microseconds, as
// PostgreSQL keeps; time.Format costs several times more per row). Years outside
// 1000-9999 are errCopyFallback: pgx's conversions handle them.
func appendTimestamptz(buf []byte, t time.Time, c *stampCache) ([]byte, error) {
	t = t.UTC()
	if sec := t.Unix(); !c.set || c.sec != sec {
		y, mo, d := t.Date()
		if y < 1000 || y > 9999 {
			return buf, errCopyFallback
		}
		h, mi, s := t.Clock()
		b := c.text[:0]
		b = append(append2(append2(b, y/100), y%100), '-')
		b = append(append2(b, int(mo)), '-')
		b = append(append2(b, d), ' ')
		b = append(append2(b, h), ':')
		b = append(append2(b, mi), ':')
		append2(b, s)
		c.sec, c.set = sec, true
	}
	us := t.Nanosecond() / 1000
	buf = append(append(buf, c.text[:]...), '.')
	buf = append2(append2(append2(buf, us/10000), us/100%100), us%100)
	return append(buf, 'Z'), nil
}

// append2 appends n (0-99) as two digits.
func append2(buf []byte, n int) []byte {
	const pairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
		"8081828384858687888990919293949596979899"
	return append(buf, pairs[2*n], pairs[2*n+1])
}
