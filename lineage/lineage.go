package lineage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/modelcalls/modelcalls/dialect"
)

// Relation is how a call relates to its parent.
type Relation string

// The relations (package doc: Relations).
const (
	RelationRoot       Relation = "root"
	RelationExtends    Relation = "extends"
	RelationRetry      Relation = "retry"
	RelationResample   Relation = "resample"
	RelationFork       Relation = "fork"
	RelationCompaction Relation = "compaction"
)

// Evidence is how a call's parent was found, strongest first.
type Evidence string

// The kinds of evidence.
const (
	// EvidenceDeclared: the capture line carries a parent or logical request id the client declared
	// in a request header.
	EvidenceDeclared Evidence = "declared"
	// EvidencePreviousResponse: the request's previous_response_id (Responses) names the parent's
	// response id.
	EvidencePreviousResponse Evidence = "previous_response_id"
	// EvidenceMessages: the request's messages, compared with earlier calls' messages and answers.
	EvidenceMessages Evidence = "messages"
	// EvidenceTokens: the parent's prompt and generated ids are a prefix of the call's prompt ids
	// (or equal to them, for a retry or resample).
	EvidenceTokens Evidence = "token_prefix"
	// EvidenceNone: a root.
	EvidenceNone Evidence = "none"
)

// Author is who wrote a message of a call's context.
type Author string

// The authors.
const (
	// AuthorModel: an assistant turn equal to what an earlier call of the rollout answered.
	AuthorModel Author = "model"
	// AuthorClient: everything else: system and user messages, tool results, and assistant turns
	// the client wrote, edited or injected.
	AuthorClient Author = "client"
)

// Call is the evidence lineage reads from one captured call. Only ID and Index are required.
type Call struct {
	ID    string // model_call_id
	Index int    // call_index: capture index (append order)
	// Dialect is "chat", "responses", "messages" (or another dialect name); a chat response's
	// choices are told apart by it.
	Dialect string
	Model   string
	// Completed is true when the call ended with an answer: a 2xx status, no error category and a
	// response object.
	Completed    bool
	FinishReason string
	TokensIn     *int64 // prompt tokens as reported by the provider
	TokensOut    *int64 // completion tokens as reported
	Request      json.RawMessage
	Response     json.RawMessage
	ResponseID   string // the response's id ("" when none)
	// LogicalRequestID is the logical request id the client declared (NeMo Gym's
	// x-nemo-gym-logical-request-id): calls sharing one are attempts at the same request.
	LogicalRequestID string
	// DeclaredParentID is the model_call_id of the parent the client declared.
	DeclaredParentID string
	// Tokens are the call's token ids, nil when it carries none.
	Tokens *TokenIDs
}

// TokenIDs are the token ids of one call.
type TokenIDs struct {
	Prompt    []int64   // the prompt's ids, nil when unknown
	Generated []int64   // the ids generated for the first choice, nil when unknown
	LogProbs  []float64 // one log probability per generated id, nil when unknown
}

// Lineage is the derived lineage of one rollout.
type Lineage struct {
	// Calls has one node per call, in the order the calls were given (capture order).
	Calls []Node `json:"calls"`
	// MainChain holds the model_call_ids of the main chain, first call first; empty when no call
	// completed.
	MainChain []string `json:"main_chain"`
	Summary   Summary  `json:"summary"`
}

// Node is the lineage of one call.
type Node struct {
	CallID    string `json:"model_call_id"`
	CallIndex int    `json:"call_index"`
	// Completed is the call's Call.Completed: it ended with an answer.
	Completed bool `json:"completed"`
	// ParentCallID is the parent's model_call_id, nil for a root.
	ParentCallID *string  `json:"parent_call_id"`
	Relation     Relation `json:"relation"`
	Evidence     Evidence `json:"evidence"`
	// AnswerKept is true when the call's context holds the parent's context and answer exactly (an
	// extends edge, or a fork that branches after the answer); such edges form chains.
	AnswerKept bool `json:"answer_kept"`
	// NewMessages is the number of messages of the request past what the parent already had (its
	// context and answer; for a retry or resample 0; for a root or compaction all of them).
	NewMessages int `json:"new_messages"`
	// Messages has one entry per message of the request's context, in order.
	Messages  []MessageAuthor `json:"messages"`
	MainChain bool            `json:"main_chain"`
	// Audit is the token-prefix audit of the edge to the parent, nil when the edge does not chain or
	// either side lacks token ids.
	Audit *Audit `json:"token_audit,omitempty"`
	// DeclaredParentIgnored is the parent id the client declared when it names no earlier call of
	// the rollout (the call itself, a later call, or an id the rollout does not have): that
	// declaration was not used, and the call was placed by the other evidence.
	DeclaredParentIgnored string `json:"declared_parent_ignored,omitempty"`
}

