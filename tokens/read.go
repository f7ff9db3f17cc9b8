package tokens

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// Read returns the token data of c. It never fails: what it cannot read becomes a Finding.
func Read(c Call) *Tokens {
	r := &reader{choices: map[int]*choiceAcc{}}
	r.readResponse(c)
	r.readRequest(c.Request)
	r.readTokenCapture(c.TokenCapture)
	return r.finish()
}

// obj is the raw text of a JSON object that passed jsonscan.Validate (a whole body or event, or a
// value inside one), read with jsonscan's walkers: nothing is decoded that is not looked at.
type obj []byte

// get returns the raw value of o's last member named key, nil when there is none.
func (o obj) get(key string) json.RawMessage { return jsonscan.Lookup(o, key) }

// reader gathers what the response objects (one, or one per SSE event) say, then checks it.
type reader struct {
	streamed bool
	choices  map[int]*choiceAcc

	prompt       []idSet          // candidate prompt id lists, in the order of their sources' rank
	promptSeen   map[uint64][]int // addPrompt's lists by hash of where they were read and their ids: indexes into prompt
	seed         maphash.Seed
	usagePrompt  *int64
	usageCompl   *int64
	findings     []Finding
	malformedSet map[string]bool
}

// idSet is one candidate list of ids with its source and where it was read.
type idSet struct {
	src  Source
	from string
	ids  []int64
}

// choiceAcc gathers one choice over the objects of a response.
type choiceAcc struct {
	index      int
	engine     []int64 // choices[].token_ids, concatenated over a stream's chunks
	hasEngine  bool
	sglext     []int64 // sglext.output_ids[i]
	hasSglext  bool
	gym        []int64 // a NeMo Gym model server's generation_token_ids
	hasGym     bool
	gymLogp    []float64
	hasGymLogp bool
	logprobs   []LogProb
	hasLogp    bool
	nullLogp   int
	probsOnly  bool

	routed json.RawMessage

	textChunks      int // stream chunks whose delta carried text
	textChunksNoIDs int // of those, the ones without token_ids
}

func (r *reader) choice(i int) *choiceAcc {
	a := r.choices[i]
	if a == nil {
		a = &choiceAcc{index: i}
		r.choices[i] = a
	}
	return a
}

func (r *reader) find(code string, choice *int, format string, args ...any) {
	r.findings = append(r.findings, Finding{Code: code, Choice: choice, Detail: fmt.Sprintf(format, args...)})
}

// malformed records a token field of the wrong type once per field path.
func (r *reader) malformed(path, want string) {
	if r.malformedSet == nil {
		r.malformedSet = map[string]bool{}
	}
	if r.malformedSet[path] {
		return
	}
	r.malformedSet[path] = true
	r.find(FindingMalformedTokenField, nil, "%s is not %s; not read", path, want)
}

func (r *reader) readResponse(c Call) {
	raw := bytes.TrimSpace(c.ResponseRaw)
	switch {
	case len(raw) > 0 && raw[0] == '{' && c.Response == nil:
		// A body that was not stored as an object (the store refused it): read it if it is one.
		o, ok := parseObj(raw)
		if !ok {
			r.find(FindingUnreadableResponse, nil, "response_raw is not a JSON object")
			return
		}
		r.readObject(o)
	case len(raw) > 0 && raw[0] != '{':
		r.streamed = true
		n := 0
		for _, ev := range sse.Parse(raw) {
			if !ev.HasData || ev.Data == "[DONE]" {
				continue
			}
			o, ok := parseObj([]byte(ev.Data))
			if !ok {
				continue
			}
			n++
			r.readObject(o)
		}
		if n == 0 {
			r.find(FindingUnreadableResponse, nil, "response_raw holds no SSE event with a JSON object")
		}
	case c.Response != nil:
		o, ok := parseObj(c.Response)
		if !ok {
			r.find(FindingUnreadableResponse, nil, "response is not a JSON object")
			return
		}
		r.readObject(o)
	}
}

