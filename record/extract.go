package record

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Extraction from a response payload: token counts, the cache signal, tool calls and reasoning, and
// the finish reason, across the four wire shapes (Responses, Chat Completions, Anthropic Messages,
// Gemini generateContent), told apart by their members, not by the line's dialect.
// The record builder calls the forms that take scanned fields, on a line it has already validated;
// the ...JSON forms take one raw JSON value and validate it first (the unit tests drive them).
// Only ExtractTokenStats is exported: the other rules are the seed's private helpers.

// TokenStats are the normalised token counts of one call (NeMo Gym's normalisation plus the cache and reasoning fields below), in tokens;
// nil means unknown, 0 is a value.
type TokenStats struct {
	TokensIn            *int64 `json:"tokens_in"`
	TokensOut           *int64 `json:"tokens_out"`
	TokensReasoning     *int64 `json:"tokens_reasoning"`
	TokensTotal         *int64 `json:"tokens_total"`
	CacheCreationTokens *int64 `json:"cache_creation_tokens"`
}

// tokenCountJSON ports _token_count: v is a valid token count when it is a JSON integer literal >= 0
// that fits in int64 (10 is; 10.0, 1e3, true, "10", -1 are not: NeMo Gym counts only ints that are
// not bools, and a JSON number with a fraction or exponent reads as a float). ok is false for
// anything else, which callers treat as absent.
func tokenCountJSON(v json.RawMessage) (n int64, ok bool) {
	return tokenCount(jsonscan.TrimWS(v))
}

func tokenCount(v []byte) (int64, bool) {
	n, ok := jsonscan.Int(v)
	if !ok || n < 0 {
		return 0, false
	}
	return n, true
}

// usageDetailToken ports _usage_detail_token: the first valid token count among
// usage[group][field], group-major (every field of the first group, then the next group). Groups
// that are not objects are skipped. ok is false when none is found or usage is not an object.
func usageDetailToken(usage json.RawMessage, groups, fields []string) (n int64, ok bool) {
	usage = jsonscan.TrimWS(usage)
	if !jsonscan.IsObject(usage) || jsonscan.Validate(usage) != nil {
		return 0, false
	}
	raw := make([][]byte, len(groups))
	for i, g := range groups {
		raw[i] = jsonscan.Lookup(usage, g)
	}
	return detailToken(nil, raw, fields...)
}

// detailToken is usageDetailToken over the raw groups, looked up through t (nil: walked as text).
// The record builder reads the groups of scanUsage instead (detailFields): the same rule, each
// group walked once.
func detailToken(t *jsonscan.Tree, groups [][]byte, fields ...string) (int64, bool) {
	for _, g := range groups {
		if !jsonscan.IsObject(g) {
			continue
		}
		for _, f := range fields {
			if n, ok := tokenCount(t.Lookup(g, f)); ok {
				return n, true
			}
		}
	}
	return 0, false
}

// usageFields are the members of a usage object that the rules read.
type usageFields struct {
	inputTokens, promptTokens, outputTokens, completionTokens, totalTokens []byte
	cacheRead, cacheCreation, cachedInput, reasoningOutput                 []byte
	promptDetails, inputDetails, outputDetails, completionDetails          []byte
	promptCacheHit, promptCacheMiss, reasoningTokens                       []byte
	// Gemini's usageMetadata counts.
	geminiPrompt, geminiCandidates, geminiThoughts, geminiCached, geminiTotal, geminiToolUse []byte
	isObject                                                                                 bool
	// The counts the rules read in the four detail groups, each group walked once.
	prompt, input, output, completion detailFields
}

// detailFields are the members of a usage detail group (prompt_tokens_details, ...) that the rules
// read; all nil when the group is absent or not an object.
type detailFields struct {
	cachedTokens, cachedInputTokens, cacheWriteTokens, cacheCreationTokens, reasoningTokens, thinkingTokens []byte
}

// scanUsage maps the members of usage and of its detail groups, read through t (nil: walked as
// text). When t indexes usage, its children are visited by node and each group is found by its
// node, without a search per lookup.
func scanUsage(usage []byte, t *jsonscan.Tree) usageFields {
	var u usageFields
	u.scan(usage, t)
	return u
}

