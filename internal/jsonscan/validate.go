// Package jsonscan owns the strict JSON validator shared by the capture store and the record
// builder: RFC 8259 syntax, valid UTF-8 inside strings (as NeMo Gym's orjson requires), no NaN or
// Infinity (SPEC §7), bounded nesting. It allocates nothing on valid input and runs several times
// faster than encoding/json.Valid followed by utf8.Valid, which matters because every capture line
// is validated on every read.
package jsonscan

import (
	"fmt"
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

// Validate reports whether data holds exactly one JSON value, optionally
// surrounded by JSON whitespace.
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
				if len(data)-i < 6 || !isHex4(data[i+2:i+6]) {
					return i, &SyntaxError{i, "invalid \\u escape"}
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

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !isHexDigit(c) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func validNumber(data []byte, i int) (int, error) {
	start := i
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i)
	default:
		return i, &SyntaxError{start, "invalid number"}
	}
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
		j := skipDigits(data, i)
		if j == i {
			return j, &SyntaxError{start, "invalid number"}
		}
		i = j
	}
	return i, nil
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
