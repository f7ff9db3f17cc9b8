package capture

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/google/uuid"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/internal/schema"
	"github.com/modelcalls/modelcalls/rollout"
)

// Exchange is one captured model call as written to a capture file. Field order is the JSON key
// order of the line: NeMo Gym's thirteen keys in the order its CaptureStore writes them, then our
// provenance and client-id keys, each of those written only when known (non-nil); docs/format.md,
// section 3, gives the whole line. The error categories are NeMo Gym's (timeout, rate_limit, auth,
// not_found, client_error, upstream_error, connection, exception, incomplete, stream_truncated,
// capture_parse_error) and our cancelled and capture_too_large.
//
// The json tags name the line's keys, so a reader can decode a line into an Exchange with
// encoding/json (null as nil; Request and Response keep their raw JSON as written, "null"
// included; members it does not name are ignored). Lines are written by EncodeExchange and
// AppendExchange, never by encoding/json.
type Exchange struct {
	ModelCallID string                  `json:"model_call_id"` // 32 lowercase hex characters (NewModelCallID)
	Dialect     string                  `json:"dialect"`       // "responses", "chat", "messages" or "gemini" (package dialect)
	ModelRef    *rollout.ModelServerRef `json:"model_ref"`     // null when the model server has no name
	StartedAt   float64                 `json:"started_at"`    // wall clock, seconds since the Unix epoch
	CompletedAt float64                 `json:"completed_at"`  // wall clock, seconds since the Unix epoch
	LatencyMS   float64                 `json:"latency_ms"`    // monotonic duration in ms, rounded with RoundMS
	// LatencyTTFTMS is the monotonic time to the first non-empty body chunk in
	// ms, rounded with RoundMS; nil (null) when no body byte arrived.
	LatencyTTFTMS *float64 `json:"latency_ttft_ms"`
	StatusCode    *int     `json:"status_code"`    // HTTP status, null when none was observed
	ErrorCategory *string  `json:"error_category"` // one of the categories named above; null on success
	// Request is the request body when it is a JSON object, compacted; nil writes null.
	Request json.RawMessage `json:"request"`
	// Response is the parsed or reconstructed response object, compacted; nil writes null.
	Response json.RawMessage `json:"response"`
	// RequestRaw is written only when non-nil: the request body as text when it was
	// non-empty and not a JSON object.
	RequestRaw *string `json:"request_raw"`
	// ResponseRaw is written only when non-nil (or ResponseRawFrom is set): the body
	// as text when it was non-empty and streamed or unparseable (as NeMo Gym's middleware keeps it).
	ResponseRaw *string `json:"response_raw"`
	// ResponseRawFrom, when non-nil, supplies response_raw's bytes instead of ResponseRaw, read to EOF
	// while the line is written (for bodies spooled to disk). It is not itself serialised.
	ResponseRawFrom io.Reader `json:"-"`
	// ResponseRawEscaped, when non-nil, is response_raw already escaped for the line (by a
	// TextEscaper, as the body arrived), taking the place of ResponseRaw and ResponseRawFrom. It is
	// written as is, not checked again.
	ResponseRawEscaped *EscapedText `json:"-"`
	// ResponseTo, when non-nil, writes the response value instead of Response, while the line is
	// written (a stream's reconstruction, streamed from its spooled text instead of built in
	// memory). It must write one compact JSON object, or null, that IsPayloadObject would accept;
	// it is not checked again.
	ResponseTo func(io.Writer) error `json:"-"`
	// PayloadsChecked says the caller already checked Request and Response with IsPayloadObject,
	// so writing the line does not validate them a second time.
	PayloadsChecked bool `json:"-"`
	// RequestCompact says Request is known to have no white space outside its strings
	// (IsCompactJSON), so the line copies it without looking for any. A gateway that checks the
	// request before forwarding it does that walk then, and not while the client waits for the
	// call's last chunk.
	RequestCompact bool `json:"-"`

	ResponseSource           *string `json:"response_source"` // "upstream" or "local"
	UpstreamAttempted        *bool   `json:"upstream_attempted"`
	UpstreamStatusCode       *int    `json:"upstream_status_code"`
	LocalResponseReason      *string `json:"local_response_reason"` // "local_response_reason", e.g. "upstream_unreachable"
	ClientSessionID          *string `json:"client_session_id"`
	ClientAssistantMessageID *string `json:"client_assistant_message_id"` // "client_assistant_message_id"
	// TokenCapture, written only when non-nil, is what a gateway asking the engine for token ids
	// did to the call: a compact JSON object {"engine", "added", "prompt_token_ids",
	// "prompt_token_error"} (docs/format.md). It is written as is, not checked again.
	TokenCapture json.RawMessage `json:"token_capture"`
	// ClientLogicalRequestID and ClientParentCallID are lineage evidence a harness declares in
	// request headers (docs/format.md, section 3.6); the record does not carry them.
	ClientLogicalRequestID *string `json:"client_logical_request_id"`
	ClientParentCallID     *string `json:"client_parent_call_id"`
	// PathModel, written only when non-nil, is the model the request's URL path names (a dialect
	// whose paths hold the model; dialect.ModelOfPath), which the record's model falls back to
	// when neither the response nor the request names one.
	PathModel *string `json:"path_model"`
}

