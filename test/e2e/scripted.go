package e2e

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Wire dialects, named as modelcalls names them in a capture line's "dialect" field.
const (
	DialectChat      = "chat"      // OpenAI Chat Completions, POST /v1/chat/completions
	DialectResponses = "responses" // OpenAI Responses, POST /v1/responses
	DialectMessages  = "messages"  // Anthropic Messages, POST /v1/messages
	// DialectGemini is Google's Gemini API: POST /v1beta/models/{model}:generateContent, or
	// :streamGenerateContent?alt=sse.
	DialectGemini = "gemini"
	// DialectCompletions is OpenAI's legacy Completions API, POST /v1/completions: no harness
	// speaks it; the tokens probe sends it to llama-server.
	DialectCompletions = "completions"
)

// DialectOfPath maps a request path (query ignored) to its dialect, or "" when the path is not
// one of the model-call paths. Claude Code posts "/v1/messages?beta=true".
func DialectOfPath(path string) string {
	path, _, _ = strings.Cut(path, "?")
	switch path {
	case "/v1/chat/completions":
		return DialectChat
	case "/v1/responses":
		return DialectResponses
	case "/v1/messages":
		return DialectMessages
	case "/v1/completions":
		return DialectCompletions
	}
	if _, _, ok := geminiPath(path); ok {
		return DialectGemini
	}
	return ""
}

// geminiPath splits a Gemini model-call path, /{v1,v1beta,v1alpha}/models/{model}:{method}, into
// its model and whether the method streams.
func geminiPath(path string) (model string, stream, ok bool) {
	m := geminiPathRE.FindStringSubmatch(path)
	if m == nil {
		return "", false, false
	}
	return m[1], m[2] == "streamGenerateContent", true
}

var geminiPathRE = regexp.MustCompile(`^/v1(?:beta|alpha)?/models/([^/:]+):(generateContent|streamGenerateContent)$`)

// NoncePattern is the shape of the secret the tests write into the file the scripted tool call
// reads. The scripted upstream looks for it in the tool result a harness sends back, so the
// final answer proves the harness ran the tool and returned its output.
var NoncePattern = regexp.MustCompile(`e2e-nonce-[0-9a-f]{16}`)

// AnswerForNonce is the text the scripted upstream answers once the tool result carrying nonce
// came back; the harness must print exactly this.
func AnswerForNonce(nonce string) string { return "hello.txt says: " + nonce }

// Texts the scripted upstream answers when it has no tool to call, and when the tool result
// it got back does not carry a nonce.
const (
	PlainAnswer       = "Hello from the scripted upstream."
	MissingNonceReply = "The tool result did not carry the file's nonce."
	ScriptedReasoning = "The user wants hello.txt: read it first."
)

// readTools are the tool names the scripted upstream calls, in order of preference, as the
// harnesses offer them (fixtures' exchanges): Claude Code "Read", pi and opencode "read",
// Qwen Code and Gemini CLI "read_file", Codex "exec_command" (a shell command line).
var readTools = []string{"Read", "read", "read_file", "exec_command"}

// SummaryAnswer is the text the scripted upstream answers a compaction request with (see
// asksForSummary): an analysis block, then a summary block of numbered lines, the shape Claude
// Code's compaction prompt asks for (it asks again once when the answer has no summary block, and
// keeps only the summary block's content in the new history; Codex keeps the whole text). The lines name the nonce the
// conversation's tool result carried ("" when none) and are long enough (over 64 bytes) to be
// recognised when pasted into a later context.
func SummaryAnswer(nonce string) string {
	if nonce == "" {
		nonce = "(no nonce was read)"
	}
	return "<analysis>\nThe user asked for the content of hello.txt; the read tool returned it once.\n</analysis>\n\n" +
		"<summary>\n" +
		"1. Primary Request and Intent: the user asked to read hello.txt and to say what it says.\n" +
		"2. Files and Code Sections: hello.txt was read with the read tool; it says: " + nonce + "\n" +
		"3. Pending Tasks: none; the answer was given and no further work was requested.\n" +
		"</summary>"
}

// ScriptedToolCall is one tool call the scripted upstream made: the call id it sent, the tool
// name, and the arguments object (one string parameter).
type ScriptedToolCall struct {
	CallID    string
	Name      string
	Arguments map[string]any
}

