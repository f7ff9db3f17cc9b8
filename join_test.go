package modelcalls

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/rollout"
)

const policyRef = `{"type":"responses_api_models","name":"policy_model"}`

// call builds a captured call for join tests.
func call(modelCallID, responseID string, index int) ModelCallRecord {
	c := ModelCallRecord{CallIndex: index, ModelRef: &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "policy_model"}}
	if modelCallID != "" {
		c.ModelCallID = ptr(modelCallID)
	}
	if responseID != "" {
		c.ResponseID = ptr(responseID)
	}
	return c
}

func parseBundle(t *testing.T, s string) *rollout.ObservationBundle {
	t.Helper()
	b, err := rollout.ParseObservationBundle([]byte(s))
	if err != nil {
		t.Fatalf("parse bundle: %v", err)
	}
	return b
}

// bundleJSON renders a bundle through encoding/json for comparisons (key order normalised).
func bundleJSON(t *testing.T, b *rollout.ObservationBundle) map[string]any {
	t.Helper()
	raw, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return capturefile.DecodeObject(t, raw)
}

func invocationRefs(t *testing.T, b map[string]any, invocation string) string {
	t.Helper()
	for _, r := range b["records"].([]any) {
		rec := r.(map[string]any)
		if rec["kind"] == "agent_invocation" && rec["invocation_id"] == invocation {
			return capturefile.JSONOf(rec["model_calls"])
		}
	}
	t.Fatalf("invocation %s not found", invocation)
	return ""
}

func canon(modelCallID, responseID string) string {
	c := call(modelCallID, responseID, 0)
	return normJSON(capturefile.JSONOf(canonicalRef(&c)))
}

// normJSON re-encodes a JSON text with sorted keys, so texts compare by value.
func normJSON(s string) string {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "<invalid " + s + ">"
	}
	return capturefile.JSONOf(v)
}

// As NeMo Gym's join tests check it: an exact (model_ref, response_id) ref resolves, a producer ownership gap
// is kept, the stale capture gap is replaced, the unowned call is reported with its call_index.
func TestJoinResolvesExactRef(t *testing.T) {
	calls := []ModelCallRecord{call("a1", "resp_a", 0), call("b1", "resp_b", 1)}
	b := parseBundle(t, `{"source":"codex","records":[
		{"kind":"agent_invocation","invocation_id":"root","model_calls":[{"model_ref":`+policyRef+`,"response_id":"resp_a"}]},
		{"kind":"tool_call","invocation_id":"root","tool_call_id":"t1"}],
		"gaps":[{"code":"model_call_ownership_unavailable","invocation_id":"root"},
		        {"code":"model_call_ownership_unavailable","detail":"capture:zzz:call_index=4"},
		        {"code":"agent_transcript_unavailable"}]}`)
	got := bundleJSON(t, JoinModelCallObservations(b, calls))
	if refs := invocationRefs(t, got, "root"); refs != "["+canon("a1", "resp_a")+"]" {
		t.Errorf("refs = %s", refs)
	}
	want := `[{"code":"model_call_ownership_unavailable","invocation_id":"root"},{"code":"agent_transcript_unavailable"},` +
		`{"code":"model_call_ownership_unavailable","detail":"capture:b1:call_index=1"}]`
	if g := capturefile.JSONOf(got["gaps"]); g != normJSON(want) {
		t.Errorf("gaps\n got %s\nwant %s", g, want)
	}
	if n := len(got["records"].([]any)); n != 2 {
		t.Errorf("%d records, want 2 (tool call kept)", n)
	}
	// The input bundle is not modified.
	if b.Records[0].(*rollout.AgentInvocation).ModelCalls[0].ModelCallID != nil || len(b.Gaps) != 3 {
		t.Error("JoinModelCallObservations modified its input")
	}
}

// As NeMo Gym's join tests check it: an ambiguous response id is not guessed; both calls are reported unowned.
func TestJoinAmbiguousIsNotGuessed(t *testing.T) {
	calls := []ModelCallRecord{call("a1", "dup", 0), call("a2", "dup", 1)}
	b := parseBundle(t, `{"source":"codex","records":[{"kind":"agent_invocation","invocation_id":"root",
		"model_calls":[{"model_ref":`+policyRef+`,"response_id":"dup"}]}]}`)
	got := bundleJSON(t, JoinModelCallObservations(b, calls))
	if refs := invocationRefs(t, got, "root"); refs != normJSON(`[{"model_call_id":null,"model_ref":`+policyRef+`,"response_id":"dup"}]`) {
		t.Errorf("ambiguous ref rewritten: %s", refs)
	}
	want := `[{"code":"model_call_reference_ambiguous","invocation_id":"root","detail":"dup"},` +
		`{"code":"model_call_ownership_unavailable","detail":"capture:a1:call_index=0"},` +
		`{"code":"model_call_ownership_unavailable","detail":"capture:a2:call_index=1"}]`
	if g := capturefile.JSONOf(got["gaps"]); g != normJSON(want) {
		t.Errorf("gaps\n got %s\nwant %s", g, want)
	}
}

