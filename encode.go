package modelcalls

import (
	"github.com/modelcalls/modelcalls/internal/jsonscan"

	"bytes"
	"encoding/json"
	"strconv"

	"github.com/modelcalls/modelcalls/capture"
)

// Output helpers: every JSON this package writes is compact, UTF-8, without
// HTML escaping (as Python's json module and orjson), with float fields
// always written as floats ("10.0", not "10", via capture.AppendFloat).

func appendOptFloat(dst []byte, f *float64) []byte {
	if f == nil {
		return append(dst, "null"...)
	}
	return capture.AppendFloat(dst, *f)
}

func appendOptInt64(dst []byte, n *int64) []byte {
	if n == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, *n, 10)
}

func appendOptInt(dst []byte, n *int) []byte {
	if n == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, int64(*n), 10)
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return jsonscan.AppendString(dst, *s)
}

func appendOptBool(dst []byte, b *bool) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendBool(dst, *b)
}

// appendRaw appends a valid JSON value as it is. Values are written
// byte-for-byte; only a value that spans lines (possible for decoded tool-call
// argument strings) is compacted so that JSONL output stays one line.
func appendRaw(dst []byte, v []byte) []byte {
	if len(v) == 0 {
		return append(dst, "null"...)
	}
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		return append(dst, v...)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b.Bytes()...)
}

// appendKey appends `"name":` (name must need no escaping), preceded by a
// comma unless dst ends with '{'.
func appendKey(dst []byte, name string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' && dst[n-1] != '[' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}