// Served is the scripted upstream's account of one model call it answered.
type Served struct {
	Dialect    string // DialectChat, DialectResponses or DialectMessages
	Stream     bool   // answered as SSE
	Model      string // model named in the response (the request's model, or "scripted-model")
	ResponseID string // the response's id ("chatcmpl-…", "resp_…", "msg_…"), unique per call

	ToolCall   *ScriptedToolCall // the call made on a first turn; nil on a text answer
	Text       string            // the answer text; "" for a tool call
	Reasoning  string            // reasoning text sent with a tool call (reasoning_content, summary, thinking); "" otherwise
	ToolResult string            // the tool result text the request carried (second turn), "" on a first turn

	// Usage reported, in tokens. TokensIn is the whole prompt: for Anthropic it is reported as
	// input_tokens + cache_read_input_tokens (CachedTokens), for OpenAI as prompt/input tokens
	// with CachedTokens as the cached subset.
	TokensIn, TokensOut, CachedTokens, ReasoningTokens int
}

// Scripted is the scripted loopback upstream: an http.Handler serving the four dialects.
//
// Routes: POST /v1/chat/completions, /v1/responses, /v1/messages (query ignored),
// /v1beta/models/{model}:generateContent and :streamGenerateContent (streamed with ?alt=sse); GET
// /v1/models (one model); POST /v1/messages/count_tokens ({"input_tokens": n}) and
// /v1beta/models/{model}:countTokens ({"totalTokens": n}); anything else
// 404 with an OpenAI-shaped error body. Decisions are stateless, per request:
//   - the request carries a tool result: answer text, AnswerForNonce of the nonce found in it
//     (MissingNonceReply when none);
//   - else it offers one of the read tools: answer a call of it (with reasoning text first),
//     reading FilePath (Codex: exec_command "cat <FilePath>");
//   - else (a title-generation call, say): answer PlainAnswer.
//
// Before all these, a compaction request (asksForSummary) is answered with SummaryAnswer of the
// nonce its tool result carries.
//
// Usage is deterministic: tokens in = max(1, len(request body)/4), half of it reported cached;
// tokens out = max(1, len(answer)/4). The zero value is not usable: set FilePath.
type Scripted struct {
	// FilePath is the absolute path the tool call asks to read.
	FilePath string
	// NoReasoning leaves reasoning out of tool-call answers.
	NoReasoning bool
	// Gzip compresses model-call answers (JSON and SSE, flushed per event) with
	// Content-Encoding: gzip when the request's Accept-Encoding allows it, as real providers do.
	Gzip bool

	mu     sync.Mutex
	n      int
	served []Served
}

// Take returns the calls served since the last Take, in the order they were answered, and
// forgets them.
func (s *Scripted) Take() []Served {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.served
	s.served = nil
	return out
}

func (s *Scripted) record(sv Served) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served = append(s.served, sv)
}

func (s *Scripted) nextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.n
}

// ServeHTTP implements http.Handler.
func (s *Scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/v1/models":
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "scripted-model", "object": "model", "created": 0, "owned_by": "e2e"}}})
		return
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		body, err := readBody(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, openAIError(err.Error()))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": max(1, len(body)/4)})
		return
	case r.Method == http.MethodPost && strings.HasSuffix(path, ":countTokens"):
		body, err := readBody(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, openAIError(err.Error()))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": max(1, len(body)/4)})
		return
	}
	d := DialectOfPath(path)
	if d == "" || d == DialectCompletions || r.Method != http.MethodPost { // no harness speaks Completions
		writeJSON(w, http.StatusNotFound, openAIError("not found: "+r.Method+" "+path))
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, openAIError(err.Error()))
		return
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, openAIError("request body is not a JSON object: "+err.Error()))
		return
	}
	sv := s.decide(d, req, len(body))
	if d == DialectGemini { // the model and the transport are in the URL, not the body
		model, stream, _ := geminiPath(path)
		sv.Model, sv.Stream = model, stream && r.URL.Query().Get("alt") == "sse"
	}
	s.record(sv)
	if s.Gzip && acceptsGzip(r.Header) {
		gz := newGzipWriter(w)
		defer gz.close()
		w = gz
	}
	switch d {
	case DialectChat:
		s.answerChat(w, req, sv)
	case DialectResponses:
		s.answerResponses(w, sv)
	case DialectMessages:
		s.answerMessages(w, sv)
	case DialectGemini:
		s.answerGemini(w, sv)
	}
}