// MessageAuthor is the author of one context message.
type MessageAuthor struct {
	Role   string `json:"role"`
	Author Author `json:"author"`
	// FromCallID names the call whose answer a model-written message is, "" for a client message:
	// where the call keeps its parent's context and answer, the call that gave the turn at that
	// place of the chain; elsewhere the latest earlier call that answered it.
	FromCallID string `json:"from_call_id,omitempty"`
}

// Summary counts a rollout's lineage.
type Summary struct {
	Calls           int `json:"calls"`
	Roots           int `json:"roots"`
	Extends         int `json:"extends"`
	Forks           int `json:"forks"`
	Retries         int `json:"retries"`
	Resamples       int `json:"resamples"`
	Compactions     int `json:"compactions"`
	MainChainLength int `json:"main_chain_length"`
	OffMainChain    int `json:"off_main_chain"`
	// AuditedEdges counts the edges with a token audit, AuditFailures those whose prefix differs.
	AuditedEdges  int `json:"audited_edges"`
	AuditFailures int `json:"audit_failures"`
}

// Message is one message of a conversation as lineage compares it.
type Message struct {
	Role  string
	Parts []Part
}

// Part is one piece of a message: Kind is "text", "reasoning", "tool_call", "tool_result",
// "image" or "other".
type Part struct {
	Kind      string
	Text      string
	Name      string
	CallID    string
	Arguments string // tool call arguments, JSON text
}

// segment is one unit of a context compared as a whole: a message that is not the assistant's,
// or a run of assistant messages (a turn).
type segment struct {
	key       string
	assistant bool
	// first and end delimit the request messages it covers; first < 0 for segments the call
	// inherited from a previous_response_id parent.
	first, end int
}

// call is one call as Derive works on it.
type call struct {
	in       *Call
	msgs     []Message // the request's context messages
	ctx      []segment // the effective context
	answers  []string  // canonical keys of the answers (one per chat choice; one otherwise)
	tools    string    // the offered tool names, joined
	prevResp string    // previous_response_id of the request
	summary  []string  // answer texts long enough to be recognised as a summary
	node     *Node
	keptBy   bool      // some later call continued this call's answer
	from     []int     // per segment of ctx: the index of the call whose answer it is, -1 for the client's
	own      []segment // segments of the request's own messages (ctx without an inherited history)
	inherit  *call     // the call whose path starts ctx (previous_response_id), nil when none
	inPlace  bool      // ctx, prefix and from extend inherit's arrays in place
	grown    bool      // a later call inherited this call's path
	// prefix[k] is the hash of ctx's first k segments' keys (k = 0..len(ctx)); pathHash the hash
	// of the path (ctx, then the first answer), valid when the call has an answer.
	prefix   []uint64
	pathHash uint64
}

// index finds earlier calls by the hash of their context or path, so that matching a call costs
// the length of its own context, not the contexts of all calls before it. Each list holds
// positions in capture order; a hash only narrows the search, the segments are compared.
type index struct {
	seed   maphash.Seed
	byCtx  map[uint64][]int
	byPath map[uint64][]int
	byPrev map[string][]int // calls by their request's previous_response_id
}

// extend returns the hash of a list of segments whose first part hashes to h, followed by key.
func (x *index) extend(h uint64, key string) uint64 {
	var m maphash.Hash
	m.SetSeed(x.seed)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], h)
	m.Write(b[:])
	m.WriteString(key)
	return m.Sum64()
}

// hash computes c's prefix hashes past those it inherited, and its path hash.
func (x *index) hash(c *call) {
	if c.prefix == nil {
		c.prefix = make([]uint64, 1, len(c.ctx)+1)
	}
	for k := len(c.prefix) - 1; k < len(c.ctx); k++ {
		c.prefix = append(c.prefix, x.extend(c.prefix[k], c.ctx[k].key))
	}
	if len(c.answers) > 0 {
		c.pathHash = x.extend(c.prefix[len(c.ctx)], c.answers[0])
	}
}

// add makes the call at position i findable by later calls.
func (x *index) add(c *call, i int) {
	h := c.prefix[len(c.ctx)]
	x.byCtx[h] = append(x.byCtx[h], i)
	if len(c.answers) > 0 {
		x.byPath[c.pathHash] = append(x.byPath[c.pathHash], i)
	}
	if c.prevResp != "" {
		x.byPrev[c.prevResp] = append(x.byPrev[c.prevResp], i)
	}
}