// EncodeExchange returns ex as one compact JSON line without the trailing newline, in the key order
// of Exchange. Strings are written as UTF-8 without HTML escaping (as orjson does); invalid UTF-8 in
// raw text becomes U+FFFD. Floats always carry a fraction or exponent (1.0, not 1). It fails when
// Request or Response is set but is not a JSON object the store's reads accept inside a line
// (strict JSON in valid UTF-8, nested less than jsonscan.MaxNesting deep), or when
// ex.ResponseRawFrom fails: the store never writes a line it cannot read back.
func EncodeExchange(ex *Exchange) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteExchange(&buf, ex); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteExchange writes ex like EncodeExchange to w, streaming response_raw from ex.ResponseRawFrom
// when set. The output contains no newline.
func WriteExchange(w io.Writer, ex *Exchange) error {
	if !ex.PayloadsChecked {
		for _, obj := range []struct {
			name string
			raw  json.RawMessage
		}{{"request", ex.Request}, {"response", ex.Response}} {
			if obj.raw != nil && !IsPayloadObject(obj.raw) {
				return fmt.Errorf("encode exchange: %s is not a JSON object", obj.name)
			}
		}
	}
	e := &lineWriter{w: w}
	e.raw(`{"` + schema.ModelCallID + `":`)
	e.str(ex.ModelCallID)
	e.raw(`,"` + schema.Dialect + `":`)
	e.str(ex.Dialect)
	e.raw(`,"` + schema.ModelRef + `":`)
	if ex.ModelRef == nil {
		e.raw("null")
	} else {
		e.raw(`{"type":`)
		e.str(ex.ModelRef.Type)
		e.raw(`,"name":`)
		e.str(ex.ModelRef.Name)
		e.raw("}")
	}
	e.raw(`,"` + schema.StartedAt + `":`)
	e.float(ex.StartedAt)
	e.raw(`,"` + schema.CompletedAt + `":`)
	e.float(ex.CompletedAt)
	e.raw(`,"` + schema.LatencyMS + `":`)
	e.float(ex.LatencyMS)
	e.raw(`,"` + schema.LatencyTTFTMS + `":`)
	e.optFloat(ex.LatencyTTFTMS)
	e.raw(`,"` + schema.StatusCode + `":`)
	e.optInt(ex.StatusCode)
	e.raw(`,"` + schema.ErrorCategory + `":`)
	e.optStr(ex.ErrorCategory)
	e.raw(`,"` + schema.Request + `":`)
	if ex.RequestCompact && ex.Request != nil {
		e.write(ex.Request)
	} else {
		e.object(ex.Request)
	}
	e.raw(`,"` + schema.Response + `":`)
	if ex.ResponseTo != nil {
		if e.err == nil {
			if err := ex.ResponseTo(e.w); err != nil {
				e.err = fmt.Errorf("write reconstructed response: %w", err)
			}
		}
	} else {
		e.object(ex.Response)
	}
	e.keyStr(`,"`+schema.RequestRaw+`":`, ex.RequestRaw)
	if t := ex.ResponseRawEscaped; t != nil {
		e.raw(`,"` + schema.ResponseRaw + `":"`)
		e.write(t.Bytes)
		if t.From != nil && e.err == nil {
			if _, err := io.Copy(e.w, t.From); err != nil {
				e.err = fmt.Errorf("read response body spool: %w", err)
			}
		}
		e.raw(`"`)
	} else if ex.ResponseRawFrom != nil {
		e.raw(`,"` + schema.ResponseRaw + `":`)
		e.strFrom(ex.ResponseRawFrom)
	} else {
		e.keyStr(`,"`+schema.ResponseRaw+`":`, ex.ResponseRaw)
	}
	e.keyStr(`,"`+schema.ResponseSource+`":`, ex.ResponseSource)
	if ex.UpstreamAttempted != nil {
		e.raw(`,"` + schema.UpstreamAttempted + `":`)
		e.raw(strconv.FormatBool(*ex.UpstreamAttempted))
	}
	if ex.UpstreamStatusCode != nil {
		e.raw(`,"` + schema.UpstreamStatusCode + `":`)
		e.optInt(ex.UpstreamStatusCode)
	}
	e.keyStr(`,"`+schema.LocalResponseReason+`":`, ex.LocalResponseReason)
	e.keyStr(`,"`+schema.ClientSessionID+`":`, ex.ClientSessionID)
	e.keyStr(`,"`+schema.ClientAssistantMessageID+`":`, ex.ClientAssistantMessageID)
	if ex.TokenCapture != nil {
		e.raw(`,"` + schema.TokenCapture + `":`)
		e.write(ex.TokenCapture)
	}
	e.keyStr(`,"`+schema.ClientLogicalRequestID+`":`, ex.ClientLogicalRequestID)
	e.keyStr(`,"`+schema.ClientParentCallID+`":`, ex.ClientParentCallID)
	e.keyStr(`,"`+schema.PathModel+`":`, ex.PathModel)
	e.raw("}")
	if e.err != nil {
		return fmt.Errorf("encode exchange: %w", e.err)
	}
	return nil
}

