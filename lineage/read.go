package lineage

import (
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/internal/schema"
	"github.com/modelcalls/modelcalls/record"
)

// FromRecord returns the evidence of one record: its ids, dialect, model, completion, finish
// reason, token counts and payloads. A record is Completed when its status is 2xx, it has no error
// category and it has a response object. Token ids are left nil (see TokenIDs).
func FromRecord(r *record.ModelCallRecord) Call {
	c := Call{
		Index:     r.CallIndex,
		Request:   r.Request,
		Response:  r.Response,
		TokensIn:  r.TokensIn,
		TokensOut: r.TokensOut,
	}
	c.ID = deref(r.ModelCallID)
	c.Dialect = deref(r.Dialect)
	c.Model = deref(r.Model)
	c.FinishReason = deref(r.FinishReason)
	c.ResponseID = deref(r.ResponseID)
	c.Completed = r.ErrorCategory == nil && r.StatusCode != nil && *r.StatusCode >= 200 && *r.StatusCode < 300 && len(r.Response) > 0
	return c
}

// FromRecords returns the evidence of a rollout's records, in their order.
func FromRecords(recs []record.ModelCallRecord) []Call { return FromRecordsWith(recs, nil) }

// TokenReader returns the token ids of one captured call, nil when it carries none; line is the
// call's capture line when the caller has it (keys the record does not carry, such as
// token_capture), else nil. It is how a reader of the engines' token fields (samples.TokenIDs) is
// plugged into lineage without lineage knowing the engines.
type TokenReader func(r *record.ModelCallRecord, line []byte) *TokenIDs

// FromRecordsWith is FromRecords with each call's token ids read by tokens (nil: none).
func FromRecordsWith(recs []record.ModelCallRecord, tokens TokenReader) []Call {
	calls := make([]Call, len(recs))
	for i := range recs {
		calls[i] = FromRecord(&recs[i])
		if tokens != nil {
			calls[i].Tokens = tokens(&recs[i], nil)
		}
	}
	return calls
}

// Read derives the lineage of rollout id from store (ReadCalls without token ids).
func Read(store *capture.Store, id string) (l *Lineage, damaged int, err error) {
	calls, damaged, err := ReadCalls(store, id, nil)
	if err != nil {
		return nil, 0, err
	}
	return Derive(calls), damaged, nil
}

// ReadCalls returns the calls of rollout id in store: the lines the tolerant read keeps
// (capture.Store.ReadAvailable) whose record can be built, with the ids each line declares
// (SetDeclared) and token ids read by tokens (nil: none). Damaged lines (unreadable, or no record)
// are counted. Errors are the store's (I/O, an invalid id).
func ReadCalls(store *capture.Store, id string, tokens TokenReader) (calls []Call, damaged int, err error) {
	entries, damages, err := store.ReadAvailable(id)
	if err != nil {
		return nil, 0, err
	}
	damaged = len(damages)
	for _, e := range entries {
		rec, err := record.BuildRecord(e.Data, e.Index)
		if err != nil {
			damaged++
			continue
		}
		c := FromRecord(rec)
		c.SetDeclared(e.Data)
		if tokens != nil {
			c.Tokens = tokens(rec, e.Data)
		}
		calls = append(calls, c)
	}
	return calls, damaged, nil
}

// SetDeclared sets c.LogicalRequestID and c.DeclaredParentID from the capture line's
// client_logical_request_id and client_parent_call_id (docs/format.md, section 3.6), which the
// record does not carry; a key that is absent or not a string leaves its field as it is.
func (c *Call) SetDeclared(line []byte) {
	if s, ok := jsonscan.String(jsonscan.Lookup(line, schema.ClientLogicalRequestID)); ok && s != "" {
		c.LogicalRequestID = s
	}
	if s, ok := jsonscan.String(jsonscan.Lookup(line, schema.ClientParentCallID)); ok && s != "" {
		c.DeclaredParentID = s
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