// pathIsPrefix reports whether e's path (its context, then its first answer) is a prefix of ctx.
func pathIsPrefix(e *call, ctx []segment) bool {
	return len(e.answers) > 0 && len(e.ctx) < len(ctx) && isPrefix(e.ctx, ctx) && ctx[len(e.ctx)].key == e.answers[0]
}

// shareContexts lets a call that continues a previous response extend that call's context, prefix
// hashes and authors in their arrays when no other call has (a Responses chain then costs its
// input, not the square of its length); tests turn it off to check the copies give the same.
var shareContexts = true

// inherit starts c's context with p's path (p's context, then its first answer), for a call
// that names p's response as its previous_response_id: the segments (as no message of c's
// request: first and end -1), their prefix hashes and their authors. When p's arrays are not yet
// extended by another call, c extends them in place (a chain shares one array); else it copies.
// An earlier call's segment bounds are read only while it is placed, so marking p's own segments
// as inherited in place is safe.
func inherit(c, p *call) {
	c.inherit, c.inPlace = p, shareContexts && !p.grown
	p.grown = true
	ctx, prefix := p.ctx, p.prefix
	if !c.inPlace {
		ctx, prefix = slices.Clone(ctx), slices.Clone(prefix)
	}
	for k := max(len(ctx)-len(p.own), 0); k < len(ctx); k++ {
		ctx[k].first, ctx[k].end = -1, -1
	}
	c.ctx = append(ctx, segment{key: p.answers[0], assistant: true, first: -1, end: -1})
	c.prefix = prefix
}

// path is the call's context followed by its first answer; nil when it has no answer.
func (c *call) path() []segment {
	if len(c.answers) == 0 {
		return nil
	}
	p := make([]segment, len(c.ctx), len(c.ctx)+1)
	copy(p, c.ctx)
	return append(p, segment{key: c.answers[0], assistant: true, first: -1, end: -1})
}

// minSummary is the shortest answer line (in bytes, white space trimmed) lineage recognises when it
// is pasted into a later context (a compaction summary); shorter lines ("OK", "Done.") recur by
// chance.
const minSummary = 64

// Derive returns the lineage of one rollout's calls, given in capture order.
func Derive(calls []Call) *Lineage {
	l := &Lineage{Calls: make([]Node, len(calls)), MainChain: []string{}}
	cs := make([]*call, len(calls))
	byID := map[string]int{}
	byResponse := map[string]int{}
	answered := map[string]int{} // answer key -> latest call that answered it
	x := &index{seed: maphash.MakeSeed(), byCtx: map[uint64][]int{}, byPath: map[uint64][]int{}, byPrev: map[string][]int{}}
	for i := range calls {
		c := &call{in: &calls[i], node: &l.Calls[i]}
		cs[i] = c
		c.node.CallID, c.node.CallIndex, c.node.Completed = calls[i].ID, calls[i].Index, calls[i].Completed
		c.node.Messages = []MessageAuthor{}
		if len(calls[i].Request) > 0 {
			var tools []string
			c.msgs, tools = parseRequest(calls[i].Request)
			c.tools = strings.Join(tools, "\x00")
			c.prevResp = previousResponseID(calls[i].Request)
		}
		if calls[i].Completed && len(calls[i].Response) > 0 {
			c.answers, c.summary = answerKeys(calls[i].Dialect, parseResponse(calls[i].Response))
		}
		own := segments(c.msgs)
		c.own = own
		if p, ok := byResponse[c.prevResp]; ok && c.prevResp != "" && len(cs[p].answers) > 0 {
			inherit(c, cs[p])
			c.ctx = append(c.ctx, own...)
		}
		if c.ctx == nil {
			c.ctx = own
		}
		x.hash(c)
		place(c, cs[:i], byID, byResponse, x)
		authors(c, cs, byID, answered)
		x.add(c, i)

		byID[calls[i].ID] = i
		if id := calls[i].ResponseID; id != "" {
			byResponse[id] = i
		}
		for _, a := range c.answers {
			answered[a] = i
		}
	}
	for _, c := range cs {
		if c.node.ParentCallID != nil && c.node.AnswerKept && c.in.Tokens != nil {
			p := cs[byID[*c.node.ParentCallID]]
			if p.in.Tokens != nil && p.in.Tokens.Prompt != nil && p.in.Tokens.Generated != nil && c.in.Tokens.Prompt != nil {
				a := AuditPrefix(p.in.Tokens.Prompt, p.in.Tokens.Generated, c.in.Tokens.Prompt)
				c.node.Audit = &a
			}
		}
	}
	mainChain(l, cs, byID)
	summarize(l)
	return l
}

