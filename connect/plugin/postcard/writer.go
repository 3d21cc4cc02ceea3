package postcard

import "unicode/utf8"

// AppendUvarint appends v as a minimal unsigned LEB128 varint (u16, u32, u64 and usize all
// encode this way).
func AppendUvarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// AppendU128 appends the u128 whose low and high halves are lo and hi as a minimal varint.
func AppendU128(dst []byte, lo, hi uint64) []byte {
	for hi != 0 || lo >= 0x80 {
		dst = append(dst, byte(lo)|0x80)
		lo = lo>>7 | hi<<57
		hi >>= 7
	}
	return append(dst, byte(lo))
}

// AppendOption appends an Option tag: 0x01 when some, 0x00 otherwise.
func AppendOption(dst []byte, some bool) []byte {
	if some {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// AppendBytes appends a Vec<u8>: its length, then the bytes.
func AppendBytes(dst, b []byte) []byte {
	dst = AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendString appends a String: its byte length, then the bytes. The caller must pass valid
// UTF-8 (a Rust decoder rejects anything else); see [ValidString].
func AppendString(dst []byte, s string) []byte {
	dst = AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// ValidString reports whether s can be encoded as a postcard String a Rust decoder accepts.
func ValidString(s string) bool { return utf8.ValidString(s) }

// uvarintLen returns the encoded length of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