// scan is scanUsage into u, a zero usageFields (the record builder keeps it in place: it is large
// enough that copying it costs more than filling it).
func (u *usageFields) scan(usage []byte, t *jsonscan.Tree) {
	if n := t.Node(usage); n >= 0 {
		if usage[0] != '{' {
			return
		}
		u.isObject = true
		// The node of the last occurrence of each group (last one wins), -1 for none.
		groups := [4]int{-1, -1, -1, -1}
		for c, end := t.Children(n); c < end; c = t.Next(c) {
			k, v := t.Member(c)
			if g := u.set(k, v); g >= 0 {
				groups[g] = c
			}
		}
		for g, c := range groups {
			if c >= 0 {
				if _, v := t.Member(c); jsonscan.IsObject(v) {
					d := u.detail(g)
					for cc, end := t.Children(c); cc < end; cc = t.Next(cc) {
						d.set(t.Member(cc))
					}
				}
			}
		}
		return
	}
	u.isObject = jsonscan.EachMember(usage, func(k, v []byte) bool {
		u.set(k, v)
		return true
	})
	for g, v := range [...][]byte{u.promptDetails, u.inputDetails, u.outputDetails, u.completionDetails} {
		d := u.detail(g)
		jsonscan.EachMember(v, func(k, v []byte) bool {
			d.set(k, v)
			return true
		})
	}
}

// Detail group numbers, as set returns them and detail takes them.
const (
	groupPrompt = iota
	groupInput
	groupOutput
	groupCompletion
)

// detail returns the fields of detail group g.
func (u *usageFields) detail(g int) *detailFields {
	switch g {
	case groupPrompt:
		return &u.prompt
	case groupInput:
		return &u.input
	case groupOutput:
		return &u.output
	}
	return &u.completion
}

// set records v as the value of the detail key named by the key token k (last one wins), compared
// as it stands and, when it matches no name, decoded (decodedKey) and compared once more.
func (d *detailFields) set(k, v []byte) {
	switch string(k) {
	case `"cached_tokens"`:
		d.cachedTokens = v
	case `"cached_input_tokens"`:
		d.cachedInputTokens = v
	case `"cache_write_tokens"`:
		d.cacheWriteTokens = v
	case `"cache_creation_tokens"`:
		d.cacheCreationTokens = v
	case `"reasoning_tokens"`:
		d.reasoningTokens = v
	case `"thinking_tokens"`:
		d.thinkingTokens = v
	default:
		if dk, ok := decodedKey(k); ok {
			d.set(dk, v)
		}
	}
}

// firstCount returns the first valid token count among vs.
func firstCount(vs ...[]byte) (int64, bool) {
	for _, v := range vs {
		if len(v) == 0 {
			continue
		}
		if n, ok := tokenCount(v); ok {
			return n, true
		}
	}
	return 0, false
}

// set records v as the value of the usage key named by the key token k (last one wins), compared as
// it stands and, when it matches no name, decoded (decodedKey) and compared once more; it returns
// the group number when the key names a detail group, else -1.
func (u *usageFields) set(k, v []byte) (group int) {
	switch string(k) {
	case `"input_tokens"`:
		u.inputTokens = v
	case `"prompt_tokens"`:
		u.promptTokens = v
	case `"output_tokens"`:
		u.outputTokens = v
	case `"completion_tokens"`:
		u.completionTokens = v
	case `"total_tokens"`:
		u.totalTokens = v
	case `"cache_read_input_tokens"`:
		u.cacheRead = v
	case `"cache_creation_input_tokens"`:
		u.cacheCreation = v
	case `"cached_input_tokens"`:
		u.cachedInput = v
	case `"reasoning_output_tokens"`:
		u.reasoningOutput = v
	case `"prompt_tokens_details"`:
		u.promptDetails = v
		return groupPrompt
	case `"input_tokens_details"`:
		u.inputDetails = v
		return groupInput
	case `"output_tokens_details"`:
		u.outputDetails = v
		return groupOutput
	case `"completion_tokens_details"`:
		u.completionDetails = v
		return groupCompletion
	case `"prompt_cache_hit_tokens"`:
		u.promptCacheHit = v
	case `"prompt_cache_miss_tokens"`:
		u.promptCacheMiss = v
	case `"reasoning_tokens"`:
		u.reasoningTokens = v
	case `"promptTokenCount"`:
		u.geminiPrompt = v
	case `"candidatesTokenCount"`:
		u.geminiCandidates = v
	case `"thoughtsTokenCount"`:
		u.geminiThoughts = v
	case `"cachedContentTokenCount"`:
		u.geminiCached = v
	case `"totalTokenCount"`:
		u.geminiTotal = v
	case `"toolUsePromptTokenCount"`:
		u.geminiToolUse = v
	default:
		if d, ok := decodedKey(k); ok {
			return u.set(d, v)
		}
	}
	return -1
}