// place finds c's parent among the earlier calls and sets its relation, evidence and new-message
// count.
func place(c *call, earlier []*call, byID, byResponse map[string]int, x *index) {
	n := c.node
	n.Relation, n.Evidence, n.NewMessages = RelationRoot, EvidenceNone, len(c.msgs)
	set := func(p *call, rel Relation, ev Evidence, kept bool, covered int) {
		id := p.in.ID
		n.ParentCallID, n.Relation, n.Evidence, n.AnswerKept = &id, rel, ev, kept
		n.NewMessages = len(c.msgs) - covered
		if kept {
			if p.keptBy && rel == RelationExtends {
				n.Relation = RelationFork
			}
			p.keptBy = true
		}
	}
	// Declared: a parent id, or a logical request id shared with an earlier call.
	if id := c.in.DeclaredParentID; id != "" {
		if i, ok := byID[id]; ok {
			rel, kept, covered := compare(c, earlier[i])
			set(earlier[i], rel, EvidenceDeclared, kept, covered)
			return
		}
		n.DeclaredParentIgnored = id
	}
	if lr := c.in.LogicalRequestID; lr != "" {
		for i := len(earlier) - 1; i >= 0; i-- {
			if earlier[i].in.LogicalRequestID == lr {
				set(earlier[i], repeat(earlier[i]), EvidenceDeclared, false, len(c.msgs))
				return
			}
		}
	}
	// previous_response_id: the parent holds the context server-side.
	if c.prevResp != "" {
		if i, ok := byResponse[c.prevResp]; ok {
			// Another call on the same response with the same new input is repeated by this one.
			same := x.byPrev[c.prevResp]
			for j := len(same) - 1; j >= 0 && same[j] > i; j-- {
				if k := same[j]; sameKeys(earlier[k].own, c.own) && earlier[k].tools == c.tools {
					set(earlier[k], repeat(earlier[k]), EvidencePreviousResponse, false, len(c.msgs))
					return
				}
			}
			set(earlier[i], RelationExtends, EvidencePreviousResponse, true, 0)
			return
		}
	}
	if len(c.ctx) > 0 {
		if p, rel, kept, covered := byMessages(c, earlier, x); p != nil {
			// A fork from a bare context that also holds the summary a later call wrote is a
			// compaction that kept the old history's first messages (Codex keeps the user's).
			if rel == RelationFork && !kept {
				if s := bySummary(c, earlier[slices.Index(earlier, p)+1:]); s != nil {
					set(s, RelationCompaction, EvidenceMessages, false, 0)
					return
				}
			}
			set(p, rel, EvidenceMessages, kept, covered)
			return
		}
	}
	if p, rel, kept := byTokens(c, earlier); p != nil {
		covered := 0
		if !kept {
			covered = len(c.msgs)
		}
		set(p, rel, EvidenceTokens, kept, covered)
		return
	}
	if p := bySummary(c, earlier); p != nil {
		set(p, RelationCompaction, EvidenceMessages, false, 0)
	}
}

// repeat is the relation of a call asking what p asked again: retry when p did not complete,
// resample when it did.
func repeat(p *call) Relation {
	if p.in.Completed {
		return RelationResample
	}
	return RelationRetry
}

