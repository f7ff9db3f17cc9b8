package view

import (
	"errors"
	"fmt"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/record"
	"github.com/modelcalls/modelcalls/tokens"
)

// LineageDetail is a rollout's lineage (GET /api/rollouts/{id}/lineage): package lineage's JSON
// (rollout_id, calls, main_chain, summary, as `modelcalls lineage --format json` prints it, with
// the token audit where both ends carry ids), then which calls carry token data and the readable
// lines left out.
type LineageDetail struct {
	Version   uint64 `json:"version"`
	RolloutID string `json:"rollout_id"`
	*lineage.Lineage
	// CallTokens has one entry per call of Calls, in the same order.
	CallTokens []CallTokens `json:"call_tokens"`
	// Damaged counts the lines that could not be read as a record (left out of the lineage).
	Damaged int `json:"damaged"`
}

// CallTokens says whether one call carries token data (package tokens).
type CallTokens struct {
	CallIndex int `json:"call_index"`
	// Source and PromptSource are tokens' token_source and prompt_token_source.
	Source       tokens.Source `json:"token_source"`
	PromptSource tokens.Source `json:"prompt_token_source"`
	Generated    int           `json:"generated_tokens"` // first choice's generated ids
	Prompt       int           `json:"prompt_tokens"`    // prompt ids
	Findings     []string      `json:"findings"`         // the findings' codes
}

// maxLineageBytes is the largest rollout (the sum of its readable lines) whose lineage the viewer
// derives: the derivation holds every request and response of the rollout at once, so a larger
// rollout would break the viewer's memory bound. `modelcalls lineage` has no such limit.
const maxLineageBytes = 32 << 20

// ErrTooLarge is returned for a rollout too large to derive its lineage in the viewer.
var ErrTooLarge = errors.New("rollout too large for the viewer's lineage")

// lineagesKept is how many derived lineages the index keeps (the rollouts looked at last).
const lineagesKept = 8

// lineageCached is a derived lineage and the index entry it was derived from: an entry is
// replaced whenever its files change, so the same entry means the same lines.
type lineageCached struct {
	e *entry
	d *LineageDetail
}

// readTokens reads one captured call's token data with package tokens (the line's token_capture
// included).
func readTokens(r *record.ModelCallRecord, line []byte) *tokens.Tokens {
	c := tokens.Call{Request: r.Request, Response: r.Response}
	if r.Dialect != nil {
		c.Dialect = *r.Dialect
	}
	if r.ResponseRaw != nil {
		c.ResponseRaw = rawText(r.ResponseRaw)
	}
	if tc := jsonscan.Lookup(line, "token_capture"); jsonscan.IsObject(tc) {
		c.TokenCapture = tc
	}
	return tokens.Read(c)
}

// Lineage derives rollout id's lineage (package lineage) from its readable lines, with each call's
// token ids read by package tokens so that chained edges are audited. It reads one line at a time
// (capture.Store.ReadLineAt), but the derivation compares every call's request and response, so
// it holds the rollout's requests and responses while it runs: it runs in one of the server's
// heavy-read slots like the other rollout reads, only for a rollout of at most maxLineageBytes of
// lines (else ErrTooLarge), and the index keeps the last few results until their rollout changes.
func (x *Index) Lineage(id string) (*LineageDetail, error) {
	v, _ := x.Version()
	for attempt := 0; ; attempt++ {
		e, err := x.refresh(id)
		if err != nil {
			return nil, err
		}
		x.linMu.Lock()
		c, ok := x.lineages[id]
		x.linMu.Unlock()
		if ok && c.e == e {
			d := *c.d
			d.Version = v
			return &d, nil
		}
		total := 0
		for i := range e.calls {
			total += e.calls[i].size
		}
		if total > maxLineageBytes {
			return nil, fmt.Errorf("%w: %d bytes of capture lines, at most %d (use modelcalls lineage)", ErrTooLarge, total, maxLineageBytes)
		}
		d := &LineageDetail{Version: v, RolloutID: id, CallTokens: []CallTokens{}, Damaged: len(e.damaged)}
		var calls []lineage.Call
		rewritten := false
		if e.store != nil && e.sum.HasCapture {
			for i := range e.calls {
				c := &e.calls[i]
				line, err := e.store.ReadLineAt(id, c.off, c.size)
				if errors.Is(err, capture.ErrRewritten) && attempt == 0 {
					rewritten = true
					break
				}
				if err != nil {
					return nil, err
				}
				rec, err := record.BuildRecord(line, c.index)
				if err != nil {
					d.Damaged++
					continue
				}
				lc := lineage.FromRecord(rec)
				lc.SetDeclared(line)
				t := readTokens(rec, line)
				if t.PromptTokenIDs != nil || t.GenerationTokenIDs() != nil {
					lc.Tokens = &lineage.TokenIDs{Prompt: t.PromptTokenIDs, Generated: t.GenerationTokenIDs(), LogProbs: t.GenerationLogProbs()}
				}
				ct := CallTokens{CallIndex: c.index, Source: t.Source, PromptSource: t.PromptSource,
					Generated: len(t.GenerationTokenIDs()), Prompt: len(t.PromptTokenIDs), Findings: []string{}}
				for _, f := range t.Findings {
					ct.Findings = append(ct.Findings, f.Code)
				}
				d.CallTokens = append(d.CallTokens, ct)
				calls = append(calls, lc)
			}
		}
		if rewritten {
			x.forget(id, e)
			continue
		}
		d.Lineage = lineage.Derive(calls)
		x.linMu.Lock()
		if x.lineages == nil {
			x.lineages = map[string]lineageCached{}
		}
		if _, ok := x.lineages[id]; !ok && len(x.lineages) >= lineagesKept {
			for k := range x.lineages { // drop any one: a dropped lineage is derived again
				delete(x.lineages, k)
				break
			}
		}
		x.lineages[id] = lineageCached{e: e, d: d}
		x.linMu.Unlock()
		return d, nil
	}
}
