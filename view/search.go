package view

import (
	"context"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// SearchHit is one place a search found its text (GET /api/search).
type SearchHit struct {
	RolloutID string `json:"rollout_id"`
	CallIndex int    `json:"call_index"`
	// Where is "request" (a message the call sent), "response" (what the model answered), "tools"
	// (a tool the request offered) or "error" (the call's error category or error message).
	Where string `json:"where"`
	Role  string `json:"role,omitempty"` // the message's role (request, response)
	Kind  string `json:"kind"`           // the part's kind (text, reasoning, tool_call, ...), "tool" or "error"
	Name  string `json:"name,omitempty"` // the tool's name (tool_call, tool_result, tools)
	// Snippet is up to about 160 characters of the text around the first match.
	Snippet string `json:"snippet"`
}

// SearchResult answers a search: the hits in rollout id order, then capture order.
type SearchResult struct {
	Version uint64      `json:"version"`
	Query   string      `json:"query"`
	Hits    []SearchHit `json:"hits"`
	// Truncated is true when the search stopped at its limit of hits; more places match.
	Truncated bool `json:"truncated"`
	Rollouts  int  `json:"rollouts_searched"`
	Calls     int  `json:"calls_searched"`
}

// maxSearchHits is the most hits a search may ask for.
const maxSearchHits = 500

// Search finds text (case-insensitive) across every rollout's capture: message text, reasoning,
// tool calls (name and arguments), tool results, the names of the tools offered, error
// categories and error messages. Each rollout's capture file is read line by line (one line in
// memory at a time, capture.Store.ScanFrom); a message part resent on a later call of the same
// rollout is reported once, at the first call that sent or received it. It stops after limit hits
// (Truncated), or when ctx is done.
func (x *Index) Search(ctx context.Context, text string, limit int) (*SearchResult, error) {
	v, _ := x.Version()
	res := &SearchResult{Version: v, Query: text, Hits: []SearchHit{}}
	q := strings.ToLower(strings.TrimSpace(text))
	if q == "" {
		return nil, errors.New("q: want the text to search for")
	}
	limit = min(max(limit, 1), maxSearchHits)
	type target struct {
		id    string
		store *capture.Store
	}
	var targets []target
	x.mu.RLock()
	for id, e := range x.entries {
		if e.store != nil && e.sum.HasCapture {
			targets = append(targets, target{id, e.store})
		}
	}
	x.mu.RUnlock()
	slices.SortFunc(targets, func(a, b target) int { return strings.Compare(a.id, b.id) })

	full := false
	add := func(h SearchHit, hay string) {
		if full {
			return
		}
		i := strings.Index(strings.ToLower(hay), q)
		if i < 0 {
			return
		}
		if len(res.Hits) == limit {
			full, res.Truncated = true, true
			return
		}
		h.Snippet = snippet(hay, i, len(q))
		res.Hits = append(res.Hits, h)
	}
	for _, t := range targets {
		if full || ctx.Err() != nil {
			break
		}
		res.Rollouts++
		seen := map[uint64]struct{}{} // parts already searched in this rollout
		tools := map[string]bool{}
		_, err := t.store.ScanFrom(t.id, capture.Resume{}, func(l capture.ScannedLine) {
			if full || ctx.Err() != nil || capture.CheckLine(l.Data) != nil {
				return
			}
			r, err := record.BuildRecord(l.Data, l.Index)
			if err != nil {
				return
			}
			res.Calls++
			conv := conversation(r)
			for _, side := range []struct {
				where string
				msgs  []Message
			}{{"request", conv.Input}, {"response", conv.Output}} {
				where, msgs := side.where, side.msgs
				for i := range msgs {
					m := &msgs[i]
					keys := messageKeys(m)
					for j := range m.Parts {
						if j < len(keys) {
							if _, dup := seen[keys[j]]; dup {
								continue
							}
							seen[keys[j]] = struct{}{}
						}
						p := &m.Parts[j]
						h := SearchHit{RolloutID: t.id, CallIndex: l.Index, Where: where, Role: m.Role, Kind: p.Kind, Name: p.Name}
						add(h, partSearchText(p))
					}
				}
			}
			for _, name := range conv.Tools {
				if !tools[name] {
					tools[name] = true
					add(SearchHit{RolloutID: t.id, CallIndex: l.Index, Where: "tools", Kind: "tool", Name: name}, name)
				}
			}
			errText := strings.TrimSpace(strings.Join([]string{deref(r.ErrorCategory), conv.Error}, " "))
			if errText != "" {
				add(SearchHit{RolloutID: t.id, CallIndex: l.Index, Where: "error", Kind: "error"}, errText)
			}
		})
		if err != nil && !errors.Is(err, capture.ErrRewritten) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// partSearchText is the text a search looks in for one part: its text, and for a tool call its
// name and arguments.
func partSearchText(p *Part) string {
	switch p.Kind {
	case "tool_call":
		return p.Name + " " + p.Arguments
	case "tool_result", "other":
		if p.Name != "" {
			return p.Name + ": " + p.Text
		}
	}
	return p.Text
}

// snippet cuts about 160 characters of s around the match at byte i of length n, on rune
// boundaries, marking cut ends with "…".
func snippet(s string, i, n int) string {
	const ctx = 70
	i = min(i, len(s)) // a match found in the lower-cased text, whose length may differ
	from, to := max(i-ctx, 0), min(i+n+ctx, len(s))
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	out := strings.Join(strings.Fields(s[from:to]), " ")
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