// ExtractTokenStats ports extract_token_stats: normalised token counts from a usage object of any
// of the three dialects (NeMo Gym's rules, with the OpenAI cached subset never folded), extended to the usage shapes of the servers
// and gateways agents call (the provider table in docs/records-and-merge.md). usage that is absent,
// null, not an object or not valid JSON gives all-nil stats.
//
//   - tokens_in: input_tokens, else prompt_tokens, else (DeepSeek, which splits the prompt)
//     prompt_cache_hit_tokens + prompt_cache_miss_tokens when both are valid.
//   - tokens_out: output_tokens, else completion_tokens; plus tokens_reasoning when the provider's
//     own total shows the reasoning was counted outside the completion (total_tokens ==
//     prompt + completion + reasoning, reasoning > 0: Gemini's OpenAI-compatible endpoint, early
//     xAI), so that tokens_out always includes tokens_reasoning, as in OpenAI's usage.
//   - Anthropic cache fold: top-level cache_read_input_tokens + cache_creation_input_tokens are added
//     into tokens_in only when the prompt count came from input_tokens (or there is none) and no
//     OpenAI-style cache subset (a cached_tokens, cached_input_tokens, cache_write_tokens or
//     cache_creation_tokens count in prompt_tokens_details / input_tokens_details) is present:
//     gateways that copy Anthropic cache fields into OpenAI-shaped usage already count them in the
//     prompt (OpenAI's cached_tokens are a subset of prompt_tokens). Zero-only cache fields do not invent a prompt count. Counts in a details
//     group or DeepSeek's hit/miss are subsets of the prompt and never folded.
//   - tokens_total: total_tokens as reported, else tokens_in + tokens_out when both are known.
//   - tokens_reasoning: output_tokens_details.reasoning_tokens, completion_tokens_details.reasoning_tokens,
//     top-level reasoning_output_tokens, output_tokens_details.thinking_tokens (after NeMo Gym's sources), then
//     top-level reasoning_tokens (Gemini's OpenAI-compatible endpoint).
//   - cache_creation_tokens: cache_creation_input_tokens as reported (whether or not it was folded),
//     else the first valid prompt_tokens_details.cache_write_tokens (OpenRouter, OpenAI, llama.cpp),
//     prompt_tokens_details.cache_creation_tokens (LiteLLM), input_tokens_details.cache_write_tokens,
//     input_tokens_details.cache_creation_tokens (Responses shape).
//   - Gemini's usageMetadata (no count of the shapes above present): tokens_in promptTokenCount plus
//     toolUsePromptTokenCount (the results of built-in tools the model read); tokens_out
//     candidatesTokenCount plus thoughtsTokenCount (Gemini counts thoughts outside the candidates,
//     and tokens_out always includes tokens_reasoning); tokens_reasoning thoughtsTokenCount;
//     tokens_total totalTokenCount; cachedContentTokenCount is a subset of the prompt, never folded.
func ExtractTokenStats(usage json.RawMessage) TokenStats {
	usage = jsonscan.TrimWS(usage)
	if !jsonscan.IsObject(usage) || jsonscan.Validate(usage) != nil {
		return TokenStats{}
	}
	u := scanUsage(usage, nil)
	return extractTokenStats(&u, new(tokenBox))
}

// tokenBox holds the counts a TokenStats points at: one allocation for all of them (a record
// embeds it in its recordBox).
type tokenBox struct {
	in, out, reasoning, total, creation, cached int64
	hit                                         bool
}

