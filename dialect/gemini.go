package dialect

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// geminiDialect is Google's Gemini API (generativelanguage.googleapis.com), its generateContent
// method:
//
//	POST /{version}/models/{model}:generateContent                 one JSON GenerateContentResponse
//	POST /{version}/models/{model}:streamGenerateContent?alt=sse   SSE, each event data: {GenerateContentResponse}
//
// with {version} v1, v1beta or v1alpha, and tunedModels in place of models for a tuned model. The
// model is in the path, not in the request body (ModelOfPath). Without alt=sse the stream method
// answers one JSON array of responses; that body is not an object and is kept as response_raw.
//
// The stream has no terminal event: it ends at the end of the body, and its last event carries
// the candidates' finishReason and the final usageMetadata. The first event in which every
// candidate has a finishReason (or that has no candidate and a promptFeedback.blockReason: a
// blocked prompt is answered with that one event) counts as the terminal event (complete), so the
// capture line is durable before the client reads the last event, as for the other dialects; an
// "error" event, or a data object with an "error" member that is not null (the API reports a
// failure after the stream started that way), is an error terminal event.
type geminiDialect struct{}

func (geminiDialect) observes(path string) bool { _, ok := geminiPathModel(path); return ok }
func (geminiDialect) path() string              { return "/v1beta/models/{model}:generateContent" }
func (geminiDialect) provider() string          { return "gcp.gemini" }

func (geminiDialect) pathModel(path string) string {
	m, _ := geminiPathModel(path)
	return m
}

// pathStream: :streamGenerateContent with alt=sse streams events; without alt=sse it answers one
// JSON array, and :generateContent one JSON object.
func (geminiDialect) pathStream(path, rawQuery string) (bool, bool) {
	if !strings.HasSuffix(path, ":streamGenerateContent") {
		return false, true
	}
	q, _ := url.ParseQuery(rawQuery)
	return q.Get("alt") == "sse", true
}

// env points the Google Gen AI SDK and Gemini CLI at base: they add /{version}/models/... to it.
func (geminiDialect) env(base string) []EnvVar {
	return []EnvVar{{"GOOGLE_GEMINI_BASE_URL", base}}
}

// geminiPathModel returns the model of a generateContent or streamGenerateContent path.
func geminiPathModel(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return "", false
	}
	version, rest, ok := strings.Cut(rest, "/")
	if !ok || (version != "v1" && version != "v1beta" && version != "v1alpha") {
		return "", false
	}
	collection, rest, ok := strings.Cut(rest, "/")
	if !ok || (collection != "models" && collection != "tunedModels") {
		return "", false
	}
	model, method, ok := strings.Cut(rest, ":")
	if !ok || model == "" || strings.ContainsAny(model, "/:") {
		return "", false
	}
	if method != "generateContent" && method != "streamGenerateContent" {
		return "", false
	}
	return model, true
}

func (geminiDialect) terminal(typ string, _ bool, _, obj []byte) Terminal {
	if typ == "error" {
		return TerminalError
	}
	if obj == nil {
		return TerminalNone
	}
	if e := jsonscan.Lookup(obj, "error"); !jsonscan.IsNull(e) {
		return TerminalError
	}
	n, finished := 0, 0
	jsonscan.EachElement(jsonscan.Lookup(obj, "candidates"), func(c []byte) bool {
		n++
		if r, ok := jsonscan.Text(jsonscan.Lookup(c, "finishReason")); ok && len(r) > 0 {
			finished++
		}
		return true
	})
	if n > 0 && finished == n {
		return TerminalComplete
	}
	if n == 0 {
		if r, ok := jsonscan.Text(jsonscan.Lookup(jsonscan.Lookup(obj, "promptFeedback"), "blockReason")); ok && len(r) > 0 {
			return TerminalComplete
		}
	}
	return TerminalNone
}