// decide picks the answer for one request and fills in everything but the transport.
func (s *Scripted) decide(d string, req map[string]json.RawMessage, bodyLen int) Served {
	n := s.nextID()
	sv := Served{Dialect: d, Model: "scripted-model"}
	var model string
	if json.Unmarshal(req["model"], &model) == nil && model != "" {
		sv.Model = model
	}
	var stream bool
	_ = json.Unmarshal(req["stream"], &stream)
	sv.Stream = stream
	switch d {
	case DialectChat:
		sv.ResponseID = fmt.Sprintf("chatcmpl-e2e%06d", n)
	case DialectResponses:
		sv.ResponseID = fmt.Sprintf("resp_e2e%06d", n)
	case DialectMessages:
		sv.ResponseID = fmt.Sprintf("msg_e2e%06d", n)
	case DialectGemini:
		sv.ResponseID = fmt.Sprintf("e2eGeminiResp%06d", n)
	}
	sv.TokensIn = max(1, bodyLen/4)
	sv.CachedTokens = sv.TokensIn / 2

	if asksForSummary(d, req) {
		result, _ := toolResult(d, req)
		sv.ToolResult = result
		sv.Text = SummaryAnswer(NoncePattern.FindString(result))
	} else if result, ok := toolResult(d, req); ok {
		sv.ToolResult = result
		if nonce := NoncePattern.FindString(result); nonce != "" {
			sv.Text = AnswerForNonce(nonce)
		} else {
			sv.Text = MissingNonceReply
		}
	} else if name, param, ok := pickTool(d, req); ok {
		value := s.FilePath
		if name == "exec_command" {
			value = "cat " + s.FilePath
		}
		callID := fmt.Sprintf("call_e2e%06d", n)
		if d == DialectMessages {
			callID = fmt.Sprintf("toolu_e2e%06d", n)
		}
		sv.ToolCall = &ScriptedToolCall{CallID: callID, Name: name, Arguments: map[string]any{param: value}}
		if !s.NoReasoning {
			sv.Reasoning = ScriptedReasoning
			sv.ReasoningTokens = max(1, len(sv.Reasoning)/4)
		}
	} else {
		sv.Text = PlainAnswer
	}
	if sv.ToolCall != nil {
		args, _ := json.Marshal(sv.ToolCall.Arguments)
		sv.TokensOut = max(1, len(args)/4) + sv.ReasoningTokens
	} else {
		sv.TokensOut = max(1, len(sv.Text)/4)
	}
	return sv
}

// asksForSummary reports whether the request is a compaction request: its last message is a user
// turn asking for a summary of the conversation, as Claude Code's /compact (the answer inside
// <summary> tags) and Codex's automatic compaction ("CONTEXT CHECKPOINT COMPACTION ... a handoff
// summary") send it after the whole conversation: the text names both a summary and compaction
// (case aside). A summary pasted into a history is not one: Codex's wrapping of it and
// SummaryAnswer do not name compaction. Chat, Messages and Responses (a message input item; Codex
// sends its prompt as a user message); Gemini never asks.
func asksForSummary(d string, req map[string]json.RawMessage) bool {
	var msgs []struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	switch d {
	case DialectChat, DialectMessages:
		if json.Unmarshal(req["messages"], &msgs) != nil {
			return false
		}
	case DialectResponses:
		if json.Unmarshal(req["input"], &msgs) != nil { // a string input is the user's prompt alone
			return false
		}
	default:
		return false
	}
	if len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1]
	if last.Role != "user" || last.Type != "" && last.Type != "message" {
		return false
	}
	text := strings.ToLower(textOf(last.Content))
	return strings.Contains(text, "summary") && strings.Contains(text, "compaction")
}