// As NeMo Gym's join tests check it: conflicting and unmatched refs are reported; joining twice is idempotent.
func TestJoinConflictUnmatchedIdempotent(t *testing.T) {
	calls := []ModelCallRecord{call("a1", "ra", 0), call("b1", "", 1), call("", "", 2)}
	b := parseBundle(t, `{"source":"codex","records":[
		{"kind":"agent_invocation","invocation_id":"one","model_calls":[{"model_call_id":"a1"}]},
		{"kind":"agent_invocation","invocation_id":"two","parent_invocation_id":"one","model_calls":[
			{"model_call_id":"a1"},{"model_call_id":"nope"},{"model_call_id":"b1","response_id":"wrong"}]}]}`)
	once := JoinModelCallObservations(b, calls)
	got := bundleJSON(t, once)
	want := `[{"code":"model_call_reference_conflict","invocation_id":"two","detail":"a1"},` +
		`{"code":"model_call_reference_unmatched","invocation_id":"two","detail":"nope"},` +
		`{"code":"model_call_reference_unmatched","invocation_id":"two","detail":"b1"},` +
		`{"code":"model_call_ownership_unavailable","detail":"capture:b1:call_index=1"},` +
		`{"code":"model_call_ownership_unavailable","detail":"capture:unknown:call_index=2"}]`
	if g := capturefile.JSONOf(got["gaps"]); g != normJSON(want) {
		t.Errorf("gaps\n got %s\nwant %s", g, want)
	}
	twice := bundleJSON(t, JoinModelCallObservations(once, calls))
	if capturefile.JSONOf(twice) != capturefile.JSONOf(got) {
		t.Errorf("second join differs\nonce  %s\ntwice %s", capturefile.JSONOf(got), capturefile.JSONOf(twice))
	}
}

// As NeMo Gym's join tests check it: compaction references resolve when the calls are owned by the
// compaction's invocation; other ownership yields conflict / ownership-unavailable gaps.
func TestJoinCompactions(t *testing.T) {
	calls := []ModelCallRecord{call("before", "", 0), call("compact", "", 1), call("after", "", 2),
		call("other1", "", 3), call("loose", "", 4)}
	b := parseBundle(t, `{"source":"claude_code","records":[
		{"kind":"agent_invocation","invocation_id":"root","model_calls":[{"model_call_id":"before"},{"model_call_id":"compact"},{"model_call_id":"after"}]},
		{"kind":"agent_invocation","invocation_id":"other","model_calls":[{"model_call_id":"other1"}]},
		{"kind":"context_compaction","invocation_id":"root","tokens_before":1000,"tokens_after":100,
			"before_model_call":{"model_call_id":"before"},"model_calls":[{"model_call_id":"compact"}],"after_model_call":{"model_call_id":"after"}},
		{"kind":"context_compaction","invocation_id":"other",
			"before_model_call":{"model_call_id":"compact"},"model_calls":[{"model_call_id":"compact"},{"model_call_id":"loose"},{"model_call_id":"ghost"}],
			"after_model_call":{"model_call_id":"loose"}}]}`)
	out := JoinModelCallObservations(b, calls)
	same := out.Records[2].(*rollout.ContextCompactionObservation)
	if normJSON(capturefile.JSONOf(same.BeforeModelCall)) != canon("before", "") || normJSON(capturefile.JSONOf(same.ModelCalls)) != "["+canon("compact", "")+"]" ||
		normJSON(capturefile.JSONOf(same.AfterModelCall)) != canon("after", "") {
		t.Errorf("same-invocation compaction not resolved: %s", capturefile.JSONOf(same))
	}
	cross := out.Records[3].(*rollout.ContextCompactionObservation)
	if normJSON(capturefile.JSONOf(cross.BeforeModelCall)) != normJSON(`{"model_call_id":"compact","model_ref":null,"response_id":null}`) {
		t.Errorf("conflicting before_model_call rewritten: %s", capturefile.JSONOf(cross.BeforeModelCall))
	}
	if normJSON(capturefile.JSONOf(cross.AfterModelCall)) != canon("loose", "") {
		t.Errorf("unowned after_model_call not resolved: %s", capturefile.JSONOf(cross.AfterModelCall))
	}
	want := `[{"code":"model_call_reference_conflict","invocation_id":"other","detail":"model_calls:compact"},` +
		`{"code":"model_call_ownership_unavailable","invocation_id":"other","detail":"model_calls:loose"},` +
		`{"code":"model_call_reference_unmatched","invocation_id":"other","detail":"model_calls:ghost"},` +
		`{"code":"model_call_reference_conflict","invocation_id":"other","detail":"before_model_call:compact"},` +
		`{"code":"model_call_ownership_unavailable","detail":"capture:loose:call_index=4"}]`
	if g := normJSON(capturefile.JSONOf(out.Gaps)); g != normJSON(want) {
		t.Errorf("gaps\n got %s\nwant %s", g, want)
	}
}