// terminalPrefix: a finishReason comes after the parts in a response object, so only an event
// type of error tells an event too large to hold is terminal. Such a stream is captured as
// stream_truncated.
func (geminiDialect) terminalPrefix(ev *sse.RawEvent) Terminal {
	if ev.Type == "error" {
		return TerminalError
	}
	return TerminalNone
}

// errorBody is Google's error shape, {"error":{"code":S,"message":M,"status":G}}, with, when code
// is not "", "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":C,"domain":"modelcalls"}].
// G is the google.rpc status name of the HTTP status: 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED,
// 403 PERMISSION_DENIED, 404 NOT_FOUND, 408 and 504 DEADLINE_EXCEEDED, 409 ABORTED, 429
// RESOURCE_EXHAUSTED, 499 CANCELLED, 501 UNIMPLEMENTED, 502 and 503 UNAVAILABLE, other 4xx
// FAILED_PRECONDITION, other 5xx INTERNAL.
func (geminiDialect) errorBody(status int, code, message string) []byte {
	b := append([]byte(nil), `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = jsonscan.AppendString(b, message)
	b = append(b, `,"status":`...)
	b = jsonscan.AppendString(b, googleStatus(status))
	if code != "" {
		b = append(b, `,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":`...)
		b = jsonscan.AppendString(b, code)
		b = append(b, `,"domain":"modelcalls"}]`...)
	}
	return append(b, "}}"...)
}

func googleStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503:
		return "UNAVAILABLE"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// request reads Gemini's "systemInstruction" (a Content, or a string) and "contents" (Contents
// of role "user" or "model"), and the function declarations and built-in tools of its "tools".
func (geminiDialect) request(r members, c *Conversation) {
	if si, ok := r["systemInstruction"]; ok && !isNull(si) {
		var parts []Part
		if s, ok := asString(si); ok {
			parts = []Part{{Kind: "text", Text: s}}
		} else {
			_, parts = geminiContent(si)
		}
		if len(parts) > 0 {
			c.system = append(c.system, Message{Role: "system", Parts: parts})
		}
	}
	if cs, ok := r["contents"]; ok {
		var list []json.RawMessage
		decodeList(cs, &list)
		for _, raw := range list {
			role, parts := geminiContent(raw)
			c.Input = append(c.Input, Message{Role: role, Parts: parts})
		}
	}
	for _, t := range c.requestTools(r) {
		if !isGeminiTool(t) {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if k != "functionDeclarations" {
				c.Tools = append(c.Tools, k) // a built-in tool: googleSearch, codeExecution, ...
				continue
			}
			var fds []members
			decodeMemberList(t[k], &fds)
			for _, fd := range fds {
				c.Tools = append(c.Tools, str(fd["name"]))
			}
		}
	}
}

// isGeminiTool reports whether a request's tool is Gemini's: an object of tool kinds
// (functionDeclarations, googleSearch, ...) without the "name" or "type" of the other dialects.
func isGeminiTool(t members) bool {
	_, named := t["name"]
	_, typed := t["type"]
	_, fn := t["function"]
	return !named && !typed && !fn && len(t) > 0
}

// response reads each candidate's content as an assistant message.
func (geminiDialect) response(r members, c *Conversation) {
	cands, ok := r["candidates"]
	if !ok {
		return
	}
	var list []members
	decodeMemberList(cands, &list)
	for _, cand := range list {
		_, parts := geminiContent(cand["content"])
		c.Output = append(c.Output, Message{Role: "assistant", Parts: parts})
	}
}

