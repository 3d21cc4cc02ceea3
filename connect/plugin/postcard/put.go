package postcard

import (
	"encoding/binary"
	"math/bits"
)

// Fixed-position writers for the hot RawMessages path. They write into b at i and return the
// index after the value. A varint is written as whole 8-byte little-endian words, so b must
// hold 8 bytes past i even when the value takes fewer; the bytes past the value are scratch
// that the next write overwrites. Callers size b with putSlack to spare.

// putSlack is the room the put functions may write past the end of the last value.
const putSlack = 8

// Largest encodings, used to size buffers before writing.
const (
	maxU64Len  = 10
	maxU128Len = 19
)

// spread56 spreads the low 56 bits of x into eight 7-bit groups, one per byte (bit 7 of
// each byte clear): the varint bytes of x without continuation bits.
func spread56(x uint64) uint64 {
	x &= 1<<56 - 1
	x = x&0x0FFFFFFF | (x&0x00FFFFFFF0000000)<<4
	x = x&0x00003FFF00003FFF | (x&0x0FFFC0000FFFC000)<<2
	return x&0x007F007F007F007F | (x&0x3F803F803F803F80)<<1
}

// Indexed by bits.Len64(v) of a v < 2^56: the varint's length (at least 1), and the
// continuation bits of all its bytes but the last.
var (
	smallLen  [64]uint8
	smallCont [64]uint64
)

func init() {
	for l := range smallLen {
		n := max(1, (l+6)/7)
		smallLen[l] = uint8(n)
		if n <= 8 {
			smallCont[l] = 0x8080808080808080 & (1<<(8*(n-1)) - 1)
		}
	}
}

// putSmall writes v < 2^56 as a minimal varint of at most 8 bytes.
func putSmall(b []byte, i int, v uint64) int {
	l := bits.Len64(v) & 63
	binary.LittleEndian.PutUint64(b[i:i+8], spread56(v)|smallCont[l])
	return i + int(smallLen[l])
}

// putUvarint writes v as a minimal varint (what AppendUvarint appends).
func putUvarint(b []byte, i int, v uint64) int {
	if v < 1<<56 {
		return putSmall(b, i, v)
	}
	binary.LittleEndian.PutUint64(b[i:i+8], spread56(v)|0x8080808080808080)
	v >>= 56
	if v < 0x80 {
		b[i+8] = byte(v)
		return i + 9
	}
	b[i+8] = byte(v) | 0x80
	b[i+9] = byte(v >> 7)
	return i + 10
}

// putU128 writes the u128 lo, hi as a minimal varint (what AppendU128 appends).
func putU128(b []byte, i int, lo, hi uint64) int {
	for hi != 0 || lo >= 1<<56 {
		binary.LittleEndian.PutUint64(b[i:i+8], spread56(lo)|0x8080808080808080)
		i += 8
		lo = lo>>56 | hi<<8
		hi >>= 56
	}
	return putSmall(b, i, lo)
}
