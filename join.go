package modelcalls

import (
	"strconv"
	"strings"

	"github.com/modelcalls/modelcalls/rollout"
)

// JoinModelCallObservations resolves the model-call references of an agent observation bundle
// against the captured calls of the same rollout, without guessing ownership (NeMo Gym's
// join_model_call_observations, plus our client-session rule: step 1). It returns a new
// bundle; b and calls are not modified (records other than invocations and compactions are shared).
//
//  1. Session evidence (ours; NeMo Gym has no client ids): a call whose client_session_id equals an invocation's
//     invocation_id is appended to that invocation's model_calls (as its canonical reference), unless
//     one of the invocation's references already matches the call.
//  2. Gaps an earlier join produced are dropped (codes model_call_reference_ambiguous, _conflict,
//     _unmatched, and model_call_ownership_unavailable without invocation whose detail starts with
//     "capture:"), so joining again gives the same result. Producer gaps are kept.
//  3. Invocations in bundle order: a reference with exactly one matching call that no invocation owns
//     yet is replaced by the canonical {model_call_id, model_ref, response_id} and the invocation
//     owns the call; no match gives model_call_reference_unmatched, several give _ambiguous, an owned
//     call gives _conflict (the reference is kept as given). Gap detail: the reference's
//     model_call_id or response_id.
//  4. Compactions: model_calls references must match exactly one call owned by the compaction's own
//     invocation (owned by another: _conflict; by none: model_call_ownership_unavailable; details
//     prefixed "model_calls:"); before_model_call / after_model_call must match exactly one call not
//     owned by another invocation (details prefixed with the field name).
//  5. Every call no invocation owns gives model_call_ownership_unavailable with detail
//     "capture:<model_call_id|response_id|unknown>:call_index=<n>".
//  6. Gaps are de-duplicated on (code, invocation_id, detail), first occurrence kept.
//
// A reference matches a call by model_call_id (then its model_ref and response_id, when set, must
// equal the call's too), else by (model_ref.type, model_ref.name, response_id).
func JoinModelCallObservations(b *rollout.ObservationBundle, calls []ModelCallRecord) *rollout.ObservationBundle {
	j := newJoiner(calls)
	out := &rollout.ObservationBundle{Source: b.Source, Records: make([]rollout.ObservationRecord, len(b.Records))}
	var invocations []*rollout.AgentInvocation
	var compactions []*rollout.ContextCompactionObservation
	for i, r := range b.Records {
		switch r := r.(type) {
		case *rollout.AgentInvocation:
			c := *r
			c.ModelCalls = append([]rollout.ModelCallRef(nil), r.ModelCalls...)
			out.Records[i], invocations = &c, append(invocations, &c)
		case *rollout.ContextCompactionObservation:
			c := *r
			c.ModelCalls = append([]rollout.ModelCallRef(nil), r.ModelCalls...)
			out.Records[i], compactions = &c, append(compactions, &c)
		default:
			out.Records[i] = r
		}
	}

	j.addSessionRefs(invocations)

	for _, g := range b.Gaps {
		if !isJoinGap(g) {
			out.Gaps = append(out.Gaps, g)
		}
	}
	owner := make(map[int]string) // call index in calls -> owning invocation id
	var gaps []rollout.Gap
	gap := func(code, inv, detail string) {
		gaps = append(gaps, rollout.Gap{Code: code, InvocationID: inv, Detail: detail})
	}

	for _, inv := range invocations {
		for k, ref := range inv.ModelCalls {
			cands := j.matches(&ref)
			if len(cands) != 1 {
				gap(ambiguousOrUnmatched(cands), inv.InvocationID, refDetail(&ref))
				continue
			}
			c := cands[0]
			if _, owned := owner[c]; owned {
				gap(rollout.GapReferenceConflict, inv.InvocationID, callDetail(&calls[c]))
				continue
			}
			owner[c] = inv.InvocationID
			inv.ModelCalls[k] = canonicalRef(&calls[c])
		}
	}

	for _, comp := range compactions {
		for k, ref := range comp.ModelCalls {
			cands := j.matches(&ref)
			if len(cands) != 1 {
				gap(ambiguousOrUnmatched(cands), comp.InvocationID, "model_calls:"+refDetail(&ref))
				continue
			}
			c := cands[0]
			if o, owned := owner[c]; o != comp.InvocationID {
				code := rollout.GapOwnershipUnavailable
				if owned {
					code = rollout.GapReferenceConflict
				}
				gap(code, comp.InvocationID, "model_calls:"+callDetail(&calls[c]))
				continue
			}
			comp.ModelCalls[k] = canonicalRef(&calls[c])
		}
		for _, f := range []struct {
			name string
			ref  **rollout.ModelCallRef
		}{{"before_model_call", &comp.BeforeModelCall}, {"after_model_call", &comp.AfterModelCall}} {
			ref := *f.ref
			if ref == nil {
				continue
			}
			cands := j.matches(ref)
			if len(cands) != 1 {
				gap(ambiguousOrUnmatched(cands), comp.InvocationID, f.name+":"+refDetail(ref))
				continue
			}
			c := cands[0]
			if o, owned := owner[c]; owned && o != comp.InvocationID {
				gap(rollout.GapReferenceConflict, comp.InvocationID, f.name+":"+callDetail(&calls[c]))
				continue
			}
			canon := canonicalRef(&calls[c])
			*f.ref = &canon
		}
	}

	out.Gaps = append(out.Gaps, gaps...)
	for i := range calls {
		if _, owned := owner[i]; !owned {
			c := &calls[i]
			id := "unknown"
			if s := callDetail(c); s != "" {
				id = s
			}
			out.Gaps = append(out.Gaps, rollout.Gap{
				Code:   rollout.GapOwnershipUnavailable,
				Detail: "capture:" + id + ":call_index=" + strconv.Itoa(c.CallIndex),
			})
		}
	}
	out.Gaps = dedupGaps(out.Gaps)
	return out
}

