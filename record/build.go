package record

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/internal/schema"
	"github.com/modelcalls/modelcalls/rollout"
)

// ErrInvalidExchange is the errors.Is target of every error BuildRecord returns: the exchange line is
// damaged: not a JSON object under NeMo Gym's reader's rules, or an envelope field of the wrong
// type (see BuildRecord). Readers count such lines as damaged.
var ErrInvalidExchange = errors.New("invalid exchange")

// BuildRecord ports build_model_call_record: it maps one captured exchange (one capture line, a JSON
// object) and its capture index into a ModelCallRecord, with NeMo Gym's field rules except where
// this comment and the field comments of ModelCallRecord say otherwise.
//
// The exchange envelope is ours, the payloads are the world's. The line is damaged (an error wrapping
// ErrInvalidExchange) only when it is not a valid JSON object under NeMo Gym's reader's rules (strict
// JSON: no NaN/Infinity, valid UTF-8, every number finite as a double, every escaped surrogate
// paired; a line with 1e400 or a lone "\ud800" is damage whoever wrote it) or when an envelope field
// has the wrong JSON type:
//
//	model_call_id, dialect, error_category        string or null
//	model_ref                                     null or {"type": "responses_api_models", "name": string, ...}
//	status_code                                   integer literal or null
//	started_at, completed_at, latency_ms,
//	latency_ttft_ms                               number or null (finite float64)
//
// Everything else is lenient: request/response that are not objects become null; request_raw /
// response_raw, provenance (response_source "upstream"|"local", upstream_attempted bool,
// upstream_status_code integer, local_response_reason string) and client ids (client_session_id,
// client_assistant_message_id strings) of the wrong type become null; malformed parts inside the
// payloads are skipped (NeMo Gym drops such a record as damaged: one odd payload part must not
// lose the call). Absent keys read as null, unknown keys are ignored, and a repeated key's
// last value wins (as Python's json). The record aliases exchange (Request, Response, RequestRaw,
// ResponseRaw and tool-call arguments are sub-slices): do not modify exchange afterwards.
func BuildRecord(exchange []byte, callIndex int) (*ModelCallRecord, error) {
	ex := jsonscan.TrimWS(exchange)
	// One pass validates the line and maps its members and the response's; the record is built
	// from that map without walking the line again.
	// The scanner and its member map are reused across calls (a record keeps none of their memory).
	p := buildScanners.Get().(*buildScanner)
	defer func() {
		p.members = p.members[:0]
		p.sc.Reset()
		buildScanners.Put(p)
	}()
	var err error
	p.members, err = p.sc.Members(ex, p.members[:0])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidExchange, err)
	}
	if !jsonscan.IsObject(ex) {
		return nil, fmt.Errorf("%w: not a JSON object but %s", ErrInvalidExchange, jsonscan.KindName(ex))
	}
	rec := new(ModelCallRecord)
	if err := buildRecordMembers(rec, ex, p.members, &p.sc, callIndex, false, nil); err != nil {
		return nil, err
	}
	return rec, nil
}

// buildScanner is BuildRecord's reusable validating pass: the scanner (response members mapped)
// and the slice its top-level members go into.
type buildScanner struct {
	sc      jsonscan.Scanner
	members []jsonscan.Member
}

var buildScanners = sync.Pool{New: func() any {
	return &buildScanner{sc: jsonscan.Scanner{Nested: schema.Response}}
}}

// envelope holds the raw values of the exchange keys a record reads (last occurrence wins).
type envelope struct {
	modelCallID, dialect, modelRef, startedAt, completedAt, latencyMS, latencyTTFTMS []byte
	statusCode, errorCategory, request, response, requestRaw, responseRaw            []byte
	responseSource, upstreamAttempted, upstreamStatusCode, localResponseReason       []byte
	clientSessionID, clientAssistantMessageID                                        []byte
	pathModel                                                                        []byte // the model the URL path named
	// alias: the record's strings may share the line's memory (text): the line is a read buffer
	// the record owns.
	alias bool
	// boxes gives the record its recordBox (nil: one allocation of its own).
	boxes *boxSlab
	// The response's fields when the validating pass mapped the response's members.
	responseFields responseFields
	responseMapped bool
}

