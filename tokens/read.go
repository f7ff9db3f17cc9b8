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
	r := &reader{choices: map[int]*choiceAcc{}, checked: c.Checked, tree: c.Index}
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

// fields reads the members of o named in keys in one walk over o, into vals by the position of
// their name in keys: the raw value of the last member of each name, as get gives it, nil when
// there is none. A reader that wants several members walks o once this way instead of once per
// name: the members it skips (an answer's logprobs, its prompt ids) are most of its bytes. With
// an index, the walk steps from member to member without reading what lies between.
func (r *reader) fields(o obj, keys []string, vals []json.RawMessage) {
	r.tree.EachMember(o, func(k, v []byte) bool {
		for i, key := range keys {
			if jsonscan.KeyIs(k, key) {
				vals[i] = v
				break
			}
		}
		return true
	})
}

// reader gathers what the response objects (one, or one per SSE event) say, then checks it.
type reader struct {
	streamed bool
	checked  bool           // the call's Request, Response and TokenCapture were checked by its caller
	tree     *jsonscan.Tree // the index of the checked text Response aliases, nil (walk the text) without one
	floats   []float64      // where float gives its pointers from
	choices  map[int]*choiceAcc
	// answerIdx holds the choice indexes read so far of a whole (not streamed) answer's choices.
	answerIdx map[int]bool

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

// float returns a pointer to a copy of f. The copies are kept in blocks (16 values, then twice
// the last block, up to 512), one allocation for many log probabilities instead of one each.
func (r *reader) float(f float64) *float64 {
	if len(r.floats) == cap(r.floats) {
		r.floats = make([]float64, 0, min(max(16, 2*cap(r.floats)), 512))
	}
	r.floats = append(r.floats, f)
	return &r.floats[len(r.floats)-1]
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
		o, ok := r.member(c.Response)
		if !ok {
			r.find(FindingUnreadableResponse, nil, "response is not a JSON object")
			return
		}
		r.readObject(o)
	}
}

// The members of a response object that readObject reads, and of its usage.
var (
	objectKeys = []string{"prompt_token_ids", "sglext", "usage", "choices", "output"}
	usageKeys  = []string{"prompt_tokens", "completion_tokens"}
)

