package record

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/internal/schema"
	"github.com/modelcalls/modelcalls/rollout"
)

// FromExchange returns the record of exchange ex as BuildRecord reads it from ex's capture line
// (call index 0), built without writing the whole line and reading it back: the OpenTelemetry
// exporter's live path, so that a live span equals the one `modelcalls export otlp` builds from the
// file. The fields read from the response (id, model, status, finish reason, usage, tool calls)
// come from BuildRecord over a line holding only dialect and response, the payload as the gateway
// kept it (white space and all: the line writer compacts it, which changes none of those fields);
// the envelope's fields are taken from ex as the line carries them (strings with invalid UTF-8
// replaced as the encoder does, a NaN or infinite time as null); request is ex's request object
// and request_raw its text; response_raw is left null (a span does not read it). Model is the response's model alone (a line without a
// request has nothing to fall back on): spans read the request's model from the request.
// Tests in this package and otelexport (TestSpanRecordMatchesLine) hold the two ways equal.
//
// The line is built in buf (grown as needed, returned for reuse); the record aliases it.
func FromExchange(ex *capture.Exchange, buf []byte) (*ModelCallRecord, []byte, error) {
	if ex.ModelRef != nil && ex.ModelRef.Type != rollout.ModelServerRefType {
		return nil, buf, fmt.Errorf("%w: "+schema.ModelRef+".type must be %q, got %q", ErrInvalidExchange, rollout.ModelServerRefType, ex.ModelRef.Type)
	}
	line := append(buf[:0], `{"`+schema.Dialect+`":`...)
	line = jsonscan.AppendString(line, ex.Dialect)
	line = append(line, `,"`+schema.Response+`":`...)
	if ex.Response == nil {
		line = append(line, "null"...)
	} else {
		line = append(line, ex.Response...)
	}
	line = append(line, '}')
	rec, err := BuildRecord(line, 0)
	if err != nil {
		return nil, line, err
	}
	if ex.Request != nil {
		if !ex.PayloadsChecked && !capture.IsPayloadObject(ex.Request) {
			return nil, line, fmt.Errorf("%w: request is not a JSON object", ErrInvalidExchange)
		}
		rec.Request = ex.Request
	}
	rec.ModelCallID = new(lineString(ex.ModelCallID))
	rec.Dialect = new(lineString(ex.Dialect))
	if ex.ModelRef != nil {
		rec.ModelRef = &rollout.ModelServerRef{Type: ex.ModelRef.Type, Name: lineString(ex.ModelRef.Name)}
	}
	rec.StartedAt = lineFloat(ex.StartedAt)
	rec.CompletedAt = lineFloat(ex.CompletedAt)
	rec.LatencyTotalMS = lineFloat(ex.LatencyMS)
	if ex.LatencyTTFTMS != nil {
		rec.LatencyTTFTMS = lineFloat(*ex.LatencyTTFTMS)
	}
	rec.StatusCode = ex.StatusCode
	rec.ErrorCategory = lineStringPtr(ex.ErrorCategory)
	if s := lineStringPtr(ex.ResponseSource); s != nil && (*s == "upstream" || *s == "local") {
		rec.ResponseSource = s
	}
	rec.UpstreamAttempted = ex.UpstreamAttempted
	rec.UpstreamStatusCode = ex.UpstreamStatusCode
	rec.LocalResponseReason = lineStringPtr(ex.LocalResponseReason)
	rec.ClientSessionID = lineStringPtr(ex.ClientSessionID)
	rec.ClientAssistantMessageID = lineStringPtr(ex.ClientAssistantMessageID)
	if ex.RequestRaw != nil {
		// A record holds the raw text as its JSON string token, as the capture line has it
		// (AppendString replaces invalid UTF-8 as the line's encoder does).
		rec.RequestRaw = RawText(jsonscan.AppendString(nil, *ex.RequestRaw))
	}
	return rec, line, nil
}

// lineString is s as it reads back from a capture line: the encoder replaces invalid UTF-8.
func lineString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out, _ := jsonscan.String(jsonscan.AppendString(nil, s))
	return out
}

func lineStringPtr(s *string) *string {
	if s == nil {
		return nil
	}
	return new(lineString(*s))
}

// lineFloat is f as it reads back from a capture line: null (nil) when NaN or infinite, else exact
// (the encoder writes the shortest form that parses back to f).
func lineFloat(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}
