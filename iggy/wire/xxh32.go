package wire

import (
	"encoding/binary"
	"math/bits"
)

const (
	xxPrime32x1 uint32 = 2654435761
	xxPrime32x2 uint32 = 2246822519
	xxPrime32x3 uint32 = 3266489917
	xxPrime32x4 uint32 = 668265263
	xxPrime32x5 uint32 = 374761393
)

// XXH32 returns the 32-bit xxHash of b with seed. Iggy uses seed 0 for message keys
// (MessagesKey partitioning) and for string consumer ids.
func XXH32(b []byte, seed uint32) uint32 {
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		v1 := seed + xxPrime32x1 + xxPrime32x2
		v2 := seed + xxPrime32x2
		v3 := seed
		v4 := seed - xxPrime32x1
		for len(b) >= 16 {
			v1 = xxRound32(v1, binary.LittleEndian.Uint32(b[0:]))
			v2 = xxRound32(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = xxRound32(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = xxRound32(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) +
			bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = seed + xxPrime32x5
	}
	h += n
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * xxPrime32x3
		h = bits.RotateLeft32(h, 17) * xxPrime32x4
	}
	for ; len(b) > 0; b = b[1:] {
		h += uint32(b[0]) * xxPrime32x5
		h = bits.RotateLeft32(h, 11) * xxPrime32x1
	}
	h ^= h >> 15
	h *= xxPrime32x2
	h ^= h >> 13
	h *= xxPrime32x3
	h ^= h >> 16
	return h
}

func xxRound32(acc, input uint32) uint32 {
	acc += input * xxPrime32x2
	return bits.RotateLeft32(acc, 13) * xxPrime32x1
}
