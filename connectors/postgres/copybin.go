package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// msgID is an Iggy message id (128 bits) bound for the numeric(39,0) id column. The COPY
// encoder writes it straight into numeric's binary form; as a NumericValuer it also
// encodes through pgx (INSERT), building the big.Int only there.
type msgID struct{ hi, lo uint64 }

// NumericValue implements pgtype.NumericValuer.
func (m msgID) NumericValue() (pgtype.Numeric, error) {
	id := new(big.Int).SetUint64(m.hi)
	id.Lsh(id, 64).Or(id, new(big.Int).SetUint64(m.lo))
	return pgtype.Numeric{Int: id, Valid: true}, nil
}

// copyHeader starts every binary COPY stream: the signature, no flags, no extension.
const copyHeader = "PGCOPY\n\377\r\n\000\x00\x00\x00\x00\x00\x00\x00\x00"

// microsFromUnixToY2K is PostgreSQL's timestamp epoch (2000-01-01) in µs since 1970.
const microsFromUnixToY2K = 946_684_800_000_000

// errCopyFallback: a value the encoder cannot put in binary form itself; the batch goes
// through pgx's CopyFrom, which knows more conversions (a string parsed as the type).
var errCopyFallback = errors.New("value needs pgx's copy conversions")

// copyBufs recycles the encoded COPY streams (a batch's rows, hundreds of KB).
var copyBufs = sync.Pool{New: func() any { return new([]byte) }}

// copyTypes returns the type OIDs of s.cols in the target, read once per sink: the
// binary COPY format needs each column's exact type.
func (s *Sink) copyTypes(ctx context.Context, conn *pgx.Conn) ([]uint32, error) {
	s.oidsMu.Lock()
	defer s.oidsMu.Unlock()
	if s.oids != nil {
		return s.oids, nil
	}
	sd, err := conn.PgConn().Prepare(ctx, "", "SELECT "+s.quotedCols()+" FROM "+s.target.Sanitize(), nil)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", s.cfg.TargetTable, err)
	}
	if len(sd.Fields) != len(s.cols) {
		return nil, fmt.Errorf("describe %s: %d columns, want %d", s.cfg.TargetTable, len(sd.Fields), len(s.cols))
	}
	oids := make([]uint32, len(sd.Fields))
	for i, f := range sd.Fields {
		oids[i] = f.DataTypeOID
	}
	s.oids = oids
	return oids, nil
}

// forgetCopyTypes drops the cached column types (the table may have changed).
func (s *Sink) forgetCopyTypes() {
	s.oidsMu.Lock()
	s.oids = nil
	s.oidsMu.Unlock()
}

func (s *Sink) quotedCols() string {
	q := make([]string, len(s.cols))
	for i, c := range s.cols {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// copyOwn sends the rows idx as one COPY in copy_format, encoded here into a reused
// buffer. It reports false (nothing sent) when some value needs pgx's conversions.
func (s *Sink) copyOwn(ctx context.Context, conn *pgx.Conn, rows [][]any, idx []int) (bool, error) {
	sent, _, err := s.copyOwnAround(ctx, conn, "", "", rows, idx)
	return sent, err
}

// copyOwnAround is copyOwn with statements run before and after the COPY in the same
// simple query (before: empty, or ending in "; "; after: empty, or starting with "; "),
// returning the tag of the query's last statement. The data is streamed as soon as the
// query is sent, as pgconn always does; if a statement before the COPY fails, the server
// drops it, and after the first error the server skips the rest of the query.
func (s *Sink) copyOwnAround(ctx context.Context, conn *pgx.Conn, before, after string, rows [][]any, idx []int) (bool, pgconn.CommandTag, error) {
	oids, err := s.copyTypes(ctx, conn)
	if err != nil {
		return false, pgconn.CommandTag{}, err
	}
	encode, option := appendCopyTextRows, ""
	if s.cfg.CopyFormat == copyBinary {
		encode, option = appendCopyRows, " (FORMAT binary)"
	}
	bp := copyBufs.Get().(*[]byte)
	buf, err := encode((*bp)[:0], conn.TypeMap(), oids, rows, idx)
	if buf != nil {
		*bp = buf
	}
	if errors.Is(err, errCopyFallback) {
		copyBufs.Put(bp)
		return false, pgconn.CommandTag{}, nil
	}
	if err != nil {
		copyBufs.Put(bp)
		return false, pgconn.CommandTag{}, err
	}
	tag, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(buf),
		before+"COPY "+s.target.Sanitize()+" ("+s.quotedCols()+") FROM STDIN"+option+after)
	// When the connection fails mid-COPY, pgconn returns while its goroutine that
	// streams buf may still be reading it: a failed COPY's buffer is never reused.
	if err == nil {
		copyBufs.Put(bp)
	}
	return true, tag, err
}

// appendCopyRows appends the binary COPY stream of rows idx (each row without its
// trailing rejection slot) to buf: header, rows, trailer. The values the sink builds
// itself are encoded directly; anything else through m, as pgx's CopyFrom does.
func appendCopyRows(buf []byte, m *pgtype.Map, oids []uint32, rows [][]any, idx []int) ([]byte, error) {
	buf = append(buf, copyHeader...)
	for _, i := range idx {
		r := rows[i]
		vals := r[:len(r)-1]
		if len(vals) != len(oids) {
			return buf, fmt.Errorf("row has %d values for %d columns", len(vals), len(oids))
		}
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(vals)))
		for j, v := range vals {
			var err error
			if buf, err = appendCopyValue(buf, m, oids[j], v); err != nil {
				return buf, err
			}
		}
	}
	return binary.BigEndian.AppendUint16(buf, math.MaxUint16), nil // -1: end of data
}

