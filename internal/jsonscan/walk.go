package jsonscan

import "bytes"

// The walkers below move over JSON that Validate accepted (or that came from a trusted writer) by
// byte offsets, without decoding. On malformed input they stop early or return len(data), but never
// panic and never read out of bounds.

// SkipValue returns the end offset of the value starting at data[i] (trusted
// input; i must not point at whitespace). Malformed input yields some offset
// in (i, len(data)].
func SkipValue(data []byte, i int) int {
	if i >= len(data) {
		return len(data)
	}
	switch data[i] {
	case '"':
		return SkipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = SkipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(data)
	default:
		// Literal or number: runs until a delimiter.
		j := i + 1
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r', ':', '"', '{', '[':
				return j
			}
			j++
		}
		return j
	}
}

// SkipString returns the offset just past the closing quote of the string
// starting at data[i] (trusted input).
func SkipString(data []byte, i int) int {
	first := i + 1
	for j := first; j < len(data); {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return len(data)
		}
		q := j + k
		// The quote closes the string unless an odd run of backslashes escapes it.
		b := q - 1
		for b >= first && data[b] == '\\' {
			b--
		}
		if (q-1-b)%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(data)
}