// Our client-session rule: a call whose client_session_id equals an invocation's invocation_id joins that
// invocation (appended after its own refs, never twice).
func TestJoinClientSession(t *testing.T) {
	calls := []ModelCallRecord{call("s1", "", 0), call("s2", "", 1), call("x1", "", 2), call("s3", "", 3)}
	calls[0].ClientSessionID = ptr("sess-root")
	calls[1].ClientSessionID = ptr("sess-root")
	calls[2].ClientSessionID = ptr("unknown-session")
	calls[3].ClientSessionID = ptr("sess-sub")
	b := parseBundle(t, `{"source":"claude_code","records":[
		{"kind":"agent_invocation","invocation_id":"sess-root","model_calls":[{"model_call_id":"s2"}]},
		{"kind":"agent_invocation","invocation_id":"sess-sub","parent_invocation_id":"sess-root"}]}`)
	got := bundleJSON(t, JoinModelCallObservations(b, calls))
	if refs := invocationRefs(t, got, "sess-root"); refs != "["+canon("s2", "")+","+canon("s1", "")+"]" {
		t.Errorf("root refs = %s", refs)
	}
	if refs := invocationRefs(t, got, "sess-sub"); refs != "["+canon("s3", "")+"]" {
		t.Errorf("sub refs = %s", refs)
	}
	if g := capturefile.JSONOf(got["gaps"]); g != normJSON(`[{"code":"model_call_ownership_unavailable","detail":"capture:x1:call_index=2"}]`) {
		t.Errorf("gaps = %s", g)
	}
}

// NeMo Gym's merge scenario, through our merge: metrics and calls without payloads, output and reward
// untouched, an invocation ref joined by (model_ref, response_id), the stale capture gap removed;
// with payloads all four payload fields are attached.
func TestMergeJoinsObservations(t *testing.T) {
	dir := t.TempDir()
	resp := func(id string) capture.Exchange {
		return capture.Exchange{Dialect: "responses", StatusCode: ptr(200), Request: json.RawMessage(`{"model":"m"}`),
			Response: json.RawMessage(`{"id":"` + id + `","status":"completed","usage":{"input_tokens":3,"output_tokens":2}}`)}
	}
	l1, l2 := capturefile.ExchangeLine(t, resp("resp_1")), capturefile.ExchangeLine(t, resp("resp_2"))
	capturefile.WriteCapture(t, dir, "1-0", string(l1)+"\n"+string(l2)+"\n")
	id1 := jsonscan.Lookup(l1, "model_call_id")
	id2 := jsonscan.Lookup(l2, "model_call_id")
	line := []byte(`{"_ng_task_index": 1, "_ng_rollout_index": 0, "output": [{"type": "message", "content": "answer <b>&"}], "reward": 0.75, ` +
		`"ng_agent_observations": {"source": "codex", "records": [{"kind": "agent_invocation", "invocation_id": "root", "status": "completed", ` +
		`"model_calls": [{"model_ref": ` + policyRef + `, "response_id": "resp_1"}]}], ` +
		`"gaps": [{"code": "model_call_ownership_unavailable", "detail": "capture:stale:call_index=0"}]}}`)
	for _, payloads := range []bool{false, true} {
		out, res, err := MergeRecord(context.Background(), line, []string{dir}, MergeOptions{DrainTimeout: -1, IncludePayloads: payloads})
		if err != nil || !res.Attached || !res.ObservationsJoined {
			t.Fatalf("merge: %v %+v", err, res)
		}
		checkSplice(t, line, out, true)
		got := capturefile.DecodeObject(t, out)
		obs := got[FieldAgentObservations].(map[string]any)
		wantRef := `[{"model_call_id":` + string(id1) + `,"model_ref":` + policyRef + `,"response_id":"resp_1"}]`
		if refs := invocationRefs(t, obs, "root"); refs != normJSON(wantRef) {
			t.Errorf("refs\n got %s\nwant %s", refs, wantRef)
		}
		wantGaps := `[{"code":"model_call_ownership_unavailable","detail":"capture:` + string(bytes.Trim(id2, `"`)) + `:call_index=1"}]`
		if g := capturefile.JSONOf(obs["gaps"]); g != normJSON(wantGaps) {
			t.Errorf("observation gaps\n got %s\nwant %s", g, wantGaps)
		}
		c := got[FieldModelCallCapture].(map[string]any)
		if capturefile.JSONOf(c["metrics"]) != `{"cached_tokens":null,"latency_total_ms":1500.0,"num_calls":2,"tokens_in":6,"tokens_out":4,"tokens_reasoning":null,"tokens_total":10}` {
			t.Errorf("metrics = %s", capturefile.JSONOf(c["metrics"]))
		}
		if _, has := c["gaps"]; has {
			t.Errorf("capture gaps = %s, want none", capturefile.JSONOf(c["gaps"]))
		}
		for _, call := range c["calls"].([]any) {
			for _, f := range payloadFields {
				if _, present := call.(map[string]any)[f]; present != payloads {
					t.Errorf("payloads=%v: %s present=%v", payloads, f, present)
				}
			}
		}
	}
}