// set records v as the value of the exchange key named by the key token k (last one wins) and
// reports whether the key is "response". The token is compared as it stands; only a token that
// matches no name is decoded (decodedKey) and compared once more.
func (e *envelope) set(k, v []byte) (isResponse bool) {
	switch string(k) {
	case `"` + schema.ModelCallID + `"`:
		e.modelCallID = v
	case `"` + schema.Dialect + `"`:
		e.dialect = v
	case `"` + schema.ModelRef + `"`:
		e.modelRef = v
	case `"` + schema.StartedAt + `"`:
		e.startedAt = v
	case `"` + schema.CompletedAt + `"`:
		e.completedAt = v
	case `"` + schema.LatencyMS + `"`:
		e.latencyMS = v
	case `"` + schema.LatencyTTFTMS + `"`:
		e.latencyTTFTMS = v
	case `"` + schema.StatusCode + `"`:
		e.statusCode = v
	case `"` + schema.ErrorCategory + `"`:
		e.errorCategory = v
	case `"` + schema.Request + `"`:
		e.request = v
	case `"` + schema.Response + `"`:
		e.response = v
		return true
	case `"` + schema.RequestRaw + `"`:
		e.requestRaw = v
	case `"` + schema.ResponseRaw + `"`:
		e.responseRaw = v
	case `"` + schema.ResponseSource + `"`:
		e.responseSource = v
	case `"` + schema.UpstreamAttempted + `"`:
		e.upstreamAttempted = v
	case `"` + schema.UpstreamStatusCode + `"`:
		e.upstreamStatusCode = v
	case `"` + schema.LocalResponseReason + `"`:
		e.localResponseReason = v
	case `"` + schema.ClientSessionID + `"`:
		e.clientSessionID = v
	case `"` + schema.ClientAssistantMessageID + `"`:
		e.clientAssistantMessageID = v
	case `"` + schema.PathModel + `"`:
		e.pathModel = v
	default:
		if d, ok := decodedKey(k); ok {
			return e.set(d, v)
		}
	}
	return false
}

// buildRecord fills rec, a zero record, from a validated exchange ex (no surrounding whitespace).
func buildRecord(rec *ModelCallRecord, ex []byte, callIndex int) error {
	if !jsonscan.IsObject(ex) {
		return fmt.Errorf("%w: not a JSON object but %s", ErrInvalidExchange, jsonscan.KindName(ex))
	}
	var e envelope
	jsonscan.EachMember(ex, func(k, v []byte) bool {
		e.set(k, v)
		return true
	})
	return e.build(rec, callIndex)
}

// buildRecordMembers is buildRecord for a line whose members the validating pass mapped (sc, a
// jsonscan.Scanner that mapped the members of response): the line is not walked again.
func buildRecordMembers(rec *ModelCallRecord, line []byte, members []jsonscan.Member, sc *jsonscan.Scanner, callIndex int, alias bool, boxes *boxSlab) error {
	e := envelope{alias: alias, boxes: boxes}
	responseStart := -1
	for i := range members {
		m := &members[i]
		if e.set(line[m.KeyStart:m.KeyEnd], line[m.ValStart:m.ValEnd]) {
			responseStart = m.ValStart
		}
	}
	if responseStart >= 0 && responseStart == sc.NestedStart {
		// The response used (the last one) is the one mapped: its fields are read from the map.
		e.responseMapped = true
		for _, m := range sc.NestedMembers {
			e.responseFields.set(line[m.KeyStart:m.KeyEnd], line[m.ValStart:m.ValEnd])
		}
		e.responseFields.members.Tree = &sc.Tree
		e.responseFields.alias = alias
	}
	return e.build(rec, callIndex)
}

