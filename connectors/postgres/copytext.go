package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// COPY's text format (copy_format = "text"): one line per row, fields separated by tabs,
// \N for NULL, and in every field the backslash, tab, newline and carriage return written
// as \\, \t, \n and \r. Each field is the type's text input, as an INSERT literal would
// be: PostgreSQL parses numeric, timestamptz and jsonb from it, which costs it less CPU
// per row than their binary forms here (docs/benchmarks.md).

// copyText sends the rows idx as one text-format COPY encoded here into a reused buffer.
// It reports false (nothing sent) when some value needs pgx's conversions.
func (s *Sink) copyText(ctx context.Context, tx pgx.Tx, rows [][]any, idx []int) (bool, error) {
	oids, err := s.copyTypes(ctx, tx)
	if err != nil {
		return false, err
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf, err := appendCopyTextRows((*bp)[:0], tx.Conn().TypeMap(), oids, rows, idx)
	if buf != nil {
		*bp = buf
	}
	if errors.Is(err, errCopyFallback) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf),
		"COPY "+s.target.Sanitize()+" ("+s.quotedCols()+") FROM STDIN")
	return true, err
}

// appendCopyTextRows appends the text COPY stream of rows idx (each row without its
// trailing rejection slot) to buf.
func appendCopyTextRows(buf []byte, m *pgtype.Map, oids []uint32, rows [][]any, idx []int) ([]byte, error) {
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
			if buf, err = appendCopyTextValue(buf, m, oids[j], v); err != nil {
				return buf, err
			}
		}
		buf = append(buf, '\n')
	}
	return buf, nil
}

// appendCopyTextValue appends one field in COPY's text format.
func appendCopyTextValue(buf []byte, m *pgtype.Map, oid uint32, v any) ([]byte, error) {
	switch oid {
	case pgtype.NumericOID:
		if id, ok := v.(msgID); ok {
			return appendDecimal128(buf, id.hi, id.lo), nil
		}
	case pgtype.Int8OID:
		if n, ok := v.(int64); ok {
			return strconv.AppendInt(buf, n, 10), nil
		}
	case pgtype.Int4OID:
		if n, ok := v.(int32); ok {
			return strconv.AppendInt(buf, int64(n), 10), nil
		}
	case pgtype.TimestamptzOID:
		if t, ok := v.(time.Time); ok {
			return appendTimestamptz(buf, t)
		}
	case pgtype.TextOID, pgtype.VarcharOID:
		if str, ok := v.(string); ok {
			return appendCopyEscaped(buf, str), nil
		}
	case pgtype.JSONBOID, pgtype.JSONOID:
		if j, ok := v.(json.RawMessage); ok {
			if j == nil {
				return append(buf, `\N`...), nil
			}
			return appendCopyEscaped(buf, j), nil
		}
	case pgtype.ByteaOID:
		if b, ok := v.([]byte); ok {
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
// carriage return (the only bytes that could end or mangle a field).
func appendCopyEscaped[T ~string | ~[]byte](buf []byte, s T) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		var e byte
		switch s[i] {
		case '\\':
			e = '\\'
		case '\t':
			e = 't'
		case '\n':
			e = 'n'
		case '\r':
			e = 'r'
		default:
			continue
		}
		buf = append(append(buf, s[start:i]...), '\\', e)
		start = i + 1
	}
	return append(buf, s[start:]...)
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

// appendTimestamptz appends t in UTC as YYYY-MM-DD hh:mm:ss.ffffffZ (microseconds, as
// PostgreSQL keeps; time.Format costs several times more per row). Years outside
// 1000-9999 are errCopyFallback: pgx's conversions handle them.
func appendTimestamptz(buf []byte, t time.Time) ([]byte, error) {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 1000 || y > 9999 {
		return buf, errCopyFallback
	}
	h, mi, sec := t.Clock()
	buf = appendDigits(buf, y, 4)
	buf = appendDigits(append(buf, '-'), int(mo), 2)
	buf = appendDigits(append(buf, '-'), d, 2)
	buf = appendDigits(append(buf, ' '), h, 2)
	buf = appendDigits(append(buf, ':'), mi, 2)
	buf = appendDigits(append(buf, ':'), sec, 2)
	buf = appendDigits(append(buf, '.'), t.Nanosecond()/1000, 6)
	return append(buf, 'Z'), nil
}

// appendDigits appends n (≥ 0) in decimal, zero-padded to width digits.
func appendDigits(buf []byte, n, width int) []byte {
	var d [6]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(buf, d[:width]...)
}