// As NeMo Gym's merge tests check it: no capture file gives no_records on the capture and unmatched gaps in the
// observations.
func TestMergeObservationsWithoutCapture(t *testing.T) {
	dir := t.TempDir()
	line := []byte(`{"_ng_task_index": 2, "_ng_rollout_index": 0, "ng_agent_observations": {"source": "opencode", "records": [` +
		`{"kind": "agent_invocation", "invocation_id": "root", "model_calls": [{"model_call_id": "missing"}]}]}}`)
	out, res, err := MergeRecord(context.Background(), line, []string{dir}, MergeOptions{DrainTimeout: -1})
	if err != nil || !res.ObservationsJoined {
		t.Fatalf("merge: %v %+v", err, res)
	}
	got := capturefile.DecodeObject(t, out)
	if g := capturefile.JSONOf(got[FieldModelCallCapture].(map[string]any)["gaps"]); g != normJSON(`[{"code":"model_call_capture_no_records"}]`) {
		t.Errorf("capture gaps = %s", g)
	}
	if g := capturefile.JSONOf(got[FieldAgentObservations].(map[string]any)["gaps"]); g != normJSON(`[{"code":"model_call_reference_unmatched","invocation_id":"root","detail":"missing"}]`) {
		t.Errorf("observation gaps = %s", g)
	}
}

// An invalid bundle is left byte-for-byte as it was and reported as agent_observation_join_failed.
func TestMergeInvalidObservationsUntouched(t *testing.T) {
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n")
	for name, obs := range map[string]string{
		"unknown field":       `{"source": "x", "records": [], "extra": 1}`,
		"duplicate ids":       `{"source": "x", "records": [{"kind": "agent_invocation", "invocation_id": "a"}, {"kind": "agent_invocation", "invocation_id": "a"}]}`,
		"ref without key":     `{"source": "x", "records": [{"kind": "agent_invocation", "invocation_id": "a", "model_calls": [{"response_id": "r"}]}]}`,
		"not an object":       `[1, 2]`,
		"parent cycle":        `{"source": "x", "records": [{"kind": "agent_invocation", "invocation_id": "a", "parent_invocation_id": "b"}, {"kind": "agent_invocation", "invocation_id": "b", "parent_invocation_id": "a"}]}`,
		"legacy turn records": `{"source": "x", "records": [{"kind": "turn", "invocation_id": "a"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			line := []byte(`{"_ng_rollout_id": "r", "ng_agent_observations": ` + obs + `, "reward": 1}`)
			out, res, err := MergeRecord(context.Background(), line, []string{dir}, MergeOptions{DrainTimeout: -1})
			if err != nil || res.ObservationsJoined {
				t.Fatalf("merge: %v %+v", err, res)
			}
			checkSplice(t, line, out, false)
			if len(res.Gaps) != 1 || res.Gaps[0].Code != rollout.GapAgentObservationJoinFailed || res.Gaps[0].Detail == "" {
				t.Errorf("gaps = %+v", res.Gaps)
			}
		})
	}
}

// The joined observations keep their float fields' form: merge writes 1.0 and 1e16 back, not 1 and
// 10000000000000000.
func TestMergeObservationNumbersKeepTheirForm(t *testing.T) {
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n")
	line := []byte(`{"_ng_rollout_id": "r", "ng_agent_observations": {"source": "x", "records": [` +
		`{"kind": "agent_invocation", "invocation_id": "root", "duration_ms": 1.0, "model_calls": [{"model_call_id": "a"}]},` +
		`{"kind": "tool_call", "invocation_id": "root", "tool_call_id": "t", "started_at": 1e16, "completed_at": 1e+16}]}}`)
	out, res, err := MergeRecord(context.Background(), line, []string{dir}, MergeOptions{DrainTimeout: -1})
	if err != nil || !res.ObservationsJoined {
		t.Fatalf("merge: %v %+v", err, res)
	}
	for _, want := range []string{`"duration_ms":1.0`, `"started_at":1e16`, `"completed_at":1e+16`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("merged record lacks %s:\n%s", want, out)
		}
	}
}