// build fills rec, a zero record, from the envelope's values (see buildRecord). Every caller hands
// it a fresh record: clearing it again would cost a second write of each record (with GC write
// barriers while a cycle runs).
func (e *envelope) build(rec *ModelCallRecord, callIndex int) error {
	rec.CallIndex = callIndex
	b := e.boxes.next()
	var err error
	if rec.ModelCallID, err = envString(schema.ModelCallID, e.modelCallID, &b.modelCallID, e.alias); err != nil {
		return err
	}
	if rec.Dialect, err = envString(schema.Dialect, e.dialect, &b.dialect, e.alias); err != nil {
		return err
	}
	if rec.ErrorCategory, err = envString(schema.ErrorCategory, e.errorCategory, &b.errorCategory, e.alias); err != nil {
		return err
	}
	if rec.ModelRef, err = envModelRef(e.modelRef, &b.modelRef, e.alias); err != nil {
		return err
	}
	if rec.StatusCode, err = envInt(schema.StatusCode, e.statusCode, &b.statusCode); err != nil {
		return err
	}
	if rec.StartedAt, err = envFloat(schema.StartedAt, e.startedAt, &b.startedAt); err != nil {
		return err
	}
	if rec.CompletedAt, err = envFloat(schema.CompletedAt, e.completedAt, &b.completedAt); err != nil {
		return err
	}
	if rec.LatencyTotalMS, err = envFloat(schema.LatencyMS, e.latencyMS, &b.latencyMS); err != nil {
		return err
	}
	if rec.LatencyTTFTMS, err = envFloat(schema.LatencyTTFTMS, e.latencyTTFTMS, &b.latencyTTFTMS); err != nil {
		return err
	}

	// The raw texts are kept as their tokens (RawText), aliasing the line like Request and Response.
	if jsonscan.IsString(e.requestRaw) {
		rec.RequestRaw = RawText(e.requestRaw)
	}
	if jsonscan.IsString(e.responseRaw) {
		rec.ResponseRaw = RawText(e.responseRaw)
	}
	if s, ok := jsonscan.String(e.responseSource); ok && (s == "upstream" || s == "local") {
		b.responseSource = s
		rec.ResponseSource = &b.responseSource
	}
	if jsonscan.IsBool(e.upstreamAttempted) {
		b.upstreamAttempted = e.upstreamAttempted[0] == 't'
		rec.UpstreamAttempted = &b.upstreamAttempted
	}
	if n, ok := jsonscan.Int(e.upstreamStatusCode); ok && n >= math.MinInt32 && n <= math.MaxInt32 {
		b.upstreamStatusCode = int(n)
		rec.UpstreamStatusCode = &b.upstreamStatusCode
	}
	rec.LocalResponseReason = stringInto(e.localResponseReason, &b.localResponseReason, e.alias)
	rec.ClientSessionID = stringInto(e.clientSessionID, &b.clientSessionID, e.alias)
	rec.ClientAssistantMessageID = stringInto(e.clientAssistantMessageID, &b.clientAssistantMessageID, e.alias)

	if jsonscan.IsObject(e.request) {
		rec.Request = e.request
	}
	var none responseFields
	f := &none // read in place, not copied
	if jsonscan.IsObject(e.response) {
		rec.Response = e.response
		if !e.responseMapped {
			e.responseFields = scanResponse(e.response)
		}
		f = &e.responseFields
	}
	id := f.id
	if id == nil {
		id = f.responseID // Gemini's responseId
	}
	rec.ResponseID = stringInto(id, &b.responseID, e.alias)
	// First truthy of response.model, response.modelVersion (Gemini's name for the model that
	// answered), request.model; a truthy non-string response model gives null without falling
	// back, as NeMo Gym's record builder does. The request is only read for its model when needed.
	// When request.model is not a string either, the model the URL path named (path_model, ours:
	// Gemini's requests name it only there).
	model := f.model
	if !jsonscan.Truthy(model) && jsonscan.Truthy(f.modelVersion) {
		model = f.modelVersion
	}
	if !jsonscan.Truthy(model) {
		model = nil
		if rec.Request != nil {
			model = jsonscan.Lookup(rec.Request, "model")
		}
		if !jsonscan.IsString(model) && jsonscan.IsString(e.pathModel) {
			model = e.pathModel // the model the URL path named (Gemini's), when nothing else does
		}
	}
	rec.Model = stringInto(model, &b.model, e.alias)
	rec.ResponseStatus = stringInto(f.status, &b.responseStatus, e.alias)
	if s, ok := finishReasonText(f); ok {
		b.finishReason = s
		rec.FinishReason = &b.finishReason
	}

	var u usageFields
	if usage := f.usage; usage != nil || f.usageMetadata == nil {
		u.scan(usage, f.members.Tree)
	} else {
		u.scan(f.usageMetadata, f.members.Tree) // Gemini
	}
	stats := extractTokenStats(&u, &b.tokens)
	rec.TokensIn, rec.TokensOut = stats.TokensIn, stats.TokensOut
	rec.TokensReasoning, rec.TokensTotal = stats.TokensReasoning, stats.TokensTotal
	rec.CacheCreationTokens = stats.CacheCreationTokens
	rec.CacheHit, rec.CachedTokens = cacheSignal(&u, &b.tokens)
	var reasoning bool
	rec.ToolCalls, b.reasoning, reasoning = toolCallsAndReasoningText(f)
	if reasoning {
		rec.ReasoningContent = &b.reasoning
	}
	return nil
}

// recordBox holds the scalar values a record's pointer fields point at: one allocation per record
// instead of one per field. The record keeps the box alive as long as it keeps any of them.
type recordBox struct {
	modelCallID, dialect, errorCategory, responseID, model, responseStatus, finishReason, reasoning string
	responseSource, localResponseReason, clientSessionID, clientAssistantMessageID                  string
	statusCode, upstreamStatusCode                                                                  int
	startedAt, completedAt, latencyMS, latencyTTFTMS                                                float64
	upstreamAttempted                                                                               bool
	modelRef                                                                                        rollout.ModelServerRef
	tokens                                                                                          tokenBox
}