// geminiContent reads a Content {"role": ..., "parts": [...]}: role "model" is the assistant, a
// content of function responses only is the tool's, other roles (user) stay. Parts: text (a
// thought: true part is reasoning), functionCall (a tool call; args as JSON), functionResponse (a
// tool result; its response object as JSON), inlineData and fileData (images or files, by kind),
// anything else an "other" part named by its first member.
func geminiContent(raw json.RawMessage) (role string, parts []Part) {
	var ct struct {
		Role  string    `json:"role"`
		Parts []members `json:"parts"`
	}
	if json.Unmarshal(raw, &ct) != nil {
		return "?", []Part{{Kind: "other", Text: string(raw)}}
	}
	results := 0
	for _, p := range ct.Parts {
		switch {
		case p["text"] != nil:
			kind := "text"
			if string(p["thought"]) == "true" {
				kind = "reasoning"
			}
			parts = append(parts, Part{Kind: kind, Text: str(p["text"])})
		case p["functionCall"] != nil:
			var fc members
			decodeMembers(p["functionCall"], &fc)
			parts = append(parts, Part{Kind: "tool_call", CallID: str(fc["id"]), Name: str(fc["name"]), Arguments: argText(fc["args"])})
		case p["functionResponse"] != nil:
			var fr members
			decodeMembers(p["functionResponse"], &fr)
			parts = append(parts, Part{Kind: "tool_result", CallID: str(fr["id"]), Name: str(fr["name"]), Text: argText(fr["response"])})
			results++
		case p["inlineData"] != nil || p["fileData"] != nil:
			name := "inlineData"
			if p["fileData"] != nil {
				name = "fileData"
			}
			parts = append(parts, Part{Kind: "image", Name: name})
		default:
			name := ""
			for k := range p {
				if k != "thoughtSignature" && (name == "" || k < name) {
					name = k
				}
			}
			parts = append(parts, Part{Kind: "other", Name: name, Text: plainJSON(p)})
		}
	}
	switch {
	case ct.Role == "model":
		role = "assistant"
	case results > 0 && results == len(ct.Parts):
		role = "tool"
	case ct.Role == "":
		role = "user"
	default:
		role = ct.Role
	}
	return role, parts
}

func (geminiDialect) reassembler(sp *spill, lim *budget) reassembler {
	return &geminiState{sp: sp, lim: lim}
}

// geminiMaxCandidates bounds how many candidates a reconstruction keeps: the API returns at most
// eight (candidateCount); a stream naming more distinct indexes has the rest left out.
const geminiMaxCandidates = 64

// geminiState rebuilds a GenerateContentResponse from the events of a streamGenerateContent
// stream, each itself a GenerateContentResponse holding the newest piece of each candidate:
//
//   - candidates by their "index" (0 when absent), in index order: the parts of their content
//     appended in stream order, a text part joined to the text part before it when both are
//     thoughts or both are not and the later has no thoughtSignature of its own (the API splits
//     one text across events); other parts (functionCall, inlineData, ...) kept whole; the content's
//     last role ("model" when none); the last finishReason; every other candidate member (safety
//     ratings, citation, grounding, finishMessage) as its last value;
//   - every other top-level member (usageMetadata, modelVersion, responseId, promptFeedback) as
//     its last value that is not null, in the order first seen.
//
// Memory grows with the text and parts kept, never more than the events held them (each value is
// kept once, joined texts spill to a temp file past the Stream's threshold), and candidates and
// parts count as elements against MaxElements; the work per event is linear in its size.
type geminiState struct {
	cands   []*geminiCandidate // in order first seen
	byIndex map[int64]*geminiCandidate
	top     lastValues
	sp      *spill
	lim     *budget // candidates and parts are elements (MaxElements); Stop ends the work
}

type geminiCandidate struct {
	index    int64
	role     []byte // last truthy content.role
	hasBody  bool   // a content member was seen
	parts    []*geminiPart
	finish   []byte // last truthy finishReason
	other    lastValues
	textPart *geminiPart // the last part, when it is a text part that may be joined
}

type geminiPart struct {
	raw     []byte // a part kept whole (compact), nil for a joined text part
	text    text
	thought bool
	sig     []byte // thoughtSignature of a joined text part (compact), nil when none
}

// lastValues keeps the last non-null value of each member, in the order the members were first
// seen.
type lastValues struct {
	keys []string
	vals [][]byte
	at   map[string]int
}