// appendCopyValue appends one field: its length (-1 for NULL) and its binary form. The
// sink's own values come by pointer (rowValues), mapped columns' by value.
func appendCopyValue(buf []byte, m *pgtype.Map, oid uint32, v any) ([]byte, error) {
	be := binary.BigEndian
	switch oid {
	case pgtype.NumericOID:
		switch id := v.(type) {
		case *msgID:
			return appendNumericID(buf, *id), nil
		case msgID:
			return appendNumericID(buf, id), nil
		}
	case pgtype.Int8OID:
		switch n := v.(type) {
		case *int64:
			return be.AppendUint64(be.AppendUint32(buf, 8), uint64(*n)), nil
		case int64:
			return be.AppendUint64(be.AppendUint32(buf, 8), uint64(n)), nil
		}
	case pgtype.Int4OID:
		if n, ok := v.(int32); ok {
			return be.AppendUint32(be.AppendUint32(buf, 4), uint32(n)), nil
		}
	case pgtype.TimestamptzOID:
		switch t := v.(type) {
		case *time.Time:
			return appendTimestamptzBinary(buf, *t), nil
		case time.Time:
			return appendTimestamptzBinary(buf, t), nil
		}
	case pgtype.TextOID, pgtype.VarcharOID:
		switch str := v.(type) {
		case *string:
			return append(be.AppendUint32(buf, uint32(len(*str))), *str...), nil
		case string:
			return append(be.AppendUint32(buf, uint32(len(str))), str...), nil
		}
	case pgtype.JSONBOID, pgtype.JSONOID:
		if j, ok := rawJSON(v); ok {
			if j == nil {
				return appendNull(buf), nil
			}
			if oid == pgtype.JSONBOID {
				buf = be.AppendUint32(buf, uint32(len(j)+1))
				return append(append(buf, 1), j...), nil // version 1, then the text as sent
			}
			return append(be.AppendUint32(buf, uint32(len(j))), j...), nil
		}
	case pgtype.ByteaOID:
		if b, ok := rawBytes(v); ok {
			if b == nil {
				return appendNull(buf), nil
			}
			return append(be.AppendUint32(buf, uint32(len(b))), b...), nil
		}
	}
	if v == nil {
		return appendNull(buf), nil
	}
	sp := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0)
	out, err := m.Encode(oid, pgtype.BinaryFormatCode, v, buf)
	if err != nil {
		return buf[:sp], errCopyFallback
	}
	if out == nil {
		return appendNull(buf[:sp]), nil
	}
	binary.BigEndian.PutUint32(out[sp:], uint32(len(out)-sp-4))
	return out, nil
}

// rawJSON is v's JSON text when v is a json.RawMessage, by value or pointer.
func rawJSON(v any) (json.RawMessage, bool) {
	switch j := v.(type) {
	case *json.RawMessage:
		return *j, true
	case json.RawMessage:
		return j, true
	}
	return nil, false
}

// rawBytes is v's bytes when v is a []byte, by value or pointer.
func rawBytes(v any) ([]byte, bool) {
	switch b := v.(type) {
	case *[]byte:
		return *b, true
	case []byte:
		return b, true
	}
	return nil, false
}

// appendTimestamptzBinary appends t as one field: µs since 2000-01-01.
func appendTimestamptzBinary(buf []byte, t time.Time) []byte {
	us := t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - microsFromUnixToY2K
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(buf, 8), uint64(us))
}

func appendNull(buf []byte) []byte { return binary.BigEndian.AppendUint32(buf, math.MaxUint32) }

// appendNumericID appends id in numeric's binary form: digit count, weight (of the first
// base-10000 digit), sign, display scale, then the digits, most significant first and
// without trailing zero digits (the server stores the value normalised either way).
func appendNumericID(buf []byte, id msgID) []byte {
	var digits [10]uint16 // 2^128 < 10000^10
	n := 0
	hi, lo := id.hi, id.lo
	for hi != 0 || lo != 0 {
		var r uint64
		qhi := hi / 10000
		r = hi % 10000
		var qlo uint64
		qlo, r = bits.Div64(r, lo, 10000)
		digits[n] = uint16(r)
		n++
		hi, lo = qhi, qlo
	}
	weight := n - 1
	low := 0 // digits[low] is the least significant digit kept
	for low < n && digits[low] == 0 {
		low++
	}
	nd := n - low
	if n == 0 {
		weight = 0
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(8+2*nd))
	buf = binary.BigEndian.AppendUint16(buf, uint16(nd))
	buf = binary.BigEndian.AppendUint16(buf, uint16(int16(weight)))
	buf = binary.BigEndian.AppendUint16(buf, 0) // sign: positive
	buf = binary.BigEndian.AppendUint16(buf, 0) // display scale
	for k := n - 1; k >= low; k-- {
		buf = binary.BigEndian.AppendUint16(buf, digits[k])
	}
	return buf
}
