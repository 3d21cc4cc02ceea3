package schema

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// A json payload is most often already compact (no whitespace outside strings, no escape
// sequence), and then checking it is simpler than checking JSON: quickCompact accepts such
// a payload in one pass that allocates nothing, where the general checks (compactJSON,
// utf8.Valid and fastjson's validator) take seven. It decides "yes" only; anything else,
// valid or not, goes to the general checks, which also word the error. So it never
// accepts what they refuse: FuzzQuickCompact holds it to them byte for byte.

// quickMaxDepth is how deep quickCompact follows nesting; deeper is left to the general
// checks.
const quickMaxDepth = 64

// quickCompact reports whether p is known to be valid UTF-8, valid JSON by fastjson's
// rules and compact (compactJSON). False means not known.
func quickCompact(p []byte) bool {
	var stack [quickMaxDepth]byte // the open '{' and '[', innermost last
	depth := 0
	const (
		wantValue = iota // a value starts at i
		wantKey          // an object key starts at i
		wantNext         // a value ended before i: ',', a closing bracket or the end
	)
	state := wantValue
	i, n := 0, len(p)
	for {
		switch state {
		case wantValue:
			if i >= n {
				return false
			}
			switch c := p[i]; c {
			case '{', '[':
				if depth == quickMaxDepth {
					return false
				}
				stack[depth] = c
				depth++
				i++
				switch {
				case i < n && p[i] == c+2: // '}' is '{'+2 and ']' is '['+2
					depth--
					i++
					state = wantNext
				case c == '{':
					state = wantKey
				}
			case '"':
				if i = quickString(p, i+1); i < 0 {
					return false
				}
				state = wantNext
			case 't', 'f', 'n':
				if i = quickLiteral(p, i); i < 0 {
					return false
				}
				state = wantNext
			default:
				if i = quickNumber(p, i); i < 0 {
					return false
				}
				state = wantNext
			}
		case wantKey:
			if i >= n || p[i] != '"' {
				return false
			}
			if i = quickString(p, i+1); i < 0 || i >= n || p[i] != ':' {
				return false
			}
			i++
			state = wantValue
		case wantNext:
			if depth == 0 {
				return i == n
			}
			if i >= n {
				return false
			}
			open := stack[depth-1]
			switch p[i] {
			case ',':
				state = wantValue
				if open == '{' {
					state = wantKey
				}
			case open + 2:
				depth--
			default:
				return false
			}
			i++
		}
	}
}

// quickString checks a string's bytes from i (after its opening quote) and returns the
// index after its closing quote, or -1: a backslash (not compact), a control byte
// (invalid JSON), invalid UTF-8 or no closing quote. Keys and most values are short and
// read byte by byte; past 16 bytes the vectorised IndexByte finds the closing quote (the
// first one, as there is no backslash) and plainText checks what it encloses.
func quickString(p []byte, i int) int {
	for end := min(len(p), i+16); i < end; i++ {
		if c := p[i]; !asciiPlain[c] {
			if c == '"' {
				return i + 1
			}
			if c < 0x80 {
				return -1
			}
			break // non-ASCII: plainText checks it
		}
	}
	q := bytes.IndexByte(p[i:], '"')
	if q < 0 || !plainText(p[i:i+q]) {
		return -1
	}
	return i + q + 1
}

// asciiPlain marks the bytes a compact string holds as they are: ASCII from 0x20 on, but
// the quote and the backslash.
var asciiPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainText reports whether s is valid UTF-8 without a backslash or a byte below 0x20.
func plainText(s []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	j := 0
	// Eight ASCII bytes at a time: adding 0x60 to each sets its high bit exactly when it
	// is 0x20 or above (no byte carries into the next, all being below 0x80), and
	// x ^ '\\'·ones has a zero byte exactly where x has a backslash.
	for ; j+16 <= len(s); j += 16 { // two words a step: fewer branches
		x, y := binary.LittleEndian.Uint64(s[j:]), binary.LittleEndian.Uint64(s[j+8:])
		if (x|y)&highs != 0 {
			break
		}
		bx, by := x^'\\'*ones, y^'\\'*ones
		if (x+0x60*ones)&(y+0x60*ones)&highs != highs || ((bx-ones)&^bx|(by-ones)&^by)&highs != 0 {
			return false
		}
	}
	for ; j+8 <= len(s); j += 8 {
		x := binary.LittleEndian.Uint64(s[j:])
		if x&highs != 0 {
			break
		}
		b := x ^ '\\'*ones
		if (x+0x60*ones)&highs != highs || (b-ones)&^b&highs != 0 {
			return false
		}
	}
	for _, c := range s[j:] {
		if c < 0x80 && !asciiPlain[c] {
			return false
		}
	}
	return utf8.Valid(s[j:])
}

// quickLiteral checks true, false or null at i and returns the index after it, or -1.
func quickLiteral(p []byte, i int) int {
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(p)-i >= len(lit) && string(p[i:i+len(lit)]) == lit {
			return i + len(lit)
		}
	}
	return -1
}

// quickNumber checks a number at i as fastjson does (an optional minus, digits without a
// leading zero, an optional fraction and exponent) and returns the index after it, or -1.
func quickNumber(p []byte, i int) int {
	n := len(p)
	if i < n && p[i] == '-' {
		i++
	}
	start := i
	i = digits(p, i)
	if i == start || p[start] == '0' && i-start > 1 {
		return -1
	}
	if i < n && p[i] == '.' {
		if j := digits(p, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < n && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < n && (p[i] == '+' || p[i] == '-') {
			i++
		}
		j := digits(p, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// digits returns the index of the first byte at or after i that is not a decimal digit.
func digits(p []byte, i int) int {
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	return i
}
