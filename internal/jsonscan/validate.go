// Package jsonscan owns the strict JSON validator shared by the capture store and the record
// builder. It accepts exactly what NeMo Gym's reader (orjson) decodes: RFC 8259 syntax, valid UTF-8
// inside strings, no NaN or Infinity, every number finite as a double (1e400 is refused: orjson
// fails with "number is infinity when parsed as double"; 1e-400 reads as 0.0 and is accepted),
// every \u escape of a surrogate paired (a high half \uD800-\uDBFF followed at once by an escaped
// low half \uDC00-\uDFFF; a lone half of either kind is refused, as orjson refuses it), and bounded
// nesting. It allocates nothing on valid input and runs several times faster than
// encoding/json.Valid followed by utf8.Valid, which matters because every capture line is validated
// on every read.
package jsonscan

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// MaxNesting bounds container nesting during validation so hostile input
// cannot exhaust the stack. Python's json module stops near 1000 levels.
const MaxNesting = 10000

// SyntaxError reports where a JSON text stopped being valid.
type SyntaxError struct {
	Offset int // byte offset of the offending byte
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Unrepresentable reports whether the text was refused only for a value a lenient reader (Python's
// json, Go's encoding/json with UseNumber) still accepts but the store cannot hold: a number that
// overflows a double or an unpaired surrogate escape. Such text was meant as JSON; a reader that
// must not silently drop it (a stream event) can tell it apart from text that is not JSON at all.
func (e *SyntaxError) Unrepresentable() bool {
	switch e.Msg {
	case msgOverflow, msgLoneLow, msgLoneHigh:
		return true
	}
	return false
}

const (
	msgOverflow = "number overflows a double"
	msgLoneLow  = "unpaired low surrogate \\u escape"
	msgLoneHigh = "unpaired high surrogate \\u escape"
)

// Validate reports whether data holds exactly one JSON value, optionally surrounded by JSON
// whitespace, under the package's strict rules (orjson's). The error is a *SyntaxError.
func Validate(data []byte) error {
	i := SkipWS(data, 0)
	if i >= len(data) {
		return &SyntaxError{i, "no JSON value"}
	}
	end, err := validValue(data, i, 0)
	if err != nil {
		return err
	}
	if j := SkipWS(data, end); j != len(data) {
		return &SyntaxError{j, "data after the JSON value"}
	}
	return nil
}

func validValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, &SyntaxError{i, "unexpected end of input"}
	}
	switch c := data[i]; c {
	case '{':
		if depth >= MaxNesting {
			return i, &SyntaxError{i, "nesting too deep"}
		}
		i = SkipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return i, &SyntaxError{i, "expected object key"}
			}
			end, err := validString(data, i)
			if err != nil {
				return end, err
			}
			i = SkipWS(data, end)
			if i >= len(data) || data[i] != ':' {
				return i, &SyntaxError{i, "expected ':' after object key"}
			}
			i = SkipWS(data, i+1)
			if i, err = validValue(data, i, depth+1); err != nil {
				return i, err
			}
			i = SkipWS(data, i)
			if i >= len(data) {
				return i, &SyntaxError{i, "unterminated object"}
			}
			if data[i] == '}' {
				return i + 1, nil
			}
			if data[i] != ',' {
				return i, &SyntaxError{i, "expected ',' or '}' in object"}
			}
			i = SkipWS(data, i+1)
		}
	case '[':
		if depth >= MaxNesting {
			return i, &SyntaxError{i, "nesting too deep"}
		}
		i = SkipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = validValue(data, i, depth+1); err != nil {
				return i, err
			}
			i = SkipWS(data, i)
			if i >= len(data) {
				return i, &SyntaxError{i, "unterminated array"}
			}
			if data[i] == ']' {
				return i + 1, nil
			}
			if data[i] != ',' {
				return i, &SyntaxError{i, "expected ',' or ']' in array"}
			}
			i = SkipWS(data, i+1)
		}
	case '"':
		return validString(data, i)
	case 't':
		return validLiteral(data, i, "true")
	case 'f':
		return validLiteral(data, i, "false")
	case 'n':
		return validLiteral(data, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return validNumber(data, i)
		}
		return i, &SyntaxError{i, fmt.Sprintf("unexpected byte %q", c)}
	}
}

func validLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, &SyntaxError{i, "invalid literal"}
	}
	return i + len(lit), nil
}

func validString(data []byte, i int) (int, error) {
	start := i
	i++
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(data) {
				return i, &SyntaxError{i, "unterminated escape"}
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					return i, &SyntaxError{i, "invalid \\u escape"}
				}
				if r >= 0xD800 && r <= 0xDFFF {
					// UTF-16 surrogate: only a high half directly followed by an escaped low half
					// encodes a character.
					if r >= 0xDC00 {
						return i, &SyntaxError{i, msgLoneLow}
					}
					lo, ok := rune(0), len(data)-i >= 12 && data[i+6] == '\\' && data[i+7] == 'u'
					if ok {
						lo, ok = hex4(data, i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return i, &SyntaxError{i, msgLoneHigh}
					}
					i += 6
				}
				i += 6
			default:
				return i, &SyntaxError{i, "invalid escape"}
			}
		case c < 0x20:
			return i, &SyntaxError{i, "control character in string"}
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, &SyntaxError{i, "invalid UTF-8 in string"}
			}
			i += size
		}
	}
	return start, &SyntaxError{start, "unterminated string"}
}

// hex4 decodes the four hex digits at data[i:i+4].
func hex4(data []byte, i int) (rune, bool) {
	if len(data)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func validNumber(data []byte, i int) (int, error) {
	start := i
	if data[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i)
	default:
		return i, &SyntaxError{start, "invalid number"}
	}
	// The value is below 10^(intDigits+exp): when that bound is at most 10^308 the number is a
	// finite double, and only larger candidates are parsed.
	intDigits := i - intStart
	exp := 0
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return j, &SyntaxError{start, "invalid number"}
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		neg := data[i-1] == '-'
		j := skipDigits(data, i)
		if j == i {
			return j, &SyntaxError{start, "invalid number"}
		}
		for _, c := range data[i:j] {
			if exp = exp*10 + int(c-'0'); exp > expCap {
				exp = expCap // past any double; capping keeps the bound sound either way
				break
			}
		}
		if neg {
			exp = -exp
		}
		i = j
	}
	if intDigits+exp > maxFiniteDigits && !finite(data[start:i]) {
		return i, &SyntaxError{start, msgOverflow}
	}
	return i, nil
}

const (
	maxFiniteDigits = 308     // 10^308 < math.MaxFloat64
	expCap          = 1 << 30 // exponents are clamped here while being read
)

// finite reports whether the JSON number num, rounded to the nearest double as orjson (and
// strconv) round it, is finite. Values that underflow round to zero and are finite.
func finite(num []byte) bool {
	f, err := strconv.ParseFloat(string(num), 64)
	return err == nil || !math.IsInf(f, 0)
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// SkipWS returns the first index at or after i that is not JSON whitespace.
func SkipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// DeeperThan reports whether the valid JSON text b nests containers more than limit levels deep
// (a scalar is 0 levels, {} is 1). Text shorter than 2*limit bytes cannot, and is not scanned.
func DeeperThan(b []byte, limit int) bool {
	if len(b) < 2*limit {
		return false // each level takes an opening and a closing byte
	}
	depth := 0
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			i = SkipString(b, i)
			continue
		case '{', '[':
			if depth++; depth > limit {
				return true
			}
		case '}', ']':
			depth--
		}
		i++
	}
	return false
}