// readObject folds one response object (a whole response or one stream chunk) in.
func (r *reader) readObject(o obj) {
	if v, ok := present(o, "prompt_token_ids"); ok {
		r.addPrompt(v, SourceEngineIDs, "prompt_token_ids")
	}
	if v, ok := present(o, "sglext"); ok {
		r.readSglext(v)
	}
	if v, ok := present(o, "usage"); ok {
		if u, ok := asObj(v); ok {
			if n, ok := asInt(u.get("prompt_tokens")); ok {
				r.usagePrompt = &n
			}
			if n, ok := asInt(u.get("completion_tokens")); ok {
				r.usageCompl = &n
			}
		}
	}
	if v, ok := present(o, "choices"); ok {
		arr, ok := asArr(v)
		if !ok {
			r.malformed("choices", "a list")
			return
		}
		var seen map[int]bool // a whole answer's choice indexes: each names one choice
		if !r.streamed {
			seen = make(map[int]bool, len(arr))
		}
		for pos, cv := range arr {
			co, ok := asObj(cv)
			if !ok {
				continue
			}
			idx := pos
			if n, ok := asInt(co.get("index")); ok {
				idx = int(n)
			} else if r.streamed {
				idx = 0 // a chunk's choice without an index is choice 0
			}
			if seen != nil {
				if seen[idx] {
					// Only a stream's chunks continue a choice; joining two answers' ids would make
					// a sample no engine produced.
					r.malformed("choices[].index", "unique in the answer (a later choice with the same index is not read)")
					continue
				}
				seen[idx] = true
			}
			r.readChoice(r.choice(idx), co)
		}
	}
	if v, ok := present(o, "output"); ok {
		// A NeMo Gym model server's Responses answer: the ids ride the last output item carrying them.
		if arr, ok := asArr(v); ok {
			for i := len(arr) - 1; i >= 0; i-- {
				if io, ok := asObj(arr[i]); ok && r.readGymFields(r.choice(0), io, "output[]") {
					break
				}
			}
		}
	}
}

// readSglext reads SGLang's response-level extension: input_ids (the prompt) and output_ids (one
// id list per choice, by position).
func (r *reader) readSglext(v json.RawMessage) {
	s, ok := asObj(v)
	if !ok {
		return
	}
	if re, ok := present(s, "routed_experts"); ok {
		r.choice(0).routed = re
	}
	if in, ok := present(s, "input_ids"); ok {
		r.addPrompt(in, SourceEngineIDs, "sglext.input_ids")
	}
	if out, ok := present(s, "output_ids"); ok {
		lists, ok := asArr(out)
		if !ok {
			r.malformed("sglext.output_ids", "a list of id lists")
			return
		}
		for i, l := range lists {
			ids, ok := asIDs(l)
			if !ok {
				r.malformed("sglext.output_ids", "a list of id lists")
				return
			}
			a := r.choice(i)
			a.sglext = append(a.sglext, ids...)
			a.hasSglext = true
		}
	}
}

func (r *reader) readChoice(a *choiceAcc, co obj) {
	_, hasIDs := present(co, "token_ids")
	if v, ok := present(co, "token_ids"); ok {
		ids, ok := asIDs(v)
		if !ok {
			r.malformed("choices[].token_ids", idsWant)
			hasIDs = false
		} else {
			a.engine = append(a.engine, ids...)
			a.hasEngine = true
		}
	}
	if v, ok := present(co, "prompt_token_ids"); ok {
		r.addPrompt(v, SourceEngineIDs, "choices[].prompt_token_ids")
	}
	if v, ok := present(co, "routed_experts"); ok {
		a.routed = v
	}
	if v, ok := present(co, "logprobs"); ok {
		r.readLogprobs(a, v)
	}
	if m, ok := asObj(co.get("message")); ok {
		r.readGymFields(a, m, "choices[].message")
	}
	if r.streamed && chunkHasText(co) {
		a.textChunks++
		if !hasIDs {
			a.textChunksNoIDs++
		}
	}
}

// readGymFields reads the token fields a NeMo Gym model server attaches to an answer item
// (prompt_token_ids, generation_token_ids, generation_log_probs); it reports whether the item
// carried generated ids.
func (r *reader) readGymFields(a *choiceAcc, o obj, where string) bool {
	v, ok := present(o, "generation_token_ids")
	if !ok {
		return false
	}
	ids, ok := asIDs(v)
	if !ok {
		r.malformed(where+".generation_token_ids", idsWant)
		return false
	}
	a.gym, a.hasGym = ids, true
	if p, ok := present(o, "prompt_token_ids"); ok {
		r.addPrompt(p, SourceEngineIDs, where+".prompt_token_ids")
	}
	if lv, ok := present(o, "generation_log_probs"); ok {
		var lps []float64
		if json.Unmarshal(lv, &lps) != nil {
			r.malformed(where+".generation_log_probs", "a list of numbers")
		} else {
			a.gymLogp, a.hasGymLogp = lps, true
		}
	}
	return true
}

