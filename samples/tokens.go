package samples

import (
	"fmt"

	"github.com/modelcalls/modelcalls/lineage"
)

// TokenRow is one training row of token ids: a run of main-chain calls glued where each call's
// prompt ids start with everything before it. LossMask is 1 on the ids a call generated and 0 on
// everything the client or the template added; RolloutLogprobs holds the log probability the
// engine reported for each generated id and 0 elsewhere (and where the engine reported none).
// Slices are one entry per position of InputIDs.
type TokenRow struct {
	RolloutID string   `json:"rollout_id" parquet:"rollout_id"`
	Reward    *float64 `json:"reward" parquet:"reward,optional"`
	// Segment numbers the rows of one main chain from 0; a chain is split where gluing would cross
	// a token drift or a call without ids, and SplitReason says why this row starts anew ("" when
	// it starts at the chain's first call).
	Segment         int       `json:"segment" parquet:"segment"`
	SplitReason     string    `json:"split_reason" parquet:"split_reason"`
	InputIDs        []int64   `json:"input_ids" parquet:"input_ids,list"`
	LossMask        []int32   `json:"loss_mask" parquet:"loss_mask,list"`
	RolloutLogprobs []float64 `json:"rollout_logprobs" parquet:"rollout_logprobs,list"`
	// ModelCallIDs are the calls glued into the row, in order; for the k-th, its prompt ids start
	// at 0, its new prompt ids at PromptStarts[k], its generated ids at GenerationStarts[k], and
	// its span ends at Ends[k] (exclusive).
	ModelCallIDs     []string `json:"model_call_ids" parquet:"model_call_ids,list"`
	PromptStarts     []int32  `json:"prompt_starts" parquet:"prompt_starts,list"`
	GenerationStarts []int32  `json:"generation_starts" parquet:"generation_starts,list"`
	Ends             []int32  `json:"ends" parquet:"ends,list"`
}

// Split reasons of a TokenRow.
const (
	// SplitNoTokenIDs: the previous main-chain call(s) had no prompt or generated ids.
	SplitNoTokenIDs = "no_token_ids"
	// SplitTokenDrift: this call's prompt ids do not start with the previous call's prompt and
	// generated ids (the detail names the position).
	SplitTokenDrift = "token_prefix_mismatch"
	// SplitCompaction: this call is a compaction of the previous main-chain call: its history was
	// replaced by the summary that call wrote, so its prompt does not continue the row.
	SplitCompaction = "compaction"
)

// TokenRows returns the main chain of a rollout as token rows (TokenRow). A call that is a
// compaction of the previous one starts a new row (SplitCompaction); a main-chain call without
// prompt or generated ids is left out and the next call starts a new row; a call whose prompt ids
// do not start with the previous call's prompt and generated ids starts a new row with the audit's
// position in its SplitReason: rows are never glued across a drift. With
// opt.ContextOnlySummaries a compaction summary's generated ids have loss mask 0. reward is the
// rollout's reward, nil when unknown.
func TokenRows(rolloutID string, reward *float64, calls []lineage.Call, l *lineage.Lineage, opt Options) []TokenRow {
	b := rowBuilder{rolloutID: rolloutID, reward: reward}
	untrained := map[string]bool{}
	if opt.ContextOnlySummaries {
		untrained = summaryCalls(l)
	}
	for k, seg := range l.Segments(chainCalls(l)) {
		if k > 0 {
			b.split(SplitCompaction)
		}
		for _, i := range seg {
			b.add(&calls[i], !untrained[calls[i].ID])
		}
	}
	return b.rows
}

// rowBuilder glues main-chain calls into token rows.
type rowBuilder struct {
	rolloutID string
	reward    *float64
	rows      []TokenRow
	cur       *TokenRow         // the row being glued; nil when the next call starts a new one
	prev      *lineage.TokenIDs // the ids of the last call glued into cur
	reason    string            // the split reason of the next new row
}

// split ends the current row: the next call starts a new one, for reason.
func (b *rowBuilder) split(reason string) { b.cur, b.prev, b.reason = nil, nil, reason }