// byMessages finds the parent by message matching: the earlier call with the same context (a
// repeat), else the one whose context and answer is the longest prefix of c's context (extends),
// else the one whose context alone is (fork: its answer not kept). Ties go to the later call, and
// between a path and a bare context of the same length, to the path (its answer kept). The
// candidates are found through x by the hash of each prefix of c's context.
func byMessages(c *call, earlier []*call, x *index) (p *call, rel Relation, kept bool, covered int) {
	n := len(c.ctx)
	same := x.byCtx[c.prefix[n]]
	for j := len(same) - 1; j >= 0; j-- {
		if e := earlier[same[j]]; e.in.Request != nil && e.tools == c.tools && sameKeys(e.ctx, c.ctx) {
			return e, repeat(e), false, len(c.msgs)
		}
	}
	// The longest earlier path that is a prefix of the context: a path of k segments ends at k.
	pathAt, pathLen := -1, 0
	for k := n; k >= 1 && pathAt < 0; k-- {
		list := x.byPath[c.prefix[k]]
		for j := len(list) - 1; j >= 0; j-- {
			if e := earlier[list[j]]; len(e.ctx)+1 == k && pathIsPrefix(e, c.ctx) {
				pathAt, pathLen = list[j], k
				break
			}
		}
	}
	// The longest earlier context shorter than c's that is a prefix of it, if longer than the path.
	ctxAt, ctxLen := -1, 0
	for k := n - 1; k > pathLen && ctxAt < 0; k-- {
		list := x.byCtx[c.prefix[k]]
		for j := len(list) - 1; j >= 0; j-- {
			if e := earlier[list[j]]; len(e.ctx) == k && isPrefix(e.ctx, c.ctx) {
				ctxAt, ctxLen = list[j], k
				break
			}
		}
	}
	switch {
	case ctxAt >= 0:
		return earlier[ctxAt], RelationFork, false, coveredMessages(c.ctx, ctxLen)
	case pathAt >= 0:
		return earlier[pathAt], RelationExtends, true, coveredMessages(c.ctx, pathLen)
	}
	return nil, "", false, 0
}

// compare relates c to a parent given by declaration.
func compare(c, p *call) (rel Relation, kept bool, covered int) {
	switch {
	case sameKeys(p.ctx, c.ctx):
		return repeat(p), false, len(c.msgs)
	case p.path() != nil && isPrefix(p.path(), c.ctx):
		return RelationExtends, true, coveredMessages(c.ctx, len(p.ctx)+1)
	case len(p.ctx) < len(c.ctx) && isPrefix(p.ctx, c.ctx):
		return RelationFork, false, coveredMessages(c.ctx, len(p.ctx))
	case containsSummary(c, p):
		return RelationCompaction, false, 0
	}
	return RelationFork, false, 0
}

// byTokens finds the parent by token ids, for calls whose messages placed them nowhere: an earlier
// call with the same prompt ids (a repeat), else the longest earlier prompt+generation that is a
// prefix of c's prompt. Ties go to the later call.
func byTokens(c *call, earlier []*call) (p *call, rel Relation, kept bool) {
	t := c.in.Tokens
	if t == nil || len(t.Prompt) == 0 {
		return nil, "", false
	}
	for i := len(earlier) - 1; i >= 0; i-- {
		if et := earlier[i].in.Tokens; et != nil && slices.Equal(et.Prompt, t.Prompt) {
			return earlier[i], repeat(earlier[i]), false
		}
	}
	best, bestLen := -1, 0
	for i := len(earlier) - 1; i >= 0; i-- {
		et := earlier[i].in.Tokens
		if et == nil || et.Prompt == nil || et.Generated == nil {
			continue
		}
		n := len(et.Prompt) + len(et.Generated)
		if n > bestLen && n <= len(t.Prompt) && slices.Equal(et.Prompt, t.Prompt[:len(et.Prompt)]) && slices.Equal(et.Generated, t.Prompt[len(et.Prompt):n]) {
			best, bestLen = i, n
		}
	}
	if best < 0 {
		return nil, "", false
	}
	return earlier[best], RelationExtends, true
}

// bySummary finds a compaction parent: the latest earlier call whose answer is pasted into a
// client message of c, or whose answer is a model turn of c that does not sit where it would in an
// extension. Only calls whose answers have a line long enough to be a summary can be one.
func bySummary(c *call, earlier []*call) *call {
	turns := make(map[string]bool)
	for _, s := range c.ctx {
		if s.assistant {
			turns[s.key] = true
		}
	}
	for i := len(earlier) - 1; i >= 0; i-- {
		if p := earlier[i]; len(p.summary) > 0 && (slices.ContainsFunc(p.answers, func(a string) bool { return turns[a] }) || pastedSummary(c, p)) {
			return p
		}
	}
	return nil
}

// containsSummary reports whether c's context holds p's answer: its text in a client message, or
// the answer itself as an assistant turn (when the answer has a line long enough to be a summary).
func containsSummary(c, p *call) bool {
	if len(p.summary) == 0 {
		return false
	}
	if pastedSummary(c, p) {
		return true
	}
	for _, a := range p.answers {
		for _, s := range c.ctx {
			if s.assistant && s.key == a {
				return true
			}
		}
	}
	return false
}

// pastedSummary reports whether a line of p's answer is in the text of a client message of c.
func pastedSummary(c, p *call) bool {
	for _, s := range p.summary {
		for _, m := range c.msgs {
			if m.Role == "assistant" {
				continue
			}
			for _, part := range m.Parts {
				if (part.Kind == "text" || part.Kind == "tool_result") && strings.Contains(part.Text, s) {
					return true
				}
			}
		}
	}
	return false
}