// chunkHasText reports whether a stream chunk's choice carries generated text: delta content,
// reasoning or tool calls (Chat), or text (Completions).
func chunkHasText(co obj) bool {
	if s, ok := asString(co.get("text")); ok && s != "" {
		return true
	}
	d, ok := asObj(co.get("delta"))
	if !ok {
		return false
	}
	for _, k := range []string{"content", "reasoning_content", "reasoning"} {
		if s, ok := asString(d.get(k)); ok && s != "" {
			return true
		}
	}
	tc, ok := asArr(d.get("tool_calls"))
	return ok && len(tc) > 0
}

// readLogprobs reads a choice's logprobs in either documented shape: {content: [entry]} (Chat,
// and llama-server's Completions) or the legacy Completions {tokens, token_logprobs,
// top_logprobs}.
func (r *reader) readLogprobs(a *choiceAcc, v json.RawMessage) {
	lo, ok := asObj(v)
	if !ok {
		r.malformed("choices[].logprobs", "an object")
		return
	}
	if cv, ok := present(lo, "content"); ok {
		entries, ok := asArr(cv)
		if !ok {
			r.malformed("choices[].logprobs.content", "a list")
			return
		}
		a.hasLogp = true
		for _, ev := range entries {
			eo, ok := asObj(ev)
			if !ok {
				r.malformed("choices[].logprobs.content[]", "an object")
				continue
			}
			lp := LogProb{}
			lp.Token, _ = asString(eo.get("token"))
			lp.ID = r.entryID(eo, lp.Token, "choices[].logprobs.content[].id")
			lp.LogProb = r.entryLogProb(a, eo)
			if tv, ok := asArr(eo.get("top_logprobs")); ok {
				for _, t := range tv {
					to, ok := asObj(t)
					if !ok {
						continue
					}
					tl := TopLogProb{}
					tl.Token, _ = asString(to.get("token"))
					tl.ID = r.entryID(to, tl.Token, "choices[].logprobs.content[].top_logprobs[].id")
					if f, ok := asFloat(to.get("logprob")); ok {
						tl.LogProb = &f
					}
					lp.Top = append(lp.Top, tl)
				}
			}
			a.logprobs = append(a.logprobs, lp)
		}
		return
	}
	if tv, ok := present(lo, "tokens"); ok {
		elems, ok := asArr(tv)
		toks := make([]string, len(elems))
		for i, e := range elems {
			if toks[i], ok = asString(e); !ok {
				break
			}
		}
		if !ok {
			r.malformed("choices[].logprobs.tokens", "a list of strings")
			return
		}
		vals, _ := asArr(lo.get("token_logprobs"))
		tops, _ := asArr(lo.get("top_logprobs"))
		a.hasLogp = true
		for i, tok := range toks {
			lp := LogProb{Token: tok, ID: tokenIDString(tok)}
			if i < len(vals) {
				if f, ok := asFloat(vals[i]); ok {
					lp.LogProb = &f
				} else {
					a.nullLogp++
				}
			} else {
				a.nullLogp++
			}
			if i < len(tops) {
				lp.Top = orderedTop(tops[i])
			}
			a.logprobs = append(a.logprobs, lp)
		}
	}
}

// entryLogProb returns an entry's logprob; an entry with null, or with only llama-server's
// post-sampling prob, has none and is counted.
func (r *reader) entryLogProb(a *choiceAcc, eo obj) *float64 {
	v := eo.get("logprob")
	if f, ok := asFloat(v); ok {
		return &f
	}
	if v != nil && !jsonscan.IsNull(v) {
		r.malformed("choices[].logprobs.content[].logprob", "a number")
	}
	if _, ok := present(eo, "prob"); ok {
		a.probsOnly = true
	}
	a.nullLogp++
	return nil
}

// entryID returns the id of a logprob entry: its id member (llama-server), else the id its token
// names as "token_id:N" (vLLM's return_tokens_as_token_ids). An id member that is not an integer
// from 0 up is named (path) and gives no id.
func (r *reader) entryID(o obj, token, path string) *int64 {
	if v, ok := present(o, "id"); ok {
		if n, ok := asInt(v); ok && n >= 0 {
			return &n
		}
		r.malformed(path, "a token id (an integer from 0 up)")
		return nil
	}
	return tokenIDString(token)
}