// put stores n in *dst and returns dst.
func put[T any](dst *T, n T) *T {
	*dst = n
	return dst
}

// extractTokenStats is ExtractTokenStats over scanned usage fields, the counts stored in b.
func extractTokenStats(u *usageFields, b *tokenBox) TokenStats {
	var s TokenStats
	if !u.isObject {
		return s
	}
	if u.isGemini() {
		return u.geminiStats(b)
	}
	fromPrompt := false
	if n, ok := tokenCount(u.inputTokens); ok {
		s.TokensIn = put(&b.in, n)
	} else if n, ok := tokenCount(u.promptTokens); ok {
		s.TokensIn = put(&b.in, n)
		fromPrompt = true
	} else if hit, ok := tokenCount(u.promptCacheHit); ok {
		if miss, ok := tokenCount(u.promptCacheMiss); ok {
			s.TokensIn = put(&b.in, hit+miss)
			fromPrompt = true
		}
	}
	var prompt *int64 // as reported, before any fold (b.in may be folded later)
	if s.TokensIn != nil {
		prompt = new(*s.TokensIn)
	}
	if n, ok := tokenCount(u.outputTokens); ok {
		s.TokensOut = put(&b.out, n)
	} else if n, ok := tokenCount(u.completionTokens); ok {
		s.TokensOut = put(&b.out, n)
	}

	read, haveRead := tokenCount(u.cacheRead)
	creation, haveCreation := tokenCount(u.cacheCreation)
	if haveCreation {
		s.CacheCreationTokens = put(&b.creation, creation)
	} else if n, ok := u.openAICacheWrite(); ok {
		s.CacheCreationTokens = put(&b.creation, n)
	}
	if (haveRead || haveCreation) && !fromPrompt && !u.hasOpenAICacheSubset() {
		cacheTotal := read + creation // absent ones are 0
		if s.TokensIn != nil || cacheTotal > 0 {
			in := cacheTotal
			if s.TokensIn != nil {
				in += *s.TokensIn
			}
			s.TokensIn = put(&b.in, in)
		}
	}

	if n, ok := firstCount(u.output.reasoningTokens, u.completion.reasoningTokens); ok {
		s.TokensReasoning = put(&b.reasoning, n)
	} else if n, ok := tokenCount(u.reasoningOutput); ok {
		s.TokensReasoning = put(&b.reasoning, n)
	} else if n, ok := tokenCount(u.output.thinkingTokens); ok {
		s.TokensReasoning = put(&b.reasoning, n)
	} else if n, ok := tokenCount(u.reasoningTokens); ok {
		s.TokensReasoning = put(&b.reasoning, n)
	}

	total, haveTotal := tokenCount(u.totalTokens)
	if haveTotal && prompt != nil && s.TokensOut != nil && s.TokensReasoning != nil && *s.TokensReasoning > 0 &&
		total == *prompt+*s.TokensOut+*s.TokensReasoning {
		s.TokensOut = put(&b.out, *s.TokensOut+*s.TokensReasoning)
	}
	if haveTotal {
		s.TokensTotal = put(&b.total, total)
	} else if s.TokensIn != nil && s.TokensOut != nil {
		s.TokensTotal = put(&b.total, *s.TokensIn+*s.TokensOut)
	}
	return s
}

// isGemini reports usage in Gemini's usageMetadata shape: a Gemini count and none of the prompt or
// output counts of the other shapes.
func (u *usageFields) isGemini() bool {
	if u.geminiPrompt == nil && u.geminiCandidates == nil && u.geminiThoughts == nil && u.geminiTotal == nil {
		return false
	}
	return u.inputTokens == nil && u.promptTokens == nil && u.outputTokens == nil && u.completionTokens == nil
}