func (l *lastValues) set(k string, v []byte) {
	if i, ok := l.at[k]; ok {
		l.vals[i] = keep(l.vals[i], v)
		return
	}
	if l.at == nil {
		l.at = map[string]int{}
	}
	l.at[k] = len(l.keys)
	l.keys = append(l.keys, k)
	l.vals = append(l.vals, compact(v))
}

func (l *lastValues) encode(e *enc, first bool) {
	for i, k := range l.keys {
		if !first || i > 0 {
			e.raw(",")
		}
		e.str(k)
		e.raw(":")
		e.bytes(l.vals[i])
	}
}

func (g *geminiState) add(ev []byte) {
	jsonscan.EachMember(ev, func(k, v []byte) bool {
		name := string(jsonscan.KeyName(k))
		if jsonscan.HasBackslash(k) {
			if d, ok := jsonscan.Text(k); ok {
				name = string(d)
			}
		}
		switch {
		case name == "candidates":
			jsonscan.EachElement(v, func(c []byte) bool {
				if jsonscan.IsObject(c) {
					g.candidate(c)
				}
				return true
			})
		case !jsonscan.IsNull(v):
			g.top.set(name, v)
		}
		return true
	})
}

func (g *geminiState) candidate(c []byte) {
	idx := int64(0)
	if v := jsonscan.Lookup(c, "index"); !jsonscan.IsNull(v) {
		var ok bool
		if idx, ok = jsonscan.Int(v); !ok {
			return // malformed index: skip the candidate
		}
	}
	st := g.byIndex[idx]
	if st == nil {
		if len(g.cands) >= geminiMaxCandidates || !g.lim.take(1) {
			return
		}
		if g.byIndex == nil {
			g.byIndex = map[int64]*geminiCandidate{}
		}
		st = &geminiCandidate{index: idx}
		g.byIndex[idx] = st
		g.cands = append(g.cands, st)
	}
	jsonscan.EachMember(c, func(k, v []byte) bool {
		name := string(jsonscan.KeyName(k))
		switch name {
		case "index":
		case "content":
			if jsonscan.IsObject(v) {
				st.content(v, g.sp, g.lim)
			}
		case "finishReason":
			if jsonscan.Truthy(v) {
				st.finish = keep(st.finish, v)
			}
		default:
			if !jsonscan.IsNull(v) {
				st.other.set(name, v)
			}
		}
		return true
	})
}

func (st *geminiCandidate) content(ct []byte, sp *spill, lim *budget) {
	st.hasBody = true
	if r := jsonscan.Lookup(ct, "role"); jsonscan.Truthy(r) {
		st.role = keep(st.role, r)
	}
	jsonscan.EachElement(jsonscan.Lookup(ct, "parts"), func(p []byte) bool {
		if lim.done() {
			return false
		}
		if jsonscan.IsObject(p) {
			st.part(p, sp, lim)
		}
		return true
	})
}

// part appends one part, joining a plain text part (members text, thought, thoughtSignature only)
// to the text part before it when they can be one.
func (st *geminiCandidate) part(p []byte, sp *spill, lim *budget) {
	var txt, thought, sig []byte
	plain := true
	jsonscan.EachMember(p, func(k, v []byte) bool {
		switch string(jsonscan.KeyName(k)) {
		case "text":
			txt = v
		case "thought":
			thought = v
		case "thoughtSignature":
			sig = v
		default:
			plain = false
		}
		return true
	})
	s, isText := jsonscan.Text(txt)
	if !plain || !isText || (thought != nil && !jsonscan.IsBool(thought)) {
		if lim.take(1) {
			st.parts = append(st.parts, &geminiPart{raw: compact(p)})
		}
		st.textPart = nil
		return
	}
	isThought := string(thought) == "true"
	last := st.textPart
	if last == nil || last.thought != isThought || (sig != nil && last.sig != nil) {
		if !lim.take(1) {
			return
		}
		last = &geminiPart{thought: isThought}
		st.parts = append(st.parts, last)
		st.textPart = last
	}
	last.text.append(s, sp)
	if sig != nil {
		last.sig = compact(sig)
	}
}