// tokenIDString parses vLLM's "token_id:N" token, nil for any other text.
func tokenIDString(s string) *int64 {
	rest, ok := strings.CutPrefix(s, "token_id:")
	if !ok || rest == "" {
		return nil
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n < 0 {
		return nil
	}
	return &n
}

// orderedTop reads one legacy top_logprobs position, an object {token: logprob}, keeping the
// members in the order the engine wrote them.
func orderedTop(v json.RawMessage) []TopLogProb {
	var out []TopLogProb
	jsonscan.EachMember(v, func(k, val []byte) bool {
		key := string(jsonscan.KeyName(k))
		tl := TopLogProb{Token: key, ID: tokenIDString(key)}
		if f, ok := asFloat(val); ok {
			tl.LogProb = &f
		}
		out = append(out, tl)
		return true
	})
	return out
}

// readRequest takes the prompt ids the client itself sent: a Completions prompt given as ids (one
// list, or a batch of one), or SGLang's input_ids.
func (r *reader) readRequest(req []byte) {
	o, ok := parseObj(req)
	if !ok {
		return
	}
	if v, ok := present(o, "prompt"); ok {
		if ids, ok := asIDs(v); ok && len(ids) > 0 {
			r.prompt = append(r.prompt, idSet{SourceRequestIDs, "request prompt", ids})
		} else if lists, ok := asArr(v); ok && len(lists) == 1 {
			if ids, ok := asIDs(lists[0]); ok {
				r.prompt = append(r.prompt, idSet{SourceRequestIDs, "request prompt", ids})
			}
		}
	}
	if v, ok := present(o, "input_ids"); ok {
		if ids, ok := asIDs(v); ok {
			r.prompt = append(r.prompt, idSet{SourceRequestIDs, "request input_ids", ids})
		}
	}
}

// readTokenCapture takes the prompt ids the gateway fetched from the server's own template and
// tokenizer, or the error it got doing so, and why the gateway did not ask the engine when it
// deliberately did not.
func (r *reader) readTokenCapture(tc []byte) {
	o, ok := parseObj(tc)
	if !ok {
		return
	}
	if v, ok := present(o, "prompt_token_ids"); ok {
		if ids, ok := asIDs(v); ok {
			r.prompt = append(r.prompt, idSet{SourceServerRender, "token_capture.prompt_token_ids", ids})
		} else {
			r.malformed("token_capture.prompt_token_ids", idsWant)
		}
	}
	if s, ok := asString(o.get("prompt_token_error")); ok && s != "" {
		r.find(FindingServerRenderFailed, nil, "prompt ids from the server's template and tokenizer: %s", s)
	}
	if v, ok := present(o, "not_asked"); ok {
		switch s, _ := asString(v); NotAsked(s) {
		case NotAskedStreamWithTools:
			r.find(FindingNotAskedStreamWithTools, nil, "the gateway did not ask %s for logprobs: it refuses them on a "+
				"streamed request with tools, so the call has no generated ids", engineName(o))
		case NotAskedRequestEncoded:
			r.find(FindingNotAsked, nil, "the gateway did not ask %s for token ids: the client sent the request compressed, "+
				"which it forwards as sent (token_capture.not_asked %s)", engineName(o), v)
		default:
			r.find(FindingNotAsked, nil, "the gateway did not ask %s for token ids (token_capture.not_asked %s)", engineName(o), v)
		}
	}
}

// engineName is the engine a token_capture object names, "the engine" when it names none.
func engineName(tc obj) string {
	if s, ok := asString(tc.get("engine")); ok && s != "" {
		return s
	}
	return "the engine"
}

func (r *reader) addPrompt(v json.RawMessage, src Source, from string) {
	ids, ok := asIDs(v)
	if !ok {
		r.malformed(from, idsWant)
		return
	}
	// The same list again (one per choice, or repeated in a stream) is not another source. Lists
	// are found by hash, so a stream whose every chunk carries another list costs its length, not
	// its length times its chunks.
	if r.promptSeen == nil {
		r.promptSeen, r.seed = map[uint64][]int{}, maphash.MakeSeed()
	}
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(from)
	var buf [8]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint64(buf[:], uint64(id))
		h.Write(buf[:])
	}
	key := h.Sum64()
	for _, i := range r.promptSeen[key] {
		if p := r.prompt[i]; p.from == from && slices.Equal(p.ids, ids) {
			return
		}
	}
	r.promptSeen[key] = append(r.promptSeen[key], len(r.prompt))
	r.prompt = append(r.prompt, idSet{src, from, ids})
}