// geminiStats is extractTokenStats for Gemini's usageMetadata (see ExtractTokenStats).
func (u *usageFields) geminiStats(b *tokenBox) TokenStats {
	var s TokenStats
	if n, ok := tokenCount(u.geminiPrompt); ok {
		if t, ok := tokenCount(u.geminiToolUse); ok {
			n += t
		}
		s.TokensIn = put(&b.in, n)
	}
	cand, haveCand := tokenCount(u.geminiCandidates)
	thoughts, haveThoughts := tokenCount(u.geminiThoughts)
	if haveThoughts {
		s.TokensReasoning = put(&b.reasoning, thoughts)
	}
	if haveCand || haveThoughts {
		s.TokensOut = put(&b.out, cand+thoughts) // an absent one is 0
	}
	if n, ok := tokenCount(u.geminiTotal); ok {
		s.TokensTotal = put(&b.total, n)
	} else if s.TokensIn != nil && s.TokensOut != nil {
		s.TokensTotal = put(&b.total, *s.TokensIn+*s.TokensOut)
	}
	return s
}

func (u *usageFields) openAICached() (int64, bool) {
	return firstCount(u.prompt.cachedTokens, u.prompt.cachedInputTokens, u.input.cachedTokens, u.input.cachedInputTokens)
}

// openAICacheWrite is the first valid cache-write count of the OpenAI-style detail groups.
func (u *usageFields) openAICacheWrite() (int64, bool) {
	return firstCount(u.prompt.cacheWriteTokens, u.prompt.cacheCreationTokens, u.input.cacheWriteTokens, u.input.cacheCreationTokens)
}

// hasOpenAICacheSubset reports a valid cache read or write count inside prompt_tokens_details or
// input_tokens_details: the mark of usage whose prompt count already includes its cache.
func (u *usageFields) hasOpenAICacheSubset() bool {
	if _, ok := u.openAICached(); ok {
		return true
	}
	_, ok := u.openAICacheWrite()
	return ok
}

// cacheSignalJSON ports _cache_signal: whether the prompt hit the provider's cache and how many
// prompt tokens were read from it. The count is the first valid one of
// prompt_tokens_details.{cached_tokens, cached_input_tokens}, input_tokens_details.{cached_tokens,
// cached_input_tokens}, top-level cache_read_input_tokens, top-level cached_input_tokens, then
// top-level prompt_cache_hit_tokens (DeepSeek); hit is count > 0. The first match wins even when it is 0 and a later field is positive. Both are nil
// when no count is present (or usage is not a valid JSON object). Cache creation is never a hit.
func cacheSignalJSON(usage json.RawMessage) (hit *bool, cachedTokens *int64) {
	usage = jsonscan.TrimWS(usage)
	if !jsonscan.IsObject(usage) || jsonscan.Validate(usage) != nil {
		return nil, nil
	}
	u := scanUsage(usage, nil)
	return cacheSignal(&u, new(tokenBox))
}

// cacheSignal is cacheSignalJSON over scanned usage fields, the values stored in b.
func cacheSignal(u *usageFields, b *tokenBox) (*bool, *int64) {
	if !u.isObject {
		return nil, nil
	}
	n, ok := u.openAICached()
	if !ok {
		n, ok = tokenCount(u.cacheRead)
	}
	if !ok {
		n, ok = tokenCount(u.cachedInput)
	}
	if !ok {
		n, ok = tokenCount(u.promptCacheHit)
	}
	if !ok && u.isGemini() {
		n, ok = tokenCount(u.geminiCached)
	}
	if !ok {
		return nil, nil
	}
	return put(&b.hit, n > 0), put(&b.cached, n)
}

// normalizeArgumentsJSON ports _as_arguments, with one difference of ours: tool-call arguments
// always become a JSON object (NeMo Gym keeps a decoded list or number as it is), so a reader can
// index them without a type switch. An object is kept as it is; a JSON string is decoded, and kept when it holds an
// object, else (a list, number, string, null, invalid JSON, "") it becomes {"_raw": <the string>};
// anything else (absent, null, number, list, boolean) becomes {}. The result aliases v when v is
// an object.
func normalizeArgumentsJSON(v json.RawMessage) json.RawMessage {
	v = jsonscan.TrimWS(v)
	if jsonscan.Validate(v) != nil {
		return json.RawMessage("{}")
	}
	return normalizeArguments(v)
}