// readObject folds one response object (a whole response or one stream chunk) in.
func (r *reader) readObject(o obj) {
	var f [5]json.RawMessage
	r.fields(o, objectKeys, f[:])
	if v, ok := nonNull(f[0]); ok {
		r.addPrompt(v, SourceEngineIDs, "prompt_token_ids")
	}
	if v, ok := nonNull(f[1]); ok {
		r.readSglext(v)
	}
	if v, ok := nonNull(f[2]); ok {
		if u, ok := asObj(v); ok {
			var uf [2]json.RawMessage
			r.fields(u, usageKeys, uf[:])
			if n, ok := asInt(uf[0]); ok {
				r.usagePrompt = &n
			}
			if n, ok := asInt(uf[1]); ok {
				r.usageCompl = &n
			}
		}
	}
	if v, ok := nonNull(f[3]); ok {
		if !jsonscan.IsArray(v) {
			r.malformed("choices", "a list")
			return
		}
		if !r.streamed {
			r.answerIdx = map[int]bool{} // a whole answer's choice indexes: each names one choice
		}
		pos := 0
		r.tree.EachElement(v, func(cv []byte) bool {
			if co, ok := asObj(cv); ok {
				r.readChoice(pos, co)
			}
			pos++
			return true
		})
		r.answerIdx = nil
	}
	if v, ok := nonNull(f[4]); ok {
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

var sglextKeys = []string{"routed_experts", "input_ids", "output_ids"}

// readSglext reads SGLang's response-level extension: input_ids (the prompt) and output_ids (one
// id list per choice, by position).
func (r *reader) readSglext(v json.RawMessage) {
	s, ok := asObj(v)
	if !ok {
		return
	}
	var f [3]json.RawMessage
	r.fields(s, sglextKeys, f[:])
	if re, ok := nonNull(f[0]); ok {
		r.choice(0).routed = re
	}
	if in, ok := nonNull(f[1]); ok {
		r.addPrompt(in, SourceEngineIDs, "sglext.input_ids")
	}
	if out, ok := nonNull(f[2]); ok {
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

// The members of a choice that readChoice reads.
var choiceKeys = []string{"index", "token_ids", "prompt_token_ids", "routed_experts", "logprobs", "message", "text", "delta"}

// readChoice folds in the choice co, at position pos of its object's choices.
func (r *reader) readChoice(pos int, co obj) {
	var f [8]json.RawMessage
	r.fields(co, choiceKeys, f[:])
	idx := pos
	if n, ok := asInt(f[0]); ok {
		idx = int(n)
	} else if r.streamed {
		idx = 0 // a chunk's choice without an index is choice 0
	}
	if r.answerIdx != nil {
		if r.answerIdx[idx] {
			// Only a stream's chunks continue a choice; joining two answers' ids would make a
			// sample no engine produced.
			r.malformed("choices[].index", "unique in the answer (a later choice with the same index is not read)")
			return
		}
		r.answerIdx[idx] = true
	}
	a := r.choice(idx)
	_, hasIDs := nonNull(f[1])
	if v, ok := nonNull(f[1]); ok {
		ids, ok := asIDs(v)
		if !ok {
			r.malformed("choices[].token_ids", idsWant)
			hasIDs = false
		} else {
			a.engine = append(a.engine, ids...)
			a.hasEngine = true
		}
	}
	if v, ok := nonNull(f[2]); ok {
		r.addPrompt(v, SourceEngineIDs, "choices[].prompt_token_ids")
	}
	if v, ok := nonNull(f[3]); ok {
		a.routed = v
	}
	if v, ok := nonNull(f[4]); ok {
		r.readLogprobs(a, v)
	}
	if m, ok := asObj(f[5]); ok {
		r.readGymFields(a, m, "choices[].message")
	}
	if r.streamed && r.chunkHasText(f[6], f[7]) {
		a.textChunks++
		if !hasIDs {
			a.textChunksNoIDs++
		}
	}
}

var gymKeys = []string{"generation_token_ids", "prompt_token_ids", "generation_log_probs"}

// readGymFields reads the token fields a NeMo Gym model server attaches to an answer item
// (prompt_token_ids, generation_token_ids, generation_log_probs); it reports whether the item
// carried generated ids.
func (r *reader) readGymFields(a *choiceAcc, o obj, where string) bool {
	var f [3]json.RawMessage
	r.fields(o, gymKeys, f[:])
	v, ok := nonNull(f[0])
	if !ok {
		return false
	}
	ids, ok := asIDs(v)
	if !ok {
		r.malformed(where+".generation_token_ids", idsWant)
		return false
	}
	a.gym, a.hasGym = ids, true
	if p, ok := nonNull(f[1]); ok {
		r.addPrompt(p, SourceEngineIDs, where+".prompt_token_ids")
	}
	if lv, ok := nonNull(f[2]); ok {
		var lps []float64
		if json.Unmarshal(lv, &lps) != nil {
			r.malformed(where+".generation_log_probs", "a list of numbers")
		} else {
			a.gymLogp, a.hasGymLogp = lps, true
		}
	}
	return true
}

var deltaKeys = []string{"content", "reasoning_content", "reasoning", "tool_calls"}

// chunkHasText reports whether a stream chunk's choice, whose text and delta members are given,
// carries generated text: delta content, reasoning or tool calls (Chat), or text (Completions).
func (r *reader) chunkHasText(text, delta json.RawMessage) bool {
	if s, ok := asString(text); ok && s != "" {
		return true
	}
	d, ok := asObj(delta)
	if !ok {
		return false
	}
	var f [4]json.RawMessage
	r.fields(d, deltaKeys, f[:])
	for _, v := range f[:3] {
		if s, ok := asString(v); ok && s != "" {
			return true
		}
	}
	tc, ok := asArr(f[3])
	return ok && len(tc) > 0
}

// readLogprobs reads a choice's logprobs in either documented shape: {content: [entry]} (Chat,
// and llama-server's Completions) or the legacy Completions {tokens, token_logprobs,
// top_logprobs}.
// The members readLogprobs reads: of the logprobs object, of a content entry, of a top entry.
var (
	logprobsKeys = []string{"content", "tokens", "token_logprobs", "top_logprobs"}
	entryKeys    = []string{"token", "id", "logprob", "prob", "top_logprobs"}
	topKeys      = []string{"token", "id", "logprob"}
)

func (r *reader) readLogprobs(a *choiceAcc, v json.RawMessage) {
	lo, ok := asObj(v)
	if !ok {
		r.malformed("choices[].logprobs", "an object")
		return
	}
	var f [4]json.RawMessage
	r.fields(lo, logprobsKeys, f[:])
	if cv, ok := nonNull(f[0]); ok {
		if !jsonscan.IsArray(cv) {
			r.malformed("choices[].logprobs.content", "a list")
			return
		}
		a.hasLogp = true
		r.tree.EachElement(cv, func(ev []byte) bool {
			eo, ok := asObj(ev)
			if !ok {
				r.malformed("choices[].logprobs.content[]", "an object")
				return true
			}
			var ef [5]json.RawMessage
			r.fields(eo, entryKeys, ef[:])
			lp := LogProb{}
			lp.Token, _ = asString(ef[0])
			lp.ID = r.entryID(ef[1], lp.Token, "choices[].logprobs.content[].id")
			lp.LogProb = r.entryLogProb(a, ef[2], ef[3])
			if jsonscan.IsArray(ef[4]) {
				r.tree.EachElement(ef[4], func(t []byte) bool {
					to, ok := asObj(t)
					if !ok {
						return true
					}
					var tf [3]json.RawMessage
					r.fields(to, topKeys, tf[:])
					tl := TopLogProb{}
					tl.Token, _ = asString(tf[0])
					tl.ID = r.entryID(tf[1], tl.Token, "choices[].logprobs.content[].top_logprobs[].id")
					if f, ok := asFloat(tf[2]); ok {
						tl.LogProb = r.float(f)
					}
					lp.Top = append(lp.Top, tl)
					return true
				})
			}
			a.logprobs = append(a.logprobs, lp)
			return true
		})
		return
	}
	if tv, ok := nonNull(f[1]); ok {
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
		vals, _ := asArr(f[2])
		tops, _ := asArr(f[3])
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

// entryLogProb returns an entry's logprob from its logprob and prob members; an entry with null,
// or with only llama-server's post-sampling prob, has none and is counted.
func (r *reader) entryLogProb(a *choiceAcc, logprob, prob json.RawMessage) *float64 {
	if f, ok := asFloat(logprob); ok {
		return r.float(f)
	}
	if _, ok := nonNull(logprob); ok {
		r.malformed("choices[].logprobs.content[].logprob", "a number")
	}
	if _, ok := nonNull(prob); ok {
		a.probsOnly = true
	}
	a.nullLogp++
	return nil
}

// entryID returns the id of a logprob entry: its id member (llama-server), else the id its token
// names as "token_id:N" (vLLM's return_tokens_as_token_ids). An id member that is not an integer
// from 0 up is named (path) and gives no id.
func (r *reader) entryID(id json.RawMessage, token, path string) *int64 {
	if _, ok := nonNull(id); ok {
		n, ok := asInt(id)
		if !ok || n < 0 {
			r.malformed(path, "a token id (an integer from 0 up)")
			return nil
		}
		p := new(int64) // only here: a pointer to n would move n to the heap on every call
		*p = n
		return p
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

var requestKeys = []string{"prompt", "input_ids"}

// readRequest takes the prompt ids the client itself sent: a Completions prompt given as ids (one
// list, or a batch of one), or SGLang's input_ids.
func (r *reader) readRequest(req []byte) {
	o, ok := r.member(req)
	if !ok {
		return
	}
	var f [2]json.RawMessage
	r.fields(o, requestKeys, f[:])
	if v, ok := nonNull(f[0]); ok {
		if ids, ok := asIDs(v); ok && len(ids) > 0 {
			r.prompt = append(r.prompt, idSet{SourceRequestIDs, "request prompt", ids})
		} else if lists, ok := asArr(v); ok && len(lists) == 1 {
			if ids, ok := asIDs(lists[0]); ok {
				r.prompt = append(r.prompt, idSet{SourceRequestIDs, "request prompt", ids})
			}
		}
	}
	if v, ok := nonNull(f[1]); ok {
		if ids, ok := asIDs(v); ok {
			r.prompt = append(r.prompt, idSet{SourceRequestIDs, "request input_ids", ids})
		}
	}
}

// readTokenCapture takes the prompt ids the gateway fetched from the server's own template and
// tokenizer, or the error it got doing so, and why the gateway did not ask the engine when it
// deliberately did not.
func (r *reader) readTokenCapture(tc []byte) {
	o, ok := r.member(tc)
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
func present(o obj, key string) (json.RawMessage, bool) { return nonNull(o.get(key)) }

// nonNull returns a member's raw value (as get or fields give it) when the member is there and
// not null.
func nonNull(v json.RawMessage) (json.RawMessage, bool) {
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

// member is parseObj for the call's Request, Response and TokenCapture, which are not checked
// again when the caller says it checked them (Call.Checked).
func (r *reader) member(v []byte) (obj, bool) {
	if !r.checked {
		return parseObj(v)
	}
	t := jsonscan.TrimWS(v)
	if !jsonscan.IsObject(t) {
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

// asInt reads an integer literal (no fraction or exponent) that fits in an int64.
func asInt(v json.RawMessage) (int64, bool) { return jsonscan.Int(v) }

// asFloat reads a number whose value as a double is finite.
func asFloat(v json.RawMessage) (float64, bool) { return jsonscan.Float(v) }

// idsWant is what a malformed id list should have been.
const idsWant = "a list of token ids (integers from 0 up)"

// asIDs reads a list of token ids: integers from 0 up, within int64 (a negative id is no token,
// and a trainer indexing by it would read another row); an empty list is a list.
func asIDs(v json.RawMessage) ([]int64, bool) {
	if !jsonscan.IsArray(v) {
		return nil, false
	}
	if ids, ok := plainIDs(v); ok {
		return ids, true
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

// plainIDs is asIDs for the common text, the array arr of integers of 1 to 18 digits (which
// cannot overflow), not negative, separated by commas and JSON whitespace: read in one pass,
// into a list sized by its commas. ok is false for any other text (an element that is not such an
// integer, a stray comma), which asIDs then reads element by element; for the text it accepts,
// that reading gives the same ids.
func plainIDs(arr []byte) (ids []int64, ok bool) {
	i := jsonscan.SkipWS(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return []int64{}, true
	}
	ids = make([]int64, 0, bytes.Count(arr, []byte{','})+1)
	for i < len(arr) {
		neg := arr[i] == '-'
		if neg {
			i++
		}
		start := i
		var n int64
		for i < len(arr) && arr[i] >= '0' && arr[i] <= '9' {
			n = n*10 + int64(arr[i]-'0')
			i++
		}
		if i == start || i-start > 18 {
			return nil, false
		}
		if neg {
			return nil, false // no token id is negative: asIDs names the list
		}
		ids = append(ids, n)
		i = jsonscan.SkipWS(arr, i)
		if i >= len(arr) {
			return nil, false
		}
		switch arr[i] {
		case ']':
			return ids, true
		case ',':
			i = jsonscan.SkipWS(arr, i+1)
		default:
			return nil, false
		}
	}
	return nil, false
}