// add glues c onto the current row, or starts a new row when c does not continue it; trained is
// false when c's generated ids get loss mask 0.
func (b *rowBuilder) add(c *lineage.Call, trained bool) {
	t := c.Tokens
	if t == nil || t.Prompt == nil || t.Generated == nil {
		if b.reason != SplitCompaction { // a compaction still explains the next row
			b.split(SplitNoTokenIDs)
		}
		return
	}
	start := 0
	if b.cur != nil {
		if a := lineage.AuditPrefix(b.prev.Prompt, b.prev.Generated, t.Prompt); a.OK {
			start = len(b.prev.Prompt) + len(b.prev.Generated)
		} else {
			b.split(fmt.Sprintf("%s at %d (%s)", SplitTokenDrift, *a.Position, a.In))
		}
	}
	if b.cur == nil {
		b.rows = append(b.rows, TokenRow{RolloutID: b.rolloutID, Reward: b.reward, Segment: len(b.rows), SplitReason: b.reason})
		b.cur = &b.rows[len(b.rows)-1]
	}
	cur := b.cur
	cur.ModelCallIDs = append(cur.ModelCallIDs, c.ID)
	cur.PromptStarts = append(cur.PromptStarts, int32(len(cur.InputIDs)))
	for _, id := range t.Prompt[start:] {
		cur.InputIDs = append(cur.InputIDs, id)
		cur.LossMask = append(cur.LossMask, 0)
		cur.RolloutLogprobs = append(cur.RolloutLogprobs, 0)
	}
	cur.GenerationStarts = append(cur.GenerationStarts, int32(len(cur.InputIDs)))
	mask := int32(0)
	if trained {
		mask = 1
	}
	for k, id := range t.Generated {
		lp := 0.0
		if len(t.LogProbs) == len(t.Generated) {
			lp = t.LogProbs[k]
		}
		cur.InputIDs = append(cur.InputIDs, id)
		cur.LossMask = append(cur.LossMask, mask)
		cur.RolloutLogprobs = append(cur.RolloutLogprobs, lp)
	}
	cur.Ends = append(cur.Ends, int32(len(cur.InputIDs)))
	b.prev, b.reason = t, ""
}

// Transition is one call as a training row: its ids, log probabilities and place in the lineage.
type Transition struct {
	RolloutID    string    `json:"rollout_id" parquet:"rollout_id"`
	ModelCallID  string    `json:"model_call_id" parquet:"model_call_id"`
	CallIndex    int       `json:"call_index" parquet:"call_index"`
	ParentCallID *string   `json:"parent_call_id" parquet:"parent_call_id,optional"`
	Relation     string    `json:"relation" parquet:"relation"`
	MainChain    bool      `json:"main_chain" parquet:"main_chain"`
	Completed    bool      `json:"completed" parquet:"completed"`
	Reward       *float64  `json:"reward" parquet:"reward,optional"`
	PromptIDs    []int64   `json:"prompt_ids" parquet:"prompt_ids,list"`
	GeneratedIDs []int64   `json:"generated_ids" parquet:"generated_ids,list"`
	Logprobs     []float64 `json:"logprobs" parquet:"logprobs,list"`
}

// Transitions returns one row per call of a rollout, in capture order; ids and log probabilities
// are empty when the call has none.
func Transitions(rolloutID string, reward *float64, calls []lineage.Call, l *lineage.Lineage) []Transition {
	out := make([]Transition, len(calls))
	for i := range calls {
		n := &l.Calls[i]
		tr := Transition{RolloutID: rolloutID, ModelCallID: calls[i].ID, CallIndex: calls[i].Index, ParentCallID: n.ParentCallID,
			Relation: string(n.Relation), MainChain: n.MainChain, Completed: calls[i].Completed, Reward: reward,
			PromptIDs: []int64{}, GeneratedIDs: []int64{}, Logprobs: []float64{}}
		if t := calls[i].Tokens; t != nil {
			if t.Prompt != nil {
				tr.PromptIDs = t.Prompt
			}
			if t.Generated != nil {
				tr.GeneratedIDs = t.Generated
			}
			if t.LogProbs != nil {
				tr.Logprobs = t.LogProbs
			}
		}
		out[i] = tr
	}
	return out
}