// finish picks each choice's ids and the prompt's, and makes the checks.
func (r *reader) finish() *Tokens {
	t := &Tokens{Source: SourceAbsent, PromptSource: SourceAbsent, Streamed: r.streamed,
		PromptTokens: r.usagePrompt, CompletionTokens: r.usageCompl}
	t.Findings = r.findings

	idx := make([]int, 0, len(r.choices))
	for i := range r.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	if len(idx) > 0 {
		t.Choices = make([]Choice, 0, len(idx))
	}
	for _, i := range idx {
		t.Choices = append(t.Choices, r.finishChoice(t, r.choices[i]))
	}
	if len(t.Choices) > 0 {
		t.Source = t.Choices[0].Source
	}
	r.finishPrompt(t)
	r.checkUsage(t)
	if t.Findings == nil {
		t.Findings = []Finding{}
	}
	return t
}

func (r *reader) finishChoice(t *Tokens, a *choiceAcc) Choice {
	ci := a.index
	at := &ci
	c := Choice{Index: a.index, Source: SourceAbsent, RoutedExperts: a.routed}
	var cands []idSet
	if a.hasEngine {
		cands = append(cands, idSet{SourceEngineIDs, "token_ids", a.engine})
	}
	if a.hasSglext {
		cands = append(cands, idSet{SourceEngineIDs, "sglext.output_ids", a.sglext})
	}
	if a.hasGym {
		cands = append(cands, idSet{SourceEngineIDs, "generation_token_ids", a.gym})
	}
	lps := a.logprobs
	if !a.hasLogp && a.hasGymLogp {
		for _, f := range a.gymLogp {
			lps = append(lps, LogProb{LogProb: &f})
		}
	}
	c.LogProbs = lps
	if a.hasLogp && len(lps) > 0 {
		withID, fromString := 0, 0
		for _, lp := range lps {
			if lp.ID != nil {
				withID++
				if tokenIDString(lp.Token) != nil {
					fromString++
				}
			}
		}
		switch {
		case withID == len(lps):
			ids := make([]int64, len(lps))
			for i, lp := range lps {
				ids[i] = *lp.ID
			}
			src := SourceLogprobEntryIDs
			if fromString == len(lps) {
				src = SourceLogprobTokenStrings
			}
			cands = append(cands, idSet{src, "logprobs", ids})
		case withID > 0:
			r.find(FindingLogprobIDsPartial, at, "%d of %d logprob entries name a token id; their ids are not used", withID, len(lps))
		}
	}
	if len(cands) > 0 {
		c.Source, c.TokenIDs = cands[0].src, cands[0].ids
		for _, o := range cands[1:] {
			if !slices.Equal(o.ids, c.TokenIDs) {
				r.find(FindingIDSourcesDisagree, at, "%s gives %d ids, %s gives %d ids, and they differ%s",
					cands[0].from, len(c.TokenIDs), o.from, len(o.ids), firstDiff(c.TokenIDs, o.ids))
			}
		}
	}
	switch {
	case c.TokenIDs == nil && (a.hasLogp || a.hasGymLogp) && len(lps) > 0:
		r.find(FindingLogprobsWithoutIDs, at, "%d logprob entries but no token ids", len(lps))
	case c.TokenIDs != nil && !a.hasLogp && !a.hasGymLogp:
		r.find(FindingNoLogprobs, at, "%d token ids but no logprobs", len(c.TokenIDs))
	case c.TokenIDs != nil && len(lps) != len(c.TokenIDs):
		r.find(FindingLogprobCountMismatch, at, "%d logprob entries for %d token ids", len(lps), len(c.TokenIDs))
	}
	if a.nullLogp > 0 {
		what := "null"
		if a.probsOnly {
			what = "null or a probability instead of a log probability"
		}
		r.find(FindingNullLogprob, at, "%d of %d logprob entries are %s", a.nullLogp, len(lps), what)
	}
	if r.streamed && a.hasEngine && a.textChunksNoIDs > 0 {
		r.find(FindingStreamChunkWithoutIDs, at, "%d of %d stream chunks with text carried no token_ids", a.textChunksNoIDs, a.textChunks)
	}
	return c
}