// boxSlab hands out the recordBoxes of the records of one read from shared chunks: one allocation
// for many records instead of one each. The records of a chunk keep it alive together, as they keep
// the read buffer they alias.
type boxSlab struct {
	boxes []recordBox
}

// boxChunk is the size of a slab's first chunk: a rollout's records, typically. Each further
// chunk is twice the last.
const boxChunk = 32

// next returns a zero box (a new allocation when s is nil).
func (s *boxSlab) next() *recordBox {
	if s == nil {
		return new(recordBox)
	}
	if len(s.boxes) == cap(s.boxes) {
		s.boxes = make([]recordBox, 0, max(boxChunk, 2*cap(s.boxes)))
	}
	s.boxes = s.boxes[:len(s.boxes)+1]
	return &s.boxes[len(s.boxes)-1]
}

// reset zeroes the boxes of s's last chunk for reuse: only for a slab whose records are all
// dropped (a Merger's, once a line is merged).
func (s *boxSlab) reset() {
	clear(s.boxes)
	s.boxes = s.boxes[:0]
}

// stringInto is text with the string stored in *dst (nil when v is not a string).
func stringInto(v []byte, dst *string, alias bool) *string {
	s, ok := text(v, alias)
	if !ok {
		return nil
	}
	*dst = s
	return dst
}

// envString, envInt, envFloat and envModelRef read an envelope field into *dst: nil when it is null
// or absent, an error wrapping ErrInvalidExchange when it has the wrong type.
func envString(key string, v []byte, dst *string, alias bool) (*string, error) {
	if jsonscan.IsNull(v) {
		return nil, nil
	}
	if !jsonscan.IsString(v) {
		return nil, envTypeError(key, "a string", v)
	}
	*dst, _ = text(v, alias)
	return dst, nil
}

func envInt(key string, v []byte, dst *int) (*int, error) {
	if jsonscan.IsNull(v) {
		return nil, nil
	}
	n, ok := jsonscan.Int(v)
	if !ok || n < math.MinInt32 || n > math.MaxInt32 {
		return nil, envTypeError(key, "an integer", v)
	}
	*dst = int(n)
	return dst, nil
}

func envFloat(key string, v []byte, dst *float64) (*float64, error) {
	if jsonscan.IsNull(v) {
		return nil, nil
	}
	f, ok := jsonscan.Float(v)
	if !ok {
		return nil, envTypeError(key, "a finite number", v)
	}
	*dst = f
	return dst, nil
}

func envModelRef(v []byte, dst *rollout.ModelServerRef, alias bool) (*rollout.ModelServerRef, error) {
	if jsonscan.IsNull(v) {
		return nil, nil
	}
	if !jsonscan.IsObject(v) {
		return nil, envTypeError(schema.ModelRef, "an object", v)
	}
	// The form the gateway writes, {"type":"responses_api_models","name":"..."}, is read without
	// walking it: the rest after the type is one string token and the closing brace.
	if rest, ok := bytes.CutPrefix(v, modelRefPrefix); ok && len(rest) >= 3 && rest[0] == '"' &&
		jsonscan.SkipString(rest, 0) == len(rest)-1 {
		n, _ := text(rest[:len(rest)-1], alias)
		*dst = rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: n}
		return dst, nil
	}
	var typ, name []byte
	jsonscan.EachMember(v, func(k, val []byte) bool {
		switch string(jsonscan.KeyName(k)) {
		case "type":
			typ = val
		case "name":
			name = val
		}
		return true
	})
	t, ok := text(typ, true) // only compared: the record holds the constant
	if !ok || t != rollout.ModelServerRefType {
		return nil, fmt.Errorf("%w: "+schema.ModelRef+".type must be %q, got %s", ErrInvalidExchange, rollout.ModelServerRefType, clipRaw(typ))
	}
	n, ok := text(name, alias)
	if !ok {
		return nil, envTypeError(schema.ModelRef+".name", "a string", name)
	}
	*dst = rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: n}
	return dst, nil
}

// modelRefPrefix is a model_ref as the gateway writes it, up to its name's value.
var modelRefPrefix = []byte(`{"type":"` + rollout.ModelServerRefType + `","name":`)

func envTypeError(key, want string, v []byte) error {
	return fmt.Errorf("%w: %s must be %s or null, got %s", ErrInvalidExchange, key, want, jsonscan.KindName(v))
}

// clipRaw shortens a raw JSON value for an error message.
func clipRaw(v []byte) string {
	const max = 40
	switch {
	case len(v) == 0:
		return "nothing"
	case len(v) > max:
		return string(v[:max]) + "..."
	}
	return string(v)
}