// IsPayloadObject reports whether b can be stored as an exchange's request or response object: a
// JSON object that reads back once it sits inside a line, under the strict rules of the store's
// reads (CheckLine: valid UTF-8, no NaN or Infinity), nested at most jsonscan.MaxNesting-1 deep
// since the line's own object adds a level. encoding/json accepts one level more and invalid UTF-8;
// such a payload would make its whole line unreadable. The gateway asks before it chooses between
// request and request_raw (or a response object and null), so a payload the store would refuse
// degrades to raw text instead of costing the whole line.
func IsPayloadObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && jsonscan.Validate(b) == nil && !jsonscan.DeeperThan(b, jsonscan.MaxNesting-1)
}

// IsCompactJSON reports whether the valid JSON text b has no white space outside its strings, so
// that json.Compact would return it unchanged (and a capture line can hold it as it is).
func IsCompactJSON(b []byte) bool { return isCompact(b) }

// isCompact is IsCompactJSON.
func isCompact(b []byte) bool {
	if bytes.IndexAny(b, " \t\r\n") < 0 {
		return true
	}
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			i = jsonscan.SkipString(b, i)
			continue
		case ' ', '\t', '\r', '\n':
			return false
		}
		i++
	}
	return true
}

// lineWriter writes JSON pieces to w and remembers the first error.
type lineWriter struct {
	w       io.Writer
	err     error
	scratch []byte
}