func (r *reader) finishPrompt(t *Tokens) {
	if len(r.prompt) == 0 {
		return
	}
	best := 0
	for i, p := range r.prompt {
		if rank(p.src) < rank(r.prompt[best].src) {
			best = i
		}
	}
	b := r.prompt[best]
	t.PromptSource, t.PromptTokenIDs = b.src, b.ids
	for i, p := range r.prompt {
		if i != best && !slices.Equal(p.ids, b.ids) {
			r.find(FindingPromptSourcesDisagree, nil, "%s gives %d ids, %s gives %d ids, and they differ%s",
				b.from, len(b.ids), p.from, len(p.ids), firstDiff(b.ids, p.ids))
		}
	}
	t.Findings = r.findings
}

func rank(s Source) int {
	switch s {
	case SourceEngineIDs:
		return 0
	case SourceRequestIDs:
		return 1
	default:
		return 2
	}
}

func (r *reader) checkUsage(t *Tokens) {
	if t.PromptTokens != nil && t.PromptTokenIDs != nil && int64(len(t.PromptTokenIDs)) != *t.PromptTokens {
		r.find(FindingPromptCountMismatch, nil, "%d prompt ids, usage.prompt_tokens is %d (%s)",
			len(t.PromptTokenIDs), *t.PromptTokens, t.PromptSource)
	}
	if t.CompletionTokens != nil && len(t.Choices) > 0 {
		var sum int64
		all := true
		for _, c := range t.Choices {
			if c.TokenIDs == nil {
				all = false
				break
			}
			sum += int64(len(c.TokenIDs))
		}
		if all && sum != *t.CompletionTokens {
			code := FindingCompletionCountMismatch
			if t.Streamed && sum < *t.CompletionTokens {
				code = FindingStreamTokensLost
			}
			r.find(code, nil, "%d generated ids (%s), usage.completion_tokens is %d", sum, t.Source, *t.CompletionTokens)
		}
	}
	t.Findings = r.findings
	if t.Findings == nil {
		t.Findings = []Finding{}
	}
}

// firstDiff describes where two id lists first differ.
func firstDiff(a, b []int64) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf(" first at position %d (%d vs %d)", i, a[i], b[i])
		}
	}
	return fmt.Sprintf(" in length (%d vs %d)", len(a), len(b))
}

// present returns a member's value when the member is there and not null.
func present(o obj, key string) (json.RawMessage, bool) {
	v := o.get(key)
	if jsonscan.IsNull(v) {
		return nil, false
	}
	return v, true
}

// parseObj checks that v is one JSON object under the strict rules of the capture store
// (jsonscan.Validate) and returns it trimmed; only text that passed may be walked.
func parseObj(v []byte) (obj, bool) {
	t := jsonscan.TrimWS(v)
	if !jsonscan.IsObject(t) || jsonscan.Validate(t) != nil {
		return nil, false
	}
	return obj(t), true
}

// asObj returns a value inside a checked text as an object.
func asObj(v []byte) (obj, bool) {
	if !jsonscan.IsObject(v) {
		return nil, false
	}
	return obj(v), true
}

// asArr returns the elements of an array value inside a checked text.
func asArr(v json.RawMessage) ([]json.RawMessage, bool) {
	if !jsonscan.IsArray(v) {
		return nil, false
	}
	a := []json.RawMessage{}
	jsonscan.EachElement(v, func(e []byte) bool {
		a = append(a, e)
		return true
	})
	return a, true
}

func asString(v json.RawMessage) (string, bool) {
	if !jsonscan.IsString(v) {
		return "", false
	}
	if inner := v[1 : len(v)-1]; !jsonscan.HasBackslash(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// asInt reads an integer literal (no fraction or exponent).
func asInt(v json.RawMessage) (int64, bool) {
	if !jsonscan.IsInt(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

func asFloat(v json.RawMessage) (float64, bool) {
	if !jsonscan.IsNumber(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

// idsWant is what a malformed id list should have been.
const idsWant = "a list of token ids (integers from 0 up)"

// asIDs reads a list of token ids: integers from 0 up, within int64 (a negative id is no token,
// and a trainer indexing by it would read another row); an empty list is a list.
func asIDs(v json.RawMessage) ([]int64, bool) {
	if !jsonscan.IsArray(v) {
		return nil, false
	}
	ids := []int64{}
	ok := true
	jsonscan.EachElement(v, func(e []byte) bool {
		n, isInt := asInt(e)
		if ok = isInt && n >= 0; ok {
			ids = append(ids, n)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	return ids, true
}