// coveredMessages is the number of request messages the first n segments of ctx cover.
func coveredMessages(ctx []segment, n int) int {
	covered := 0
	for _, s := range ctx[:min(n, len(ctx))] {
		if s.first >= 0 {
			covered = s.end
		}
	}
	return covered
}

// authors sets the author of each message of c's request context. Where c keeps its parent's
// context and answer, the turns there are the ones the parent had, attributed as the parent's
// (its answer to the parent), so a chain of equal answers ("OK" each time) names each turn's own
// call; a turn past that is the latest earlier call's that gave that answer.
func authors(c *call, cs []*call, byID, answered map[string]int) {
	c.node.Messages = make([]MessageAuthor, len(c.msgs))
	for i, m := range c.msgs {
		c.node.Messages[i] = MessageAuthor{Role: m.Role, Author: AuthorClient}
	}
	var p *call
	pi := -1
	if id := c.node.ParentCallID; id != nil && c.node.AnswerKept {
		if i, ok := byID[*id]; ok && len(cs[i].answers) > 0 {
			p, pi = cs[i], i
		}
	}
	start := 0
	if p != nil && p == c.inherit {
		// c's context starts with p's path: the authors there are p's, in p's array or a copy.
		start = len(p.ctx)
		c.from = p.from[:start]
		if !c.inPlace {
			c.from = slices.Clone(c.from)
		}
		c.from = append(c.from, make([]int, len(c.ctx)-start)...)
	} else {
		c.from = make([]int, len(c.ctx))
	}
	for k := start; k < len(c.ctx); k++ {
		s := c.ctx[k]
		c.from[k] = -1
		if !s.assistant {
			continue
		}
		switch from, ok := answered[s.key]; {
		case p != nil && k < len(p.ctx):
			c.from[k] = p.from[k]
		case p != nil && k == len(p.ctx) && s.key == p.answers[0]:
			c.from[k] = pi
		case ok:
			c.from[k] = from
		}
		if c.from[k] < 0 || s.first < 0 {
			continue
		}
		for i := s.first; i < s.end; i++ {
			c.node.Messages[i].Author = AuthorModel
			c.node.Messages[i].FromCallID = cs[c.from[k]].in.ID
		}
	}
}

// mainChain picks the main chain (package doc) and marks its calls. Each call's chain length is
// its parent's plus one (or the same, through a repeat), so all are found in one pass.
func mainChain(l *Lineage, cs []*call, byID map[string]int) {
	pos := l.positions()
	// beyond[i] is how many calls ChainTo adds before i, walking from i.
	beyond := make([]int, len(l.Calls))
	for i := range l.Calls {
		p, rel, ok := l.step(i, pos)
		switch {
		case !ok:
		case rel == RelationRetry || rel == RelationResample:
			beyond[i] = beyond[p]
		case continues(&l.Calls[i]):
			beyond[i] = 1 + beyond[p]
		}
	}
	end := -1
	for i := len(cs) - 1; i >= 0; i-- { // scanning from the last call, a tie keeps the later end
		if cs[i].in.Completed && (end < 0 || beyond[i] > beyond[end]) {
			end = i
		}
	}
	if end < 0 {
		return
	}
	for _, i := range l.chainTo(end, pos) {
		l.MainChain = append(l.MainChain, cs[i].in.ID)
		cs[i].node.MainChain = true
	}
}

// continues reports whether the edge from n to its parent carries a chain on: the parent's answer
// kept (extends, or a fork after the answer), or a compaction (the same conversation, its history
// replaced by the summary the parent wrote).
func continues(n *Node) bool { return n.AnswerKept || n.Relation == RelationCompaction }

// step returns the position of the parent of the call at position cur and the edge's relation;
// ok is false for a root, or a parent that is not an earlier call (a repeated model_call_id).
func (l *Lineage) step(cur int, pos map[string]int) (p int, rel Relation, ok bool) {
	n := &l.Calls[cur]
	if n.ParentCallID == nil {
		return 0, "", false
	}
	p, ok = pos[*n.ParentCallID]
	if !ok || p >= cur {
		return 0, "", false
	}
	return p, n.Relation, true
}