// copy writes b, which may be reused once copy returns (the scratch buffer).
func (e *lineWriter) copy(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// write writes b, which must not change until the line is written: a large b goes to a gathering
// writer (the store's line buffer) by reference.
func (e *lineWriter) write(b []byte) {
	if e.err != nil {
		return
	}
	if g, ok := e.w.(*lineBuf); ok && len(b) >= refMin {
		g.ref(b)
		return
	}
	_, e.err = e.w.Write(b)
}

func (e *lineWriter) raw(s string) {
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

func (e *lineWriter) str(s string) {
	if lb, ok := e.w.(*lineBuf); ok {
		if e.err == nil {
			lb.b = jsonscan.AppendString(lb.b, s) // straight into the line, no scratch copy
		}
		return
	}
	e.scratch = jsonscan.AppendString(e.scratch[:0], s)
	e.copy(e.scratch)
}

func (e *lineWriter) optStr(s *string) {
	if s == nil {
		e.raw("null")
		return
	}
	e.str(*s)
}

// keyStr writes key (the literal ,"name": of an optional key) and *s as a JSON string when s is
// not nil, and nothing when it is: the keys a line leaves out when they are unknown.
func (e *lineWriter) keyStr(key string, s *string) {
	if s != nil {
		e.raw(key)
		e.str(*s)
	}
}

func (e *lineWriter) optInt(n *int) {
	if n == nil {
		e.raw("null")
		return
	}
	e.raw(strconv.Itoa(*n))
}

func (e *lineWriter) optFloat(f *float64) {
	if f == nil {
		e.raw("null")
		return
	}
	e.float(*f)
}

func (e *lineWriter) float(f float64) {
	e.scratch = AppendFloat(e.scratch[:0], f)
	e.copy(e.scratch)
}

func (e *lineWriter) object(raw json.RawMessage) {
	if raw == nil {
		e.raw("null")
		return
	}
	if isCompact(raw) {
		e.write(raw) // the common case: no copy of a payload that may be megabytes long
		return
	}
	// The payload is valid JSON (checked above or by the caller): drop the white space outside
	// strings in pieces, without a second validating pass or a compacted copy of the whole.
	if piece := min(len(raw), 64<<10); cap(e.scratch) < piece {
		e.scratch = make([]byte, 0, piece)
	}
	for i := 0; i < len(raw) && e.err == nil; {
		e.scratch = e.scratch[:0]
		for i < len(raw) && len(e.scratch) < 64<<10 {
			switch c := raw[i]; c {
			case '"':
				j := jsonscan.SkipString(raw, i)
				e.scratch = append(e.scratch, raw[i:j]...)
				i = j
			case ' ', '\t', '\r', '\n':
				i++
			default:
				e.scratch = append(e.scratch, c)
				i++
			}
		}
		e.copy(e.scratch)
	}
}

// strFrom writes a JSON string whose content is read from r, keeping memory to one buffer. A UTF-8
// sequence split across reads is carried over; invalid bytes become U+FFFD.
func (e *lineWriter) strFrom(r io.Reader) {
	e.raw(`"`)
	buf := make([]byte, 64<<10)
	var carry []byte
	for e.err == nil {
		n, rerr := r.Read(buf[len(carry):])
		copy(buf, carry) // carry sits at the front; Read filled after it
		chunk := buf[:len(carry)+n]
		keep := 0
		if rerr == nil {
			keep = incompleteTail(chunk)
		}
		e.scratch = jsonscan.AppendEscaped(e.scratch[:0], chunk[:len(chunk)-keep])
		e.copy(e.scratch)
		carry = append(carry[:0], chunk[len(chunk)-keep:]...)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			e.err = fmt.Errorf("read response body spool: %w", rerr)
			return
		}
	}
	e.raw(`"`)
}

// EscapedText is the content of a JSON string (without its quotes) already escaped by a
// TextEscaper: Bytes, then, when From is set, everything read from From to EOF.
type EscapedText struct {
	Bytes []byte
	From  io.Reader
}

// TextEscaper escapes text for a JSON string in pieces, exactly as the line writer escapes a
// whole string (UTF-8 kept, no HTML escaping, invalid bytes as U+FFFD): the bytes of a UTF-8
// sequence that a piece ends in the middle of are held back and escaped with the next piece. The
// zero value is ready to use.
type TextEscaper struct {
	carry [3]byte
	n     int
}

// Append appends the escaped form of p to dst, holding back an incomplete UTF-8 sequence at its end.
func (t *TextEscaper) Append(dst, p []byte) []byte {
	if t.n > 0 {
		// A sequence split across pieces (rare): escape it with the start of p.
		joined := append(t.carry[:t.n:t.n], p...)
		t.n = 0
		p = joined
	}
	keep := incompleteTail(p)
	dst = jsonscan.AppendEscaped(dst, p[:len(p)-keep])
	t.n = copy(t.carry[:], p[len(p)-keep:])
	return dst
}

// Flush appends the bytes held back (an incomplete UTF-8 sequence at the end of the text, each of
// its bytes then written as U+FFFD) and resets t.
func (t *TextEscaper) Flush(dst []byte) []byte {
	dst = jsonscan.AppendEscaped(dst, t.carry[:t.n])
	t.n = 0
	return dst
}

// incompleteTail returns how many bytes at the end of b start a UTF-8 sequence that may be
// completed by the next read (0 to 3).
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a lead byte: is its sequence longer than what we have?
			need := 2
			if c >= 0xF0 {
				need = 4
			} else if c >= 0xE0 {
				need = 3
			}
			if need > k {
				return k
			}
			return 0
		}
	}
	return 0
}

// AppendFloat appends f the way orjson writes a float: the shortest text that reads back to f, always
// with a fraction or exponent (1.0, 0.02, 1795968571.513956, 1e+16). NaN and infinities, which JSON
// cannot hold, are written as null.
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		return strconv.AppendFloat(dst, f, 'e', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, '.', '0')
	}
	return dst
}

// NewModelCallID returns a fresh model call id: a random (version 4) UUID as 32 lowercase hex
// characters, as NeMo Gym's uuid4().hex.
func NewModelCallID() string {
	u := uuid.New()
	return hex.EncodeToString(u[:])
}

// RoundMS rounds a duration in milliseconds to 2 decimals exactly as Python's round(x, 2): correctly
// rounded on the exact binary value, ties to even, as NeMo Gym rounds latency_ms.
func RoundMS(ms float64) float64 {
	// Fast path: x = ms*100 is within a relative 2^-53 of the exact value, so for |ms| < 1e7 it is
	// off by less than 1.2e-7; unless its fraction is that close to a half, math.Round gives the
	// integer the exact value rounds to, and n/100 (two exact integers, one IEEE division) is the
	// double nearest n/100, which is what formatting and parsing back return.
	if x := ms * 100; math.Abs(ms) < 1e7 {
		n := math.Round(x)
		if d := math.Abs(x - math.Trunc(x)); d < 0.5-1e-6 || d > 0.5+1e-6 {
			return n / 100
		}
	}
	v, err := strconv.ParseFloat(strconv.FormatFloat(ms, 'f', 2, 64), 64)
	if err != nil {
		return ms
	}
	return v
}
