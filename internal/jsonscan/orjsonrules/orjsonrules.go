// Package orjsonrules is a second, independent reader of the JSON rules NeMo Gym's capture reader
// (orjson) enforces, for tests: a text is accepted only when it is RFC 8259 JSON (no NaN or
// Infinity), valid UTF-8, every number is finite once rounded to a double (1e400 is refused,
// 1e-400 is 0.0), and every \u escape of a UTF-16 surrogate is a high half directly followed by an
// escaped low half. It shares no code with jsonscan.Validate, which it exists to check: syntax comes
// from encoding/json, numbers from strconv, surrogate pairing from a lexical scan of the raw bytes.
//
// Orjson, when a Python with it is installed, is the third opinion (see Orjson).
package orjsonrules

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Check returns nil when b is one JSON text orjson.loads accepts, else why not.
func Check(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	if !json.Valid(b) {
		return errors.New("not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if n, ok := tok.(json.Number); ok {
			if f, err := strconv.ParseFloat(n.String(), 64); err != nil && math.IsInf(f, 0) {
				return fmt.Errorf("number %.40s is infinite as a double", n)
			}
		}
	}
	return checkSurrogates(b)
}

// checkSurrogates scans the strings of the valid JSON text b for \u escapes of surrogates.
func checkSurrogates(b []byte) error {
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			if b[i+1] != 'u' {
				i++ // a one-letter escape
				continue
			}
			r := escapedUnit(b[i+2 : i+6])
			switch {
			case !utf16.IsSurrogate(r):
				i += 5
			case r >= 0xDC00:
				return fmt.Errorf("lone low surrogate at byte %d", i)
			case i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u':
				return fmt.Errorf("high surrogate without a low half at byte %d", i)
			default:
				if lo := escapedUnit(b[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
					return fmt.Errorf("high surrogate followed by %U at byte %d", lo, i)
				}
				i += 11
			}
		}
	}
	return nil
}

func escapedUnit(hex []byte) rune {
	n, err := strconv.ParseUint(string(hex), 16, 16)
	if err != nil {
		panic("orjsonrules: \\u escape without four hex digits in valid JSON")
	}
	return rune(n)
}

// CheckLines applies Check to every non-blank line of a JSONL text and also requires each line to
// hold a JSON object (what NeMo Gym's tolerant read counts as one exchange). It returns the
// 1-based numbers of the damaged lines with their reasons.
func CheckLines(jsonl []byte) map[int]error {
	damaged := map[int]error{}
	sc := bufio.NewScanner(bytes.NewReader(jsonl))
	sc.Buffer(nil, 1<<30)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := Check(line); err != nil {
			damaged[n] = err
		} else if bytes.TrimLeft(line, " \t\r\n")[0] != '{' {
			damaged[n] = errors.New("not a JSON object")
		}
	}
	return damaged
}

// ErrNoOrjson is returned by Orjson when no python3 with the orjson module is on PATH.
var ErrNoOrjson = errors.New("no python3 with orjson")

// orjsonScript reads JSON texts from stdin, one per line (hex-encoded so any bytes pass), and
// prints "ok" or "error: <reason>" for each after orjson.loads.
const orjsonScript = `
import sys, orjson
for line in sys.stdin:
    try:
        orjson.loads(bytes.fromhex(line.strip()))
        print("ok")
    except orjson.JSONDecodeError as e:
        print("error: " + str(e).replace("\n", " "))
`

// Orjson runs python3's orjson.loads over each text and returns nil for those it accepts and its
// error for the others, or ErrNoOrjson.
func Orjson(texts [][]byte) ([]error, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	if exec.Command("python3", "-c", "import orjson").Run() != nil {
		return nil, ErrNoOrjson
	}
	var in bytes.Buffer
	for _, t := range texts {
		fmt.Fprintf(&in, "%x\n", t)
	}
	cmd := exec.Command("python3", "-c", orjsonScript)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python3 orjson: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		return nil, fmt.Errorf("python3 orjson answered %d lines for %d texts", len(lines), len(texts))
	}
	res := make([]error, len(texts))
	for i, l := range lines {
		if l != "ok" {
			res[i] = errors.New(strings.TrimPrefix(l, "error: "))
		}
	}
	return res, nil
}