// pickTool returns the first of readTools the request offers, with the first required
// parameter of its schema (the path, or Codex's "cmd").
func pickTool(d string, req map[string]json.RawMessage) (name, param string, ok bool) {
	var tools []json.RawMessage
	if json.Unmarshal(req["tools"], &tools) != nil {
		return "", "", false
	}
	type schema struct {
		Required []string `json:"required"`
	}
	offered := map[string]string{}
	if d == DialectGemini {
		// [{"functionDeclarations": [{"name", "parameters" or "parametersJsonSchema"}]}, ...]
		for _, raw := range tools {
			var t struct {
				Decls []struct {
					Name       string  `json:"name"`
					Parameters *schema `json:"parameters"`
					JSONSchema *schema `json:"parametersJsonSchema"`
				} `json:"functionDeclarations"`
			}
			if json.Unmarshal(raw, &t) != nil {
				continue
			}
			for _, fd := range t.Decls {
				sc := fd.Parameters
				if sc == nil {
					sc = fd.JSONSchema
				}
				if fd.Name != "" && sc != nil && len(sc.Required) > 0 {
					offered[fd.Name] = sc.Required[0]
				}
			}
		}
		tools = nil
	}
	for _, raw := range tools {
		var t struct {
			Name        string  `json:"name"`
			Parameters  *schema `json:"parameters"`
			InputSchema *schema `json:"input_schema"`
			Function    *struct {
				Name       string  `json:"name"`
				Parameters *schema `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue // a tool shape we do not know (server tools, custom tools): not ours to call
		}
		var sc *schema
		switch {
		case d == DialectChat && t.Function != nil:
			t.Name, sc = t.Function.Name, t.Function.Parameters
		case d == DialectMessages:
			sc = t.InputSchema
		default:
			sc = t.Parameters
		}
		if t.Name != "" && sc != nil && len(sc.Required) > 0 {
			offered[t.Name] = sc.Required[0]
		}
	}
	for _, name := range readTools {
		if param, ok := offered[name]; ok {
			return name, param, true
		}
	}
	return "", "", false
}

// toolResult returns the text of the last tool result the request carries, and whether it
// carries one: Chat role "tool" messages, Responses "function_call_output" input items,
// Anthropic "tool_result" content blocks, Gemini "functionResponse" parts (the "output" string of
// their response, else the response as JSON text).
func toolResult(d string, req map[string]json.RawMessage) (string, bool) {
	var found bool
	var last string
	switch d {
	case DialectGemini:
		var contents []struct {
			Parts []struct {
				FunctionResponse *struct {
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		}
		if json.Unmarshal(req["contents"], &contents) != nil {
			return "", false
		}
		for _, c := range contents {
			for _, p := range c.Parts {
				if p.FunctionResponse == nil {
					continue
				}
				found, last = true, string(p.FunctionResponse.Response)
				var r struct {
					Output *string `json:"output"`
				}
				if json.Unmarshal(p.FunctionResponse.Response, &r) == nil && r.Output != nil {
					last = *r.Output
				}
			}
		}
	case DialectChat, DialectMessages:
		var msgs []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		}
		if json.Unmarshal(req["messages"], &msgs) != nil {
			return "", false
		}
		for _, m := range msgs {
			if d == DialectChat {
				if m.Role == "tool" {
					found, last = true, textOf(m.Content)
				}
				continue
			}
			blocks, _ := m.Content.([]any)
			for _, b := range blocks {
				if bm, _ := b.(map[string]any); bm != nil && bm["type"] == "tool_result" {
					found, last = true, textOf(bm["content"])
				}
			}
		}
	case DialectResponses:
		var items []struct {
			Type   string `json:"type"`
			Output any    `json:"output"`
		}
		if json.Unmarshal(req["input"], &items) != nil {
			return "", false // a string input carries no tool result
		}
		for _, it := range items {
			if it.Type == "function_call_output" {
				found, last = true, textOf(it.Output)
			}
		}
	}
	return last, found
}

// textOf flattens a content value: a string, or a list of parts whose "text" fields are joined.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, p := range x {
			if pm, _ := p.(map[string]any); pm != nil {
				if t, ok := pm["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// halves splits s in two non-empty pieces where possible, so every streamed value arrives in
// more than one delta.
func halves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

func (sv Served) argumentsJSON() string {
	b, _ := json.Marshal(sv.ToolCall.Arguments)
	return string(b)
}

// openAIUsage is the usage object both OpenAI APIs write, under their own names for the two sides:
// "prompt" and "completion" (Chat Completions) or "input" and "output" (Responses). The cached
// tokens are a part of the input, the reasoning tokens a part of the output.
func (sv Served) openAIUsage(in, out string) map[string]any {
	return map[string]any{
		in + "_tokens":          sv.TokensIn,
		out + "_tokens":         sv.TokensOut,
		"total_tokens":          sv.TokensIn + sv.TokensOut,
		in + "_tokens_details":  map[string]any{"cached_tokens": sv.CachedTokens},
		out + "_tokens_details": map[string]any{"reasoning_tokens": sv.ReasoningTokens},
	}
}

// answerChat writes a Chat Completions answer (reference: OpenAI chat.completion and
// chat.completion.chunk objects; usage on a final usage-only chunk when stream_options asks).
func (s *Scripted) answerChat(w http.ResponseWriter, req map[string]json.RawMessage, sv Served) {
	created := time.Now().Unix()
	usage := sv.openAIUsage("prompt", "completion")
	finish := "stop"
	if sv.ToolCall != nil {
		finish = "tool_calls"
	}
	if !sv.Stream {
		msg := map[string]any{"role": "assistant", "content": nil}
		if sv.ToolCall != nil {
			msg["tool_calls"] = []any{map[string]any{"id": sv.ToolCall.CallID, "type": "function",
				"function": map[string]any{"name": sv.ToolCall.Name, "arguments": sv.argumentsJSON()}}}
		} else {
			msg["content"] = sv.Text
		}
		if sv.Reasoning != "" {
			msg["reasoning_content"] = sv.Reasoning
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": sv.ResponseID, "object": "chat.completion",
			"created": created, "model": sv.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage})
		return
	}
	var opts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	_ = json.Unmarshal(req["stream_options"], &opts)
	ev := newSSE(w)
	chunk := func(delta map[string]any, finishReason any) map[string]any {
		return map[string]any{"id": sv.ResponseID, "object": "chat.completion.chunk", "created": created,
			"model": sv.Model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}}}
	}
	if sv.ToolCall != nil {
		for i, part := range halves(sv.Reasoning) {
			delta := map[string]any{"reasoning_content": part}
			if i == 0 {
				delta["role"], delta["content"] = "assistant", nil
			}
			ev.send("", chunk(delta, nil))
		}
		ev.send("", chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"index": 0, "id": sv.ToolCall.CallID, "type": "function",
				"function": map[string]any{"name": sv.ToolCall.Name, "arguments": ""}}}}, nil))
		for _, part := range halves(sv.argumentsJSON()) {
			ev.send("", chunk(map[string]any{"tool_calls": []any{
				map[string]any{"index": 0, "function": map[string]any{"arguments": part}}}}, nil))
		}
	} else {
		ev.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, part := range halves(sv.Text) {
			ev.send("", chunk(map[string]any{"content": part}, nil))
		}
	}
	ev.send("", chunk(map[string]any{}, finish))
	if opts.IncludeUsage {
		ev.send("", map[string]any{"id": sv.ResponseID, "object": "chat.completion.chunk", "created": created,
			"model": sv.Model, "choices": []any{}, "usage": usage})
	}
	ev.raw("", "[DONE]")
}

// answerResponses writes a Responses answer (reference: OpenAI response object and its
// streaming events, with a reasoning item carrying a summary before a function_call).
func (s *Scripted) answerResponses(w http.ResponseWriter, sv Served) {
	createdAt := time.Now().Unix()
	usage := sv.openAIUsage("input", "output")
	suffix := strings.TrimPrefix(sv.ResponseID, "resp_")
	var output []any
	reasoningItem := map[string]any{"id": "rs_" + suffix, "type": "reasoning",
		"summary": []any{map[string]any{"type": "summary_text", "text": sv.Reasoning}}}
	callItem, msgItem := map[string]any{}, map[string]any{}
	if sv.ToolCall != nil {
		if sv.Reasoning != "" {
			output = append(output, reasoningItem)
		}
		callItem = map[string]any{"id": "fc_" + suffix, "type": "function_call", "status": "completed",
			"call_id": sv.ToolCall.CallID, "name": sv.ToolCall.Name, "arguments": sv.argumentsJSON()}
		output = append(output, callItem)
	} else {
		msgItem = map[string]any{"id": "msg_" + suffix, "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": sv.Text, "annotations": []any{}}}}
		output = append(output, msgItem)
	}
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": sv.ResponseID, "object": "response", "created_at": createdAt, "status": status,
			"model": sv.Model, "output": output, "parallel_tool_calls": true, "tool_choice": "auto",
			"tools": []any{}, "usage": usage}
	}
	if !sv.Stream {
		writeJSON(w, http.StatusOK, response("completed", output, usage))
		return
	}
	ev := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		ev.send(typ, fields)
	}
	send("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	send("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	idx := 0
	if sv.ToolCall != nil {
		if sv.Reasoning != "" {
			id := reasoningItem["id"]
			send("response.output_item.added", map[string]any{"output_index": idx,
				"item": map[string]any{"id": id, "type": "reasoning", "summary": []any{}}})
			send("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": idx,
				"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
			for _, part := range halves(sv.Reasoning) {
				send("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": idx,
					"summary_index": 0, "delta": part})
			}
			send("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": idx,
				"summary_index": 0, "text": sv.Reasoning})
			send("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": idx,
				"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": sv.Reasoning}})
			send("response.output_item.done", map[string]any{"output_index": idx, "item": reasoningItem})
			idx++
		}
		id := callItem["id"]
		added := map[string]any{}
		for k, v := range callItem {
			added[k] = v
		}
		added["status"], added["arguments"] = "in_progress", ""
		send("response.output_item.added", map[string]any{"output_index": idx, "item": added})
		for _, part := range halves(sv.argumentsJSON()) {
			send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": idx, "delta": part})
		}
		send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx,
			"arguments": sv.argumentsJSON()})
		send("response.output_item.done", map[string]any{"output_index": idx, "item": callItem})
	} else {
		id := msgItem["id"]
		send("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		send("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, part := range halves(sv.Text) {
			send("response.output_text.delta", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
				"delta": part})
		}
		send("response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"text": sv.Text})
		send("response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": sv.Text, "annotations": []any{}}})
		send("response.output_item.done", map[string]any{"output_index": idx, "item": msgItem})
	}
	send("response.completed", map[string]any{"response": response("completed", output, usage)})
}

// answerMessages writes an Anthropic Messages answer (reference: Anthropic message object and
// its streaming events; a thinking block with a signature before a tool_use block; the prompt
// reported as input_tokens plus cache_read_input_tokens).
func (s *Scripted) answerMessages(w http.ResponseWriter, sv Served) {
	startUsage := map[string]any{"input_tokens": sv.TokensIn - sv.CachedTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": sv.CachedTokens, "output_tokens": 1}
	finalUsage := map[string]any{"input_tokens": sv.TokensIn - sv.CachedTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": sv.CachedTokens, "output_tokens": sv.TokensOut}
	signature := "e2e-signature-" + strings.TrimPrefix(sv.ResponseID, "msg_")
	var content []any
	stop := "end_turn"
	if sv.ToolCall != nil {
		if sv.Reasoning != "" {
			content = append(content, map[string]any{"type": "thinking", "thinking": sv.Reasoning, "signature": signature})
		}
		content = append(content, map[string]any{"type": "tool_use", "id": sv.ToolCall.CallID,
			"name": sv.ToolCall.Name, "input": sv.ToolCall.Arguments})
		stop = "tool_use"
	} else {
		content = append(content, map[string]any{"type": "text", "text": sv.Text})
	}
	message := func(content []any, stopReason any, usage any) map[string]any {
		return map[string]any{"id": sv.ResponseID, "type": "message", "role": "assistant", "model": sv.Model,
			"content": content, "stop_reason": stopReason, "stop_sequence": nil, "usage": usage}
	}
	if !sv.Stream {
		writeJSON(w, http.StatusOK, message(content, stop, finalUsage))
		return
	}
	ev := newSSE(w)
	ev.send("message_start", map[string]any{"type": "message_start", "message": message([]any{}, nil, startUsage)})
	block := func(index int, start map[string]any, deltas []map[string]any) {
		ev.send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": start})
		for _, d := range deltas {
			ev.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
		}
		ev.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	idx := 0
	if sv.ToolCall != nil {
		if sv.Reasoning != "" {
			var deltas []map[string]any
			for _, part := range halves(sv.Reasoning) {
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": part})
			}
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": signature})
			block(idx, map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas)
			idx++
		}
		var deltas []map[string]any
		for _, part := range halves(sv.argumentsJSON()) {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": part})
		}
		block(idx, map[string]any{"type": "tool_use", "id": sv.ToolCall.CallID, "name": sv.ToolCall.Name,
			"input": map[string]any{}}, deltas)
	} else {
		var deltas []map[string]any
		for _, part := range halves(sv.Text) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": part})
		}
		block(idx, map[string]any{"type": "text", "text": ""}, deltas)
	}
	ev.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": finalUsage})
	ev.send("message_stop", map[string]any{"type": "message_stop"})
}

// answerGemini writes a Gemini generateContent answer (reference: GenerateContentResponse; a
// thought part, as includeThoughts returns it, before a functionCall part; usageMetadata with the
// thoughts counted beside the candidates and the cached subset of the prompt). A stream sends one
// GenerateContentResponse per event (CRLF-framed, as the API frames them), each with the model
// version, response id and usage so far; the last one carries finishReason and the final usage,
// and the stream ends there, without a terminal event.
func (s *Scripted) answerGemini(w http.ResponseWriter, sv Served) {
	usage := func(final bool) map[string]any {
		u := map[string]any{"promptTokenCount": sv.TokensIn, "cachedContentTokenCount": sv.CachedTokens}
		out := 0
		if final {
			out = sv.TokensOut
		}
		u["candidatesTokenCount"] = out - min(out, sv.ReasoningTokens)
		if sv.ReasoningTokens > 0 {
			u["thoughtsTokenCount"] = sv.ReasoningTokens
		}
		u["totalTokenCount"] = sv.TokensIn + max(out, sv.ReasoningTokens)
		return u
	}
	response := func(parts []any, final bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
		if final {
			cand["finishReason"] = "STOP"
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": usage(final),
			"modelVersion": sv.Model, "responseId": sv.ResponseID}
	}
	var thought, answer []any
	if sv.ToolCall != nil {
		if sv.Reasoning != "" {
			thought = []any{map[string]any{"text": sv.Reasoning, "thought": true}}
		}
		answer = []any{map[string]any{"functionCall": map[string]any{"id": sv.ToolCall.CallID,
			"name": sv.ToolCall.Name, "args": sv.ToolCall.Arguments}}}
	} else {
		answer = []any{map[string]any{"text": sv.Text}}
	}
	if !sv.Stream {
		writeJSON(w, http.StatusOK, response(append(thought, answer...), true))
		return
	}
	ev := newSSE(w)
	ev.crlf = true
	for _, part := range halves(sv.Reasoning) {
		if sv.ToolCall != nil && part != "" {
			ev.send("", response([]any{map[string]any{"text": part, "thought": true}}, false))
		}
	}
	if sv.ToolCall != nil {
		ev.send("", response(answer, true))
		return
	}
	pieces := halves(sv.Text)
	for i, part := range pieces {
		ev.send("", response([]any{map[string]any{"text": part}}, i == len(pieces)-1))
	}
}

// sseWriter writes server-sent events, flushing after each one.
type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	crlf bool // end lines with CRLF
}

func newSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// send writes one event with an optional "event:" line and v as its JSON data line.
func (s *sseWriter) send(event string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("scripted upstream: marshal event: %v", err)) // our own maps: cannot happen
	}
	s.raw(event, string(b))
}

func (s *sseWriter) raw(event, data string) {
	eol := "\n"
	if s.crlf {
		eol = "\r\n"
	}
	var sb strings.Builder
	if event != "" {
		sb.WriteString("event: " + event + eol)
	}
	sb.WriteString("data: " + data + eol + eol)
	_, _ = s.w.Write([]byte(sb.String())) // a client that went away ends the handler's writes; nothing to report
	_ = s.rc.Flush()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("scripted upstream: marshal body: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func openAIError(msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}}
}

// readBody reads a request body of at most 64 MiB.
func readBody(r *http.Request) ([]byte, error) {
	const limit = 64 << 20
	b, err := readAllLimit(r.Body, limit)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return b, nil
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip with a non-zero weight.
func acceptsGzip(h http.Header) bool {
	for _, v := range h.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// gzipWriter compresses a response; Flush pushes out everything written so far, so SSE events
// still arrive one by one.
type gzipWriter struct {
	http.ResponseWriter
	zw *gzip.Writer
}

func newGzipWriter(w http.ResponseWriter) *gzipWriter {
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	return &gzipWriter{ResponseWriter: w, zw: gzip.NewWriter(w)}
}

func (g *gzipWriter) WriteHeader(code int) {
	g.Header().Del("Content-Length")
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(p []byte) (int, error) { return g.zw.Write(p) }

func (g *gzipWriter) Flush() {
	_ = g.zw.Flush()
	_ = http.NewResponseController(g.ResponseWriter).Flush()
}

func (g *gzipWriter) close() { _ = g.zw.Close() }
