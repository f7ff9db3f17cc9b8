package jsonscan

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal the way NeMo Gym's orjson writes one: '"', '\\'
// and control characters are escaped (\n, \r, \t, \b, \f, else \u00XX), everything else is written
// as UTF-8 as it is (no HTML escaping; U+2028 and U+2029 stay raw). Invalid UTF-8 becomes U+FFFD,
// one per invalid byte, as Python's bytes.decode(errors="replace") does for the common cases.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendEscaped appends the content of a JSON string literal for s (AppendString without the
// quotes), for writers that stream one string in pieces. A piece must not end inside a UTF-8
// sequence, or the split sequence is replaced.
func AppendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Plain runs (printable ASCII other than '"' and '\\') are copied 8 bytes at a time.
		for i+8 <= len(s) && notPlain(load64Any(s, i)) == 0 {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		if n := runeLen(s, i); n > 0 {
			i += n
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, "\uFFFD"...)
		i++
		start = i
	}
	return append(dst, s[start:]...)
}

// runeLen returns the length of the valid UTF-8 sequence starting at s[i] (a non-ASCII byte), or
// 0 when it is not one: the well-formed byte sequences of Unicode's table 3-7, which exclude
// overlong forms, surrogates and code points past U+10FFFF.
func runeLen[S ~string | ~[]byte](s S, i int) int {
	c := s[i]
	var n int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 0
	}
	if i+n > len(s) || s[i+1] < lo || s[i+1] > hi {
		return 0
	}
	for k := 2; k < n; k++ {
		if s[i+k] < 0x80 || s[i+k] > 0xBF {
			return 0
		}
	}
	return n
}

// load64Any is load64 for a string or a byte slice.
func load64Any[S ~string | ~[]byte](s S, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}
