package postcard

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Decode errors. Every decode error wraps exactly one of them.
var (
	// ErrTruncated: the input ended inside a value.
	ErrTruncated = errors.New("postcard: unexpected end of input")
	// ErrBadVarint: a varint longer than its type allows, or whose last byte overflows it.
	ErrBadVarint = errors.New("postcard: bad varint")
	// ErrBadOption: an Option tag other than 0x00 or 0x01.
	ErrBadOption = errors.New("postcard: bad option tag")
	// ErrBadUTF8: a String that is not valid UTF-8.
	ErrBadUTF8 = errors.New("postcard: string is not valid UTF-8")
	// ErrUnknownVariant: an enum index with no variant (Schema, HeaderKind).
	ErrUnknownVariant = errors.New("postcard: unknown enum variant")
	// ErrBadBase64: a header value that is not strict standard Base64.
	ErrBadBase64 = errors.New("postcard: bad base64 header value")
)

// Maximum varint lengths and last-byte values (postcard 1.1).
const (
	maxLenU32  = 5
	maxLenU64  = 10
	maxLenU128 = 19
	lastU32    = 0x0f
	lastU64    = 0x01
	lastU128   = 0x03
)

// Reader decodes postcard values from a byte slice with a sticky error: read every field,
// then check Err once. After the first error every read returns a zero value. A Reader never
// reads past its input and never panics.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a Reader over b. The Reader does not copy b; values it returns as strings
// or via Bytes are copies.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err returns the first error the Reader met, or nil.
func (r *Reader) Err() error { return r.err }

// Offset returns how many bytes were consumed so far.
func (r *Reader) Offset() int { return r.off }

// Remaining returns how many bytes are left.
func (r *Reader) Remaining() int { return len(r.b) - r.off }

func (r *Reader) fail(err error, what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d: %w", what, r.off, err)
	}
}

// Byte reads one raw byte (u8).
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(ErrTruncated, "u8")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// varint reads an unsigned LEB128 varint of at most maxLen bytes into (lo, hi).
func (r *Reader) varint(maxLen int, last byte, what string) (lo, hi uint64) {
	if r.err != nil {
		return 0, 0
	}
	start := r.off
	for i := 0; i < maxLen; i++ {
		if r.off >= len(r.b) {
			r.fail(ErrTruncated, what)
			return 0, 0
		}
		c := r.b[r.off]
		r.off++
		bits := uint64(c & 0x7f)
		pos := uint(7 * i)
		if pos < 64 {
			lo |= bits << pos
			if pos > 57 {
				hi |= bits >> (64 - pos)
			}
		} else {
			hi |= bits << (pos - 64)
		}
		if c&0x80 == 0 {
			if i == maxLen-1 && c > last {
				r.off = start
				r.fail(ErrBadVarint, what)
				return 0, 0
			}
			return lo, hi
		}
	}
	r.off = start
	r.fail(ErrBadVarint, what)
	return 0, 0
}

// U32 reads a u32 varint (also used for enum variant indexes).
func (r *Reader) U32() uint32 {
	lo, _ := r.varint(maxLenU32, lastU32, "u32")
	return uint32(lo)
}

// U64 reads a u64 (or 64-bit usize) varint.
func (r *Reader) U64() uint64 {
	lo, _ := r.varint(maxLenU64, lastU64, "u64")
	return lo
}

// U128 reads a u128 varint as its low and high 64-bit halves.
func (r *Reader) U128() (lo, hi uint64) { return r.varint(maxLenU128, lastU128, "u128") }

// Option reads an Option tag and reports whether a value follows.
func (r *Reader) Option() bool {
	c := r.Byte()
	if r.err != nil {
		return false
	}
	switch c {
	case 0:
		return false
	case 1:
		return true
	}
	r.off--
	r.fail(ErrBadOption, "option")
	return false
}

// length reads a usize length and checks that at least n*minSize bytes remain, so no caller
// ever allocates for more elements than the input can hold.
func (r *Reader) length(minSize int, what string) int {
	n := r.U64()
	if r.err != nil {
		return 0
	}
	rem := uint64(r.Remaining())
	if minSize > 0 && n > rem/uint64(minSize) {
		r.fail(ErrTruncated, what)
		return 0
	}
	return int(n)
}

// rawBytes reads a length-prefixed byte vector and returns a sub-slice of the input (no copy).
func (r *Reader) rawBytes(what string) []byte {
	n := r.length(1, what)
	if r.err != nil {
		return nil
	}
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// Bytes reads a Vec<u8> and returns a copy (non-nil, possibly empty).
func (r *Reader) Bytes() []byte {
	b := r.rawBytes("bytes")
	if r.err != nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// Str reads a String and checks UTF-8.
func (r *Reader) Str() string {
	b := r.rawBytes("string")
	if r.err != nil {
		return ""
	}
	if !utf8.Valid(b) {
		r.off -= len(b)
		r.fail(ErrBadUTF8, "string")
		return ""
	}
	return string(b)
}

// capHint bounds a slice preallocation for n decoded elements of elemSize bytes so that no
// single allocation driven by a count read from the input exceeds the remaining input; the
// slice still grows by append if the elements really are there.
func (r *Reader) capHint(n, elemSize int) int {
	if limit := r.Remaining() / elemSize; n > limit {
		return limit
	}
	return n
}
