package wire

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Uint128 is an unsigned 128-bit integer as Iggy sends it: 16 bytes little-endian, low
// half first. It carries client ids, message ids and request checksums.
type Uint128 struct {
	Lo, Hi uint64
}

// IsZero reports whether u is 0.
func (u Uint128) IsZero() bool { return u.Lo == 0 && u.Hi == 0 }

// String formats u as 32 hex digits, high half first.
func (u Uint128) String() string { return fmt.Sprintf("%016x%016x", u.Hi, u.Lo) }

// AppendUint128 appends u as 16 little-endian bytes.
func AppendUint128(dst []byte, u Uint128) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, u.Lo)
	return binary.LittleEndian.AppendUint64(dst, u.Hi)
}

func putUint128(b []byte, u Uint128) {
	binary.LittleEndian.PutUint64(b, u.Lo)
	binary.LittleEndian.PutUint64(b[8:], u.Hi)
}

func getUint128(b []byte) Uint128 {
	return Uint128{Lo: binary.LittleEndian.Uint64(b), Hi: binary.LittleEndian.Uint64(b[8:])}
}

// AppendName appends s as a Name: [len u8][bytes]. The caller must have checked it with
// [CheckName]: a longer or empty s produces a body the peer rejects.
func AppendName(dst []byte, s string) []byte {
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// CheckName returns nil if s is a valid Name: 1..255 bytes of UTF-8.
func CheckName(s string) error {
	if len(s) == 0 || len(s) > 255 {
		return fmt.Errorf("%w: name length %d outside 1..255", ErrMalformed, len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: name is not UTF-8", ErrMalformed)
	}
	return nil
}

// AppendLongString appends s as [len u32][bytes].
func AppendLongString(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// Reader decodes little-endian fields from a byte slice with a sticky error: after the
// first failure every read returns a zero value and the error stays put, so a decoder
// reads every field and checks once with [Reader.Err] or [Reader.Complete]. A Reader never
// reads past its input and never panics. The zero Reader reads an empty input.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a Reader over b. It does not copy b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// Err returns the first error met, or nil.
func (r *Reader) Err() error { return r.err }

// Offset returns the number of bytes consumed so far.
func (r *Reader) Offset() int { return r.off }

// Remaining returns the number of unread bytes (0 after an error).
func (r *Reader) Remaining() int {
	if r.err != nil {
		return 0
	}
	return len(r.b) - r.off
}

// Complete returns the first error, or ErrTrailingBytes if input remains unread.
func (r *Reader) Complete() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return fmt.Errorf("%w: %d bytes after byte %d", ErrTrailingBytes, len(r.b)-r.off, r.off)
	}
	return nil
}

// Fail records err (wrapped with the current offset) unless an error is already recorded.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %w", r.off, err)
	}
}

// Failf records a malformed-input error (wrapping ErrMalformed) unless one is recorded.
func (r *Reader) Failf(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", ErrMalformed, r.off, fmt.Sprintf(format, args...))
	}
}

// take returns the next n bytes, or nil after recording ErrTruncated.
func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = fmt.Errorf("%w: need %d bytes at byte %d, have %d", ErrTruncated, n, r.off, len(r.b)-r.off)
		return nil
	}
	s := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return s
}

// U8 reads one byte.
func (r *Reader) U8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

// U16 reads a little-endian uint16.
func (r *Reader) U16() uint16 {
	if b := r.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

// U32 reads a little-endian uint32.
func (r *Reader) U32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// U64 reads a little-endian uint64.
func (r *Reader) U64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// U128 reads a little-endian 128-bit integer.
func (r *Reader) U128() Uint128 {
	if b := r.take(16); b != nil {
		return getUint128(b)
	}
	return Uint128{}
}

// Bytes returns the next n bytes without copying (nil after an error).
func (r *Reader) Bytes(n int) []byte { return r.take(n) }

// Rest returns every unread byte without copying.
func (r *Reader) Rest() []byte { return r.take(len(r.b) - r.off) }

// Name reads a Name ([len u8][UTF-8], len 1..255) and returns a copy.
func (r *Reader) Name() string {
	n := int(r.U8())
	if r.err == nil && n == 0 {
		r.Failf("empty name")
		return ""
	}
	return r.utf8(n)
}

// ShortString reads [len u8][UTF-8] allowing len 0 (passwords, tokens) and returns a copy.
func (r *Reader) ShortString() string { return r.utf8(int(r.U8())) }

// LongString reads [len u32][UTF-8] and returns a copy.
func (r *Reader) LongString() string { return r.utf8(int(r.U32())) }

func (r *Reader) utf8(n int) string {
	b := r.take(n)
	if b == nil {
		return ""
	}
	if !utf8.Valid(b) {
		r.off -= n
		r.Failf("string is not UTF-8")
		return ""
	}
	return string(b)
}

// boundCount returns count if count elements of at least minSize bytes each can fit in
// the unread input; otherwise it records ErrTruncated and returns 0. Decoders call it
// before allocating a slice of count elements.
func (r *Reader) boundCount(count uint32, minSize int) int {
	if r.err != nil {
		return 0
	}
	if uint64(count)*uint64(minSize) > uint64(len(r.b)-r.off) {
		r.err = fmt.Errorf("%w: count %d × %d bytes at byte %d exceeds the %d remaining",
			ErrTruncated, count, minSize, r.off, len(r.b)-r.off)
		return 0
	}
	return int(count)
}
