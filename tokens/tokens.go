package tokens

import (
	"encoding/json"
	"slices"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Call is one captured model call as its capture line stores it. Every field may be nil.
type Call struct {
	// Dialect is the line's dialect ("chat", "responses", "messages", ...). Reading does not
	// depend on it; it only names the call in findings.
	Dialect string
	// Request is the request object the client sent (the line's request), or nil.
	Request []byte
	// Response is the response object (the line's response): the body of a call that was not
	// streamed, or the reconstruction of a stream, or nil.
	Response []byte
	// ResponseRaw is the line's response_raw text: the SSE body of a streamed call, or a body that
	// was not stored as an object. When it holds an SSE body it is read instead of Response, since
	// a stream's reconstruction does not keep the ids.
	ResponseRaw []byte
	// TokenCapture is the line's token_capture object (what the gateway added to the request and
	// the prompt ids it fetched itself), or nil.
	TokenCapture []byte
	// Checked says that Request, Response and TokenCapture are values inside a text that already
	// passed the capture store's strict JSON check (a capture line its reader checked whole), so
	// Read does not check them again. ResponseRaw is always checked.
	Checked bool
	// Index, when not nil, is the structural index (jsonscan.Scanner's Tree) of the checked text
	// that Response aliases: Read walks the values it indexes through it instead of their text, so
	// the answer's long lists are not stepped over again for every member read. Values it does not
	// index are walked as text; the result is the same either way.
	Index *jsonscan.Tree
}

// Source says where token ids came from.
type Source string

// The sources of generated ids, best first, then the extra sources of prompt ids.
const (
	// SourceEngineIDs: an id list the engine returned (token_ids, prompt_token_ids,
	// sglext.input_ids/output_ids).
	SourceEngineIDs Source = "engine_ids"
	// SourceLogprobEntryIDs: the id member of each logprob entry (llama-server).
	SourceLogprobEntryIDs Source = "logprob_entry_ids"
	// SourceLogprobTokenStrings: logprob tokens of the form "token_id:N" (vLLM's
	// return_tokens_as_token_ids).
	SourceLogprobTokenStrings Source = "logprob_token_strings"
	// SourceRequestIDs: the prompt was sent as ids (a Completions prompt list, SGLang input_ids).
	SourceRequestIDs Source = "request_ids"
	// SourceServerRender: prompt ids the gateway got from the same server's chat template and
	// tokenizer (llama-server's /apply-template and /tokenize) beside the call; they are the ids
	// the server would render, not ids it reported running on.
	SourceServerRender Source = "server_render"
	// SourceAbsent: no ids.
	SourceAbsent Source = "absent"
)

// Tokens is the token data of one call.
type Tokens struct {
	// Source is where the generated ids of the first choice came from.
	Source Source `json:"token_source"`
	// PromptSource is where PromptTokenIDs came from.
	PromptSource Source `json:"prompt_token_source"`
	// PromptTokenIDs are the prompt's token ids, nil when absent.
	PromptTokenIDs []int64 `json:"prompt_token_ids"`
	// Choices holds one entry per choice the response carried, in ascending index order.
	Choices []Choice `json:"choices"`
	// Streamed reports that the ids were read from an SSE body.
	Streamed bool `json:"streamed"`
	// PromptTokens and CompletionTokens are the response's usage counts, nil when it had none.
	PromptTokens     *int64 `json:"usage_prompt_tokens"`
	CompletionTokens *int64 `json:"usage_completion_tokens"`
	// Findings are the checks that failed, in the order they were made; empty when all passed.
	Findings []Finding `json:"findings"`
}

// Choice is the generation of one choice.
type Choice struct {
	Index int `json:"index"`
	// Source is where TokenIDs came from.
	Source Source `json:"token_source"`
	// TokenIDs are the generated ids in order, nil when absent.
	TokenIDs []int64 `json:"token_ids"`
	// LogProbs has one entry per generated token the engine reported a log probability for, in
	// order; nil when the response carried none.
	LogProbs []LogProb `json:"logprobs"`
	// RoutedExperts is the engine's routing record of the choice as it sent it (vLLM
	// choices[].routed_experts, SGLang sglext.routed_experts), nil when absent.
	RoutedExperts json.RawMessage `json:"routed_experts,omitempty"`
}

// LogProb is the log probability (natural log) of one generated token and its top alternatives.
type LogProb struct {
	// ID is the token id the entry names (its id member, or its "token_id:N" token), nil when it
	// names none.
	ID *int64 `json:"id"`
	// Token is the entry's token text as the engine gave it.
	Token string `json:"token"`
	// LogProb is nil when the engine gave null or only a probability.
	LogProb *float64 `json:"logprob"`
	// Top are the alternatives the engine listed, most likely first as it gave them.
	Top []TopLogProb `json:"top_logprobs,omitempty"`
}

// TopLogProb is one alternative of a LogProb.
type TopLogProb struct {
	ID      *int64   `json:"id"`
	Token   string   `json:"token"`
	LogProb *float64 `json:"logprob"`
}

// Finding is one failed check on a call. Code is one of the Finding* constants; Choice names the
// choice it is about (nil for the call as a whole); Detail says it in a sentence with the numbers.
type Finding struct {
	Code   string `json:"code"`
	Choice *int   `json:"choice,omitempty"`
	Detail string `json:"detail"`
}

// The finding codes. docs/tokens.md explains each for a trainer.
const (
	// FindingCompletionCountMismatch: the generated ids (summed over choices) are not
	// usage.completion_tokens long.
	FindingCompletionCountMismatch = "completion_count_mismatch"
	// FindingStreamTokensLost: a stream carried fewer generated ids than usage.completion_tokens
	// (a chunk without ids, a token without visible text that got no logprob entry).
	FindingStreamTokensLost = "stream_tokens_lost"
	// FindingStreamChunkWithoutIDs: in a stream whose chunks carry token_ids, a chunk with text had
	// none.
	FindingStreamChunkWithoutIDs = "stream_chunk_without_ids"
	// FindingPromptCountMismatch: the prompt ids are not usage.prompt_tokens long.
	FindingPromptCountMismatch = "prompt_count_mismatch"
	// FindingLogprobCountMismatch: a choice has a different number of logprob entries than ids.
	FindingLogprobCountMismatch = "logprob_count_mismatch"
	// FindingIDSourcesDisagree: two sources of a choice's generated ids give different ids.
	FindingIDSourcesDisagree = "id_sources_disagree"
	// FindingPromptSourcesDisagree: two sources of the prompt ids give different ids.
	FindingPromptSourcesDisagree = "prompt_sources_disagree"
	// FindingLogprobsWithoutIDs: a choice has logprobs but no source of ids (SGLang chat logprobs).
	FindingLogprobsWithoutIDs = "logprobs_without_ids"
	// FindingLogprobIDsPartial: only some of a choice's logprob entries name an id, so none are used.
	FindingLogprobIDsPartial = "logprob_ids_partial"
	// FindingNoLogprobs: a choice has ids but no logprobs.
	FindingNoLogprobs = "no_logprobs"
	// FindingNullLogprob: some logprob entries carry null, or a probability instead of a log
	// probability (llama-server's post_sampling_probs); those entries have no LogProb.
	FindingNullLogprob = "null_logprob"
	// FindingMalformedTokenField: a token field had a type no engine documents (token_ids not a
	// list of integers, ...); it was not read.
	FindingMalformedTokenField = "malformed_token_field"
	// FindingUnreadableResponse: the response is neither a JSON object nor an SSE body of JSON
	// events.
	FindingUnreadableResponse = "unreadable_response"
	// FindingServerRenderFailed: the gateway could not get the prompt ids from the server's
	// template and tokenizer; the detail is its error.
	FindingServerRenderFailed = "server_render_failed"
	// FindingNotAskedStreamWithTools: the gateway deliberately did not ask llama-server for
	// logprobs on a streamed Chat request with tools (token_capture.not_asked "stream_with_tools"):
	// the server refuses them there, so the call has no generated ids.
	FindingNotAskedStreamWithTools = "not_asked_stream_with_tools"
	// FindingNotAsked: the gateway deliberately did not ask the engine, for a reason this reader
	// does not know (token_capture.not_asked, named in the detail).
	FindingNotAsked = "not_asked"
)

// Has reports whether t carries a finding with code.
func (t *Tokens) Has(code string) bool {
	return slices.ContainsFunc(t.Findings, func(f Finding) bool { return f.Code == code })
}

// first returns the first choice, nil when there is none.
func (t *Tokens) first() *Choice {
	if len(t.Choices) == 0 {
		return nil
	}
	return &t.Choices[0]
}

// GenerationTokenIDs returns the generated ids of the first choice, nil when absent.
func (t *Tokens) GenerationTokenIDs() []int64 {
	if c := t.first(); c != nil {
		return c.TokenIDs
	}
	return nil
}

// GenerationLogProbs returns the log probability of each generated token of the first choice,
// nil unless the choice has ids and exactly one non-null log probability per id.
func (t *Tokens) GenerationLogProbs() []float64 {
	c := t.first()
	if c == nil || c.TokenIDs == nil || len(c.LogProbs) != len(c.TokenIDs) {
		return nil
	}
	out := make([]float64, len(c.LogProbs))
	for i, lp := range c.LogProbs {
		if lp.LogProb == nil {
			return nil
		}
		out[i] = *lp.LogProb
	}
	return out
}

// Complete reports whether the call has what a trainer needs from one call: prompt ids, the first
// choice's generated ids and one log probability per generated id.
func (t *Tokens) Complete() bool {
	return t.PromptTokenIDs != nil && t.GenerationTokenIDs() != nil && t.GenerationLogProbs() != nil
}

// HasTokenData reports whether the call carries any generated ids.
func (t *Tokens) HasTokenData() bool { return t.GenerationTokenIDs() != nil }