func normalizeArguments(v []byte) json.RawMessage {
	switch {
	case jsonscan.IsObject(v):
		return v
	case jsonscan.IsString(v):
		s := jsonscan.Unquote(v)
		if inner := jsonscan.TrimWS([]byte(s)); jsonscan.IsObject(inner) && jsonscan.Validate(inner) == nil {
			return compactLines(inner)
		}
		return rawArguments(s)
	default:
		return json.RawMessage("{}")
	}
}

// rawArguments builds {"_raw": s}.
func rawArguments(s string) json.RawMessage {
	b := make([]byte, 0, len(s)+12)
	b = append(b, `{"_raw":`...)
	b = jsonscan.AppendString(b, s)
	return append(b, '}')
}

// compactLines returns v (valid JSON) unchanged unless it contains line breaks, which JSONL output
// cannot carry; then it returns a compacted copy.
func compactLines(v []byte) []byte {
	if bytes.ContainsAny(v, "\r\n") {
		return appendRaw(nil, v)
	}
	return v
}

// toolCallsAndReasoningJSON ports _tool_calls_and_reasoning: the client tool calls and the readable
// reasoning text of a response object, across the three shapes. The shape is the
// first of response.output (Responses), response.choices (Chat), response.content (Anthropic) that
// is a JSON array; an output array, even empty, stops the search. Reasoning pieces are joined with
// "\n"; an empty join gives nil.
//
// Malformed parts are skipped instead of failing the record (the payloads are the provider's, and
// one odd part must not lose the call; NeMo Gym drops such a record as damaged): a summary or tool_calls that is not an array contributes
// nothing. Call ids and names that are not strings become nil. Tool arguments go through
// normalizeArgumentsJSON's rule; Anthropic tool_use input is {} when falsy, else
// normalised the same way.
func toolCallsAndReasoningJSON(response json.RawMessage) ([]ToolCall, *string) {
	response = jsonscan.TrimWS(response)
	if !jsonscan.IsObject(response) || jsonscan.Validate(response) != nil {
		return nil, nil
	}
	f := scanResponse(response)
	return toolCallsAndReasoning(&f)
}

func toolCallsAndReasoning(f *responseFields) ([]ToolCall, *string) {
	calls, reasoning, ok := toolCallsAndReasoningText(f)
	if !ok {
		return calls, nil
	}
	return calls, &reasoning
}

// toolCallsAndReasoningText is toolCallsAndReasoning with the reasoning as a value (ok false for
// nil): the record builder keeps it in the record's box instead of an allocation of its own. The
// shapes are the dialects' (dialect.ToolCalls).
func toolCallsAndReasoningText(f *responseFields) ([]ToolCall, string, bool) {
	out := toolCallSink{alias: f.alias}
	if !dialect.ToolCalls(&f.members, dialect.Sink{Call: out.call, Reasoning: out.reasoning}) {
		return nil, "", false
	}
	reasoning := out.first
	if out.pieces > 1 {
		reasoning = strings.Join(out.more, "\n")
	}
	return out.calls, reasoning, reasoning != ""
}

// toolCallSink collects one response's tool calls and reasoning pieces. Most responses have at
// most one call and one piece: the first call and its id and name share one allocation
// (firstToolCall), the first piece is kept without a slice, and later ones go to slices.
// alias is text's: strings may share the line's memory.
type toolCallSink struct {
	calls  []ToolCall
	strs   []string // the ids and names of the calls after the first
	first  string   // the first reasoning piece
	more   []string // every piece, once there are two
	pieces int
	alias  bool
}

// firstToolCall holds a response's first tool call and the strings it points at.
type firstToolCall struct {
	call     [1]ToolCall
	id, name string
}

// call appends a call the response holds: its arguments normalised (normalizeArguments; an
// object member that is not truthy is {}).
func (s *toolCallSink) call(c dialect.RawToolCall) {
	var args json.RawMessage
	switch {
	case !c.ArgsObject, jsonscan.Truthy(c.Args):
		args = normalizeArguments(c.Args)
	default:
		args = json.RawMessage("{}")
	}
	s.add(c.CallID, c.Name, args)
}

// reasoning appends a reasoning piece the response holds, when a string.
func (s *toolCallSink) reasoning(v []byte) {
	if t, ok := text(v, s.alias); ok {
		s.reason(t)
	}
}