// ChainTo returns the chain ending in the call at position end of l.Calls, as positions, first
// call first: the call, then its parent while the edge keeps the parent's answer (extends, or a
// fork after the answer) or is a compaction (the same conversation, its history replaced by the
// summary the parent wrote), passing through retry and resample edges to the parent of the call
// repeated (package doc: Main chain). Segments splits a chain at its compactions.
func (l *Lineage) ChainTo(end int) []int { return l.chainTo(end, l.positions()) }

// positions maps each call's model_call_id to its position in l.Calls.
func (l *Lineage) positions() map[string]int {
	pos := make(map[string]int, len(l.Calls))
	for i := range l.Calls {
		pos[l.Calls[i].CallID] = i
	}
	return pos
}

// chainTo is ChainTo with the positions of the calls by id.
func (l *Lineage) chainTo(end int, pos map[string]int) []int {
	chain := []int{end}
	cur := end
	for {
		p, rel, ok := l.step(cur, pos) // parents are always earlier calls: the walk ends
		if !ok {
			break
		}
		if rel == RelationRetry || rel == RelationResample {
			cur = p // the repeated call has the same context; its own parent continues the chain
			continue
		}
		if !continues(&l.Calls[cur]) {
			break
		}
		chain = append(chain, p)
		cur = p
	}
	slices.Reverse(chain)
	return chain
}

// Segments splits a chain (positions in l.Calls, first call first, as ChainTo gives them) where a
// call is a compaction of the call before it: each segment is one coherent conversation, its
// history as its last call saw it, and the first call of every segment but the first is a
// compaction. A chain without a compaction is one segment.
func (l *Lineage) Segments(chain []int) [][]int {
	pos := make(map[string]int, len(l.Calls))
	for i := range l.Calls {
		pos[l.Calls[i].CallID] = i
	}
	// edge is the relation that joins the call at i to the chain: a retry or resample joins it as
	// the call it repeated did.
	edge := func(i int) Relation {
		for steps := 0; steps < len(l.Calls); steps++ { // bounded: parents are always earlier calls
			n := &l.Calls[i]
			if n.Relation != RelationRetry && n.Relation != RelationResample || n.ParentCallID == nil {
				return n.Relation
			}
			p, ok := pos[*n.ParentCallID]
			if !ok || p >= i {
				return n.Relation
			}
			i = p
		}
		return l.Calls[i].Relation
	}
	var out [][]int
	start := 0
	for k := 1; k < len(chain); k++ {
		if edge(chain[k]) == RelationCompaction {
			out = append(out, chain[start:k])
			start = k
		}
	}
	if start < len(chain) {
		out = append(out, chain[start:])
	}
	return out
}

// Leaves returns the positions of the completed calls that end a chain (no other chain runs
// through them), in capture order: the main chain's end and every other path's (an abandoned
// branch, a resampled answer, a side call).
func (l *Lineage) Leaves() []int {
	pos := l.positions()
	inner := make([]bool, len(l.Calls))
	walked := make([]bool, len(l.Calls)) // the chain on from here is marked already
	var ends []int
	for i := range l.Calls {
		if !l.Calls[i].Completed {
			continue
		}
		ends = append(ends, i)
		for cur := i; !walked[cur]; {
			walked[cur] = true
			p, rel, ok := l.step(cur, pos)
			if !ok || rel != RelationRetry && rel != RelationResample && !continues(&l.Calls[cur]) {
				break
			}
			if rel != RelationRetry && rel != RelationResample {
				inner[p] = true
			}
			cur = p
		}
	}
	var out []int
	for _, i := range ends {
		if !inner[i] {
			out = append(out, i)
		}
	}
	return out
}

func summarize(l *Lineage) {
	s := &l.Summary
	s.Calls = len(l.Calls)
	s.MainChainLength = len(l.MainChain)
	for i := range l.Calls {
		n := &l.Calls[i]
		switch n.Relation {
		case RelationRoot:
			s.Roots++
		case RelationExtends:
			s.Extends++
		case RelationFork:
			s.Forks++
		case RelationRetry:
			s.Retries++
		case RelationResample:
			s.Resamples++
		case RelationCompaction:
			s.Compactions++
		}
		if !n.MainChain {
			s.OffMainChain++
		}
		if n.Audit != nil {
			s.AuditedEdges++
			if !n.Audit.OK {
				s.AuditFailures++
			}
		}
	}
}

// segments groups a context into segments (package doc: Message matching).
func segments(msgs []Message) []segment {
	var out []segment
	for i := 0; i < len(msgs); {
		if msgs[i].Role != "assistant" {
			out = append(out, segment{key: messageKey(&msgs[i]), first: i, end: i + 1})
			i++
			continue
		}
		j := i
		for j < len(msgs) && msgs[j].Role == "assistant" {
			j++
		}
		out = append(out, segment{key: turnKey(msgs[i:j]), assistant: true, first: i, end: j})
		i = j
	}
	return out
}