// joiner indexes captured calls by model_call_id and by (model_ref, response_id).
type joiner struct {
	calls      []ModelCallRecord
	byCallID   map[string][]int
	byResponse map[responseKey][]int
}

type responseKey struct{ typ, name, responseID string }

func newJoiner(calls []ModelCallRecord) *joiner {
	j := &joiner{calls: calls, byCallID: map[string][]int{}, byResponse: map[responseKey][]int{}}
	for i := range calls {
		c := &calls[i]
		if c.ModelCallID != nil && *c.ModelCallID != "" {
			j.byCallID[*c.ModelCallID] = append(j.byCallID[*c.ModelCallID], i)
		}
		if c.ModelRef != nil && c.ResponseID != nil && *c.ResponseID != "" {
			k := responseKey{c.ModelRef.Type, c.ModelRef.Name, *c.ResponseID}
			j.byResponse[k] = append(j.byResponse[k], i)
		}
	}
	return j
}

// matches returns the indices of the calls ref points at.
func (j *joiner) matches(ref *rollout.ModelCallRef) []int {
	if ref.ModelCallID != nil && *ref.ModelCallID != "" {
		var out []int
		for _, i := range j.byCallID[*ref.ModelCallID] {
			c := &j.calls[i]
			if ref.ModelRef != nil && (c.ModelRef == nil || c.ModelRef.Type != ref.ModelRef.Type || c.ModelRef.Name != ref.ModelRef.Name) {
				continue
			}
			if ref.ResponseID != nil && (c.ResponseID == nil || *c.ResponseID != *ref.ResponseID) {
				continue
			}
			out = append(out, i)
		}
		return out
	}
	if ref.ModelRef == nil || ref.ResponseID == nil {
		return nil
	}
	return j.byResponse[responseKey{ref.ModelRef.Type, ref.ModelRef.Name, *ref.ResponseID}]
}

// addSessionRefs applies the client-session rule: calls the client declared as part of session S
// (its client_session_id) belong to the invocation whose invocation_id is S. Harnesses that name
// their sessions after their invocations get ownership without writing model-call references.
func (j *joiner) addSessionRefs(invocations []*rollout.AgentInvocation) {
	for _, inv := range invocations {
		for i := range j.calls {
			c := &j.calls[i]
			if c.ClientSessionID == nil || *c.ClientSessionID != inv.InvocationID {
				continue
			}
			canon := canonicalRef(c)
			if !canon.HasJoinKey() || j.referenced(inv.ModelCalls, i) {
				continue
			}
			inv.ModelCalls = append(inv.ModelCalls, canon)
		}
	}
}

// referenced reports whether any of refs matches call i.
func (j *joiner) referenced(refs []rollout.ModelCallRef, i int) bool {
	for k := range refs {
		for _, c := range j.matches(&refs[k]) {
			if c == i {
				return true
			}
		}
	}
	return false
}

func canonicalRef(c *ModelCallRecord) rollout.ModelCallRef {
	ref := rollout.ModelCallRef{ModelCallID: c.ModelCallID, ResponseID: c.ResponseID}
	if c.ModelRef != nil {
		ref.ModelRef = new(*c.ModelRef) // a copy: the bundle does not alias the record
	}
	return ref
}

func ambiguousOrUnmatched(cands []int) string {
	if len(cands) > 1 {
		return rollout.GapReferenceAmbiguous
	}
	return rollout.GapReferenceUnmatched
}

// refDetail is Python's `ref.model_call_id or ref.response_id`.
func refDetail(r *rollout.ModelCallRef) string {
	if r.ModelCallID != nil && *r.ModelCallID != "" {
		return *r.ModelCallID
	}
	if r.ResponseID != nil {
		return *r.ResponseID
	}
	return ""
}

// callDetail is Python's `call.model_call_id or call.response_id` ("" when neither).
func callDetail(c *ModelCallRecord) string {
	if c.ModelCallID != nil && *c.ModelCallID != "" {
		return *c.ModelCallID
	}
	if c.ResponseID != nil {
		return *c.ResponseID
	}
	return ""
}

// isJoinGap reports whether g was produced by an earlier join, NeMo Gym's test for the gaps a join
// drops before it runs again.
func isJoinGap(g rollout.Gap) bool {
	switch g.Code {
	case rollout.GapReferenceAmbiguous, rollout.GapReferenceConflict, rollout.GapReferenceUnmatched:
		return true
	case rollout.GapOwnershipUnavailable:
		return g.InvocationID == "" && strings.HasPrefix(g.Detail, "capture:")
	}
	return false
}

func dedupGaps(gaps []rollout.Gap) []rollout.Gap {
	seen := make(map[rollout.Gap]bool, len(gaps))
	out := gaps[:0]
	for _, g := range gaps {
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}