func (g *geminiState) has() bool { return len(g.cands) > 0 || len(g.top.keys) > 0 }

func (g *geminiState) encode(e *enc) {
	e.raw("{")
	first := true
	if len(g.cands) > 0 {
		cands := slices.Clone(g.cands)
		slices.SortStableFunc(cands, func(a, b *geminiCandidate) int {
			switch {
			case a.index < b.index:
				return -1
			case a.index > b.index:
				return 1
			}
			return 0
		})
		e.raw(`"candidates":[`)
		for i, c := range cands {
			e.comma(i)
			c.encode(e)
		}
		e.raw("]")
		first = false
	}
	g.top.encode(e, first)
	e.raw("}")
}

func (st *geminiCandidate) encode(e *enc) {
	e.raw("{")
	if st.hasBody {
		e.raw(`"content":{"parts":[`)
		for i, p := range st.parts {
			e.comma(i)
			if p.raw != nil {
				e.bytes(p.raw)
				continue
			}
			e.raw(`{"text":`)
			e.text(&p.text)
			if p.thought {
				e.raw(`,"thought":true`)
			}
			if p.sig != nil {
				e.raw(`,"thoughtSignature":`)
				e.bytes(p.sig)
			}
			e.raw("}")
			e.grow()
		}
		e.raw(`],"role":`)
		if st.role != nil {
			e.bytes(st.role)
		} else {
			e.raw(`"model"`)
		}
		e.raw("},")
	}
	if st.finish != nil {
		e.raw(`"finishReason":`)
		e.bytes(st.finish)
		e.raw(",")
	}
	e.raw(`"index":`)
	e.b = strconv.AppendInt(e.b, st.index, 10)
	st.other.encode(e, false)
	e.raw("}")
}

// toolCalls reads Gemini candidates: for every candidate whose content is an object, each part
// with a functionCall object is a tool call (its id, which only some models give; its name; its
// args: {} when not truthy), each part whose thought is true gives its text when a non-empty
// string.
func (geminiDialect) toolCalls(m *ResponseMembers, x Sink) bool {
	if !jsonscan.IsArray(m.Candidates) {
		return false
	}
	t := m.Tree
	t.EachElement(m.Candidates, func(cand []byte) bool {
		content := t.Lookup(cand, "content")
		if !jsonscan.IsObject(content) {
			return true
		}
		t.EachElement(t.Lookup(content, "parts"), func(part []byte) bool {
			if !jsonscan.IsObject(part) {
				return true
			}
			var txt, thought, call []byte
			t.EachMember(part, func(k, v []byte) bool {
				switch string(jsonscan.KeyName(k)) {
				case "text":
					txt = v
				case "thought":
					thought = v
				case "functionCall":
					call = v
				}
				return true
			})
			switch {
			case jsonscan.IsObject(call):
				var id, name, args []byte
				t.EachMember(call, func(k, v []byte) bool {
					switch string(jsonscan.KeyName(k)) {
					case "id":
						id = v
					case "name":
						name = v
					case "args":
						args = v
					}
					return true
				})
				x.Call(RawToolCall{CallID: id, Name: name, Args: args, ArgsObject: true})
			case string(thought) == "true" && nonEmptyString(txt):
				x.Reasoning(txt)
			}
			return true
		})
		return true
	})
	return true
}

// finishReason: candidates[0].finishReason, decided when candidates is a non-empty array whose
// first item is an object.
func (geminiDialect) finishReason(m *ResponseMembers) ([]byte, bool) {
	first := firstElement(m.Tree, m.Candidates)
	if !jsonscan.IsObject(first) {
		return nil, false
	}
	return m.Tree.Lookup(first, "finishReason"), true
}