// answerKeys returns the canonical keys of a response's answers (each chat choice its own answer;
// the whole output one answer otherwise) and the lines of the answers' text long enough to
// recognise when they are pasted into a later context (a harness keeps a summary's lines but often
// not its wrapping: Claude Code drops the analysis before the summary).
func answerKeys(dialect string, out []Message) (keys, summaries []string) {
	var turns [][]Message
	if dialect == "chat" {
		for i := range out {
			turns = append(turns, out[i:i+1])
		}
	} else if len(out) > 0 {
		turns = append(turns, out)
	}
	for _, t := range turns {
		keys = append(keys, turnKey(t))
		for _, line := range strings.Split(turnText(t), "\n") {
			if line = strings.TrimSpace(line); len(line) >= minSummary && !slices.Contains(summaries, line) {
				summaries = append(summaries, line)
			}
		}
	}
	return keys, summaries
}

// turnText is the text of a turn, joined and trimmed.
func turnText(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Kind == "text" {
				b.WriteString(p.Text)
			}
		}
	}
	return strings.TrimSpace(b.String())
}

// turnKey is the canonical form of an assistant turn: its text, then each tool call's name and
// arguments as a JSON value, then other parts by kind and name; reasoning and call ids left out.
func turnKey(msgs []Message) string {
	var b strings.Builder
	b.WriteString("assistant\x00")
	b.WriteString(turnText(msgs))
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Kind {
			case "text", "reasoning":
			case "tool_call":
				b.WriteString("\x00call\x00")
				b.WriteString(p.Name)
				b.WriteByte(0)
				b.WriteString(dialect.CanonicalArguments(p.Arguments))
			default:
				b.WriteString("\x00" + p.Kind + "\x00" + p.Name)
			}
		}
	}
	return b.String()
}

// messageKey is the canonical form of a message that is not the assistant's: its role and each
// part's kind, text (trimmed), name, call id and arguments as a JSON value.
func messageKey(m *Message) string {
	var b strings.Builder
	b.WriteString(m.Role)
	for _, p := range m.Parts {
		b.WriteString("\x00" + p.Kind + "\x00" + strings.TrimSpace(p.Text) + "\x00" + p.Name + "\x00" + p.CallID + "\x00" + dialect.CanonicalArguments(p.Arguments))
	}
	return b.String()
}

// previousResponseID returns a Responses request's previous_response_id, "" when none.
func previousResponseID(req []byte) string {
	if !containsAt(req, `"previous_response_id"`, 4) { // most requests: no second decode
		return ""
	}
	var r struct {
		Prev *string `json:"previous_response_id"`
	}
	if json.Unmarshal(req, &r) != nil || r.Prev == nil {
		return ""
	}
	return *r.Prev
}

// containsAt is bytes.Contains(b, []byte(tok)), found by looking for tok's byte at anchor (a
// byte rarer in JSON than its quote: bytes.Contains starts from the first byte, and a request's
// text has a quote every few bytes) and comparing tok around each one.
func containsAt(b []byte, tok string, anchor int) bool {
	a := tok[anchor]
	for i := anchor; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], a)
		if j < 0 {
			return false
		}
		i += j
		if start := i - anchor; start+len(tok) <= len(b) && string(b[start:start+len(tok)]) == tok {
			return true
		}
	}
	return false
}

func isPrefix(p, s []segment) bool {
	if len(p) > len(s) {
		return false
	}
	for i := range p {
		if p[i].key != s[i].key {
			return false
		}
	}
	return true
}

func sameKeys(a, b []segment) bool { return len(a) == len(b) && isPrefix(a, b) }

// Conversation returns what one call saw and answered, as lineage reads it: the request's context
// messages, the names of the tools it offered and the response's messages (none when the call did
// not complete).
func Conversation(c *Call) (context []Message, tools []string, answer []Message) {
	if len(c.Request) > 0 {
		context, tools = parseRequest(c.Request)
	}
	if c.Completed && len(c.Response) > 0 {
		answer = parseResponse(c.Response)
	}
	return context, tools, answer
}

// UsesPreviousResponse reports whether c's request continues a stored response
// (previous_response_id): its messages are then only what it adds to that response's history.
func UsesPreviousResponse(c *Call) bool {
	return len(c.Request) > 0 && previousResponseID(c.Request) != ""
}