// add appends a call: its id and name from their raw values (nil when not strings).
func (s *toolCallSink) add(callID, name []byte, args json.RawMessage) {
	if s.calls == nil {
		b := new(firstToolCall)
		b.call[0] = ToolCall{CallID: s.strInto(callID, &b.id), Name: s.strInto(name, &b.name), Arguments: args}
		s.calls = b.call[:1:1]
		return
	}
	s.calls = append(s.calls, ToolCall{CallID: s.ptr(callID), Name: s.ptr(name), Arguments: args})
}

// reason appends a reasoning piece.
func (s *toolCallSink) reason(piece string) {
	switch s.pieces {
	case 0:
		s.first = piece
	case 1:
		s.more = append(s.more, s.first, piece)
	default:
		s.more = append(s.more, piece)
	}
	s.pieces++
}

// strInto is stringInto with the sink's alias.
func (s *toolCallSink) strInto(v []byte, dst *string) *string { return stringInto(v, dst, s.alias) }

// ptr returns a pointer to the text of v kept in s.strs, nil when v is not a string.
func (s *toolCallSink) ptr(v []byte) *string {
	t, ok := text(v, s.alias)
	if !ok {
		return nil
	}
	if len(s.strs) == cap(s.strs) {
		s.strs = make([]string, 0, 8) // earlier strings stay where they are
	}
	s.strs = append(s.strs, t)
	return &s.strs[len(s.strs)-1]
}

// finishReasonJSON returns why generation stopped: the first string among response.stop_reason
// (Anthropic), response.choices[0].finish_reason (Chat; only when choices is a non-empty array whose
// first item is an object) and response.incomplete_details.reason (Responses; only when an object),
// (NeMo Gym's order of the three shapes), then response.candidates[0].finishReason (Gemini; only
// when candidates is a non-empty array whose first item is an object), else nil. response that is not a valid JSON object gives nil.
func finishReasonJSON(response json.RawMessage) *string {
	response = jsonscan.TrimWS(response)
	if !jsonscan.IsObject(response) || jsonscan.Validate(response) != nil {
		return nil
	}
	f := scanResponse(response)
	return finishReason(&f)
}

func finishReason(f *responseFields) *string {
	if s, ok := finishReasonText(f); ok {
		return &s
	}
	return nil
}

// finishReasonText is finishReason without the pointer: ok false for nil. The shapes and their
// order are the dialects' (dialect.FinishReason).
func finishReasonText(f *responseFields) (string, bool) {
	return text(dialect.FinishReason(&f.members), f.alias)
}

// responseFields are the members of a response object that the rules read: those that tell its
// dialect's shape and hold its tool calls and finish reason (members, read by package dialect),
// and those of the record's own fields.
type responseFields struct {
	members                                 dialect.ResponseMembers
	id, model, status, usage                []byte
	usageMetadata, modelVersion, responseID []byte // Gemini's
	alias                                   bool   // strings may share the text's memory (text)
}

func scanResponse(obj []byte) responseFields {
	var f responseFields
	jsonscan.EachMember(obj, func(k, v []byte) bool {
		f.set(k, v)
		return true
	})
	return f
}

// set records v as the value of the response member named by the key token k (last one wins),
// compared as it stands and, when it matches no name, decoded (decodedKey) and compared once more.
func (f *responseFields) set(k, v []byte) {
	switch string(k) {
	case `"id"`:
		f.id = v
	case `"model"`:
		f.model = v
	case `"status"`:
		f.status = v
	case `"stop_reason"`:
		f.members.StopReason = v
	case `"choices"`:
		f.members.Choices = v
	case `"incomplete_details"`:
		f.members.IncompleteDetails = v
	case `"usage"`:
		f.usage = v
	case `"output"`:
		f.members.Output = v
	case `"content"`:
		f.members.Content = v
	case `"candidates"`:
		f.members.Candidates = v
	case `"usageMetadata"`:
		f.usageMetadata = v
	case `"modelVersion"`:
		f.modelVersion = v
	case `"responseId"`:
		f.responseID = v
	default:
		if d, ok := decodedKey(k); ok {
			f.set(d, v)
		}
	}
}
