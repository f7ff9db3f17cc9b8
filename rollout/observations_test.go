package rollout

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// What a bundle must satisfy, as NeMo Gym's own tests of its observation models check it: refs need
// a join key, invocation ids are unique without parent cycles, unknown fields and legacy turn records
// are rejected, and numbers and times are validated.
func TestParseObservationBundleRejects(t *testing.T) {
	inv := func(extra string) string {
		return `{"source":"s","records":[{"kind":"agent_invocation","invocation_id":"a"` + extra + `}]}`
	}
	cases := map[string]string{
		"not an object":                     `[]`,
		"missing source":                    `{"records":[]}`,
		"null source":                       `{"source":null}`,
		"unknown bundle field":              `{"source":"s","turns":[]}`,
		"records null":                      `{"source":"s","records":null}`,
		"record without kind":               `{"source":"s","records":[{"invocation_id":"a"}]}`,
		"legacy turn record":                `{"source":"s","records":[{"kind":"turn","invocation_id":"a"}]}`,
		"unknown record field":              inv(`,"turns":[]`),
		"missing invocation_id":             `{"source":"s","records":[{"kind":"agent_invocation"}]}`,
		"invocation_id not a string":        `{"source":"s","records":[{"kind":"agent_invocation","invocation_id":1}]}`,
		"bad status":                        inv(`,"status":"done"`),
		"null status":                       inv(`,"status":null`),
		"negative duration":                 inv(`,"duration_ms":-1`),
		"duration as string":                inv(`,"duration_ms":"5"`),
		"ref without join key":              inv(`,"model_calls":[{"response_id":"r"}]`),
		"ref with empty call id":            inv(`,"model_calls":[{"model_call_id":""}]`),
		"ref model_ref without response_id": inv(`,"model_calls":[{"model_ref":{"type":"responses_api_models","name":"p"}}]`),
		"ref bad model_ref type":            inv(`,"model_calls":[{"model_ref":{"type":"x","name":"p"},"response_id":"r"}]`),
		"ref unknown field":                 inv(`,"model_calls":[{"model_call_id":"c","turn":1}]`),
		"duplicate invocation ids":          `{"source":"s","records":[{"kind":"agent_invocation","invocation_id":"a"},{"kind":"agent_invocation","invocation_id":"a"}]}`,
		"self parent":                       inv(`,"parent_invocation_id":"a"`),
		"parent cycle": `{"source":"s","records":[{"kind":"agent_invocation","invocation_id":"a","parent_invocation_id":"c"},` +
			`{"kind":"agent_invocation","invocation_id":"b","parent_invocation_id":"a"},{"kind":"agent_invocation","invocation_id":"c","parent_invocation_id":"b"}]}`,
		"tool completed before started": `{"source":"s","records":[{"kind":"tool_call","invocation_id":"a","tool_call_id":"t","started_at":2,"completed_at":1}]}`,
		"tool missing tool_call_id":     `{"source":"s","records":[{"kind":"tool_call","invocation_id":"a"}]}`,
		"tool bad timing_source":        `{"source":"s","records":[{"kind":"tool_call","invocation_id":"a","tool_call_id":"t","timing_source":"guess"}]}`,
		"sandbox missing role":          `{"source":"s","records":[{"kind":"sandbox"}]}`,
		"sandbox negative memory":       `{"source":"s","records":[{"kind":"sandbox","role":"agent","peak_memory_mib":-1}]}`,
		"sandbox fractional exit code":  `{"source":"s","records":[{"kind":"sandbox","role":"agent","exit_code":1.5}]}`,
		"compaction negative tokens":    `{"source":"s","records":[{"kind":"context_compaction","invocation_id":"a","tokens_before":-5}]}`,
		"compaction bad before ref":     `{"source":"s","records":[{"kind":"context_compaction","invocation_id":"a","before_model_call":{}}]}`,
		"tool unknown field":            `{"source":"s","records":[{"kind":"tool_call","invocation_id":"a","tool_call_id":"t","turn":1}]}`,
		"sandbox unknown field":         `{"source":"s","records":[{"kind":"sandbox","role":"agent","turn":1}]}`,
		"compaction unknown field":      `{"source":"s","records":[{"kind":"context_compaction","invocation_id":"a","turn":1}]}`,
		"gap without code":              `{"source":"s","gaps":[{"detail":"x"}]}`,
		"gap unknown field":             `{"source":"s","gaps":[{"code":"x","why":"y"}]}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := ParseObservationBundle([]byte(in))
			if err == nil {
				raw, _ := b.MarshalJSON()
				t.Fatalf("accepted: %s", raw)
			}
			if !errors.Is(err, ErrInvalidObservations) {
				t.Errorf("error %v does not wrap ErrInvalidObservations", err)
			}
		})
	}
}

// Unknown fields are reported alone, sorted, under the object's name, even when a known field is
// invalid too.
func TestParseObservationBundleUnknownFields(t *testing.T) {
	for in, want := range map[string]string{
		`{"source":"s","turns":[],"records":null}`:                                                                                  "bundle: unknown field(s) turns",
		`{"source":"s","records":[{"kind":"sandbox","role":"x","zz":1,"aa":2}]}`:                                                    "records[0]: sandbox: unknown field(s) aa, zz",
		`{"source":"s","records":[{"kind":"agent_invocation","invocation_id":"a","model_calls":[{"model_call_id":"c","turn":1}]}]}`: `agent_invocation "a": model_calls[0]: model call reference: unknown field(s) turn`,
	} {
		_, err := ParseObservationBundle([]byte(in))
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: error %v, want one ending in %q", in, err, want)
		}
	}
}

func TestParseObservationBundleAccepts(t *testing.T) {
	in := `{"source":"claude_code","records":[
		{"kind":"agent_invocation","invocation_id":"root","status":"completed","duration_ms":12,"model_calls":[
			{"model_call_id":"c1"},{"model_ref":{"type":"responses_api_models","name":"p","extra":1},"response_id":"r2"}],
			"conversation":[{"role":"user","content":"hi <b>"}]},
		{"kind":"agent_invocation","invocation_id":"sub","parent_invocation_id":"root","spawned_by_tool_call_id":"t1"},
		{"kind":"agent_invocation","invocation_id":"orphan","parent_invocation_id":"not-in-bundle"},
		{"kind":"tool_call","invocation_id":"root","tool_call_id":"t1","started_at":1,"completed_at":1,"timing_source":"harness","status":"completed"},
		{"kind":"sandbox","role":"agent","exit_code":0,"wall_time_s":3.5,"outcome":"oom"},
		{"kind":"context_compaction","invocation_id":"root","tokens_before":100,"tokens_after":10.0,"before_model_call":{"model_call_id":"c1"},"model_calls":[]}],
		"gaps":[{"code":"agent_transcript_unavailable"},{"code":"x","invocation_id":"root","detail":null}]}`
	b, err := ParseObservationBundle([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Records) != 6 || len(b.Gaps) != 2 || b.Gaps[1].InvocationID != "root" {
		t.Fatalf("parsed %d records, gaps %+v", len(b.Records), b.Gaps)
	}
	raw, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	out := string(raw)
	for _, want := range []string{
		// every field written, defaults filled, in NeMo Gym's field order
		`{"kind":"agent_invocation","invocation_id":"sub","parent_invocation_id":"root","spawned_by_tool_call_id":"t1","status":"unknown","duration_ms":null,"error_type":null,"model_calls":[],"conversation":[]}`,
		`{"model_call_id":null,"model_ref":{"type":"responses_api_models","name":"p"},"response_id":"r2"}`,
		`"conversation":[{"role":"user","content":"hi <b>"}]`,
		`{"kind":"sandbox","role":"agent","provider":null,"sandbox_id":null,"outcome":"oom","exit_code":0,"wall_time_s":3.5,`,
		`"tokens_after":10,"outcome":"unknown","summary":null,"first_kept_item_id":null,"before_model_call":{"model_call_id":"c1","model_ref":null,"response_id":null},"model_calls":[],"after_model_call":null}`,
		`"gaps":[{"code":"agent_transcript_unavailable"},{"code":"x","invocation_id":"root"}]`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s\n%s", want, out)
		}
	}
	// The write-back parses again to the same bundle.
	again, err := ParseObservationBundle(raw)
	if err != nil {
		t.Fatalf("write-back does not parse: %v", err)
	}
	raw2, _ := again.MarshalJSON()
	if string(raw2) != out {
		t.Errorf("not stable:\n%s\n%s", out, raw2)
	}
	if !json.Valid(raw) || strings.Contains(out, `\u003c`) {
		t.Errorf("bad encoding: %s", out)
	}
}

// A float field is written back in the form it was parsed from: 1.0 stays 1.0 and 1e16 stays 1e16
// (a reader with separate int and float types must get a float back), while a field changed after
// parsing is written as Go encodes it.
func TestObservationNumbersKeepTheirForm(t *testing.T) {
	in := `{"source":"s","records":[` +
		`{"kind":"agent_invocation","invocation_id":"a","duration_ms":1.0},` +
		`{"kind":"tool_call","invocation_id":"a","tool_call_id":"t","started_at":1e16,"completed_at":1E+16,"duration_ms":2.50},` +
		`{"kind":"sandbox","role":"agent","exit_code":0,"wall_time_s":0.0,"cpu_time_s":-0.0,"peak_memory_mib":1e-3},` +
		`{"kind":"context_compaction","invocation_id":"a","observed_at":1700000000.000,"tokens_before":10}]}`
	b, err := ParseObservationBundle([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"duration_ms":1.0,`, `"started_at":1e16,`, `"completed_at":1E+16,`, `"duration_ms":2.50,`,
		`"wall_time_s":0.0,`, `"cpu_time_s":-0.0,`, `"peak_memory_mib":1e-3,`, `"observed_at":1700000000.000,`, `"exit_code":0,`, `"tokens_before":10,`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	tc := b.Records[1].(*ToolCallObservation)
	*tc.DurationMS = 3
	tc.StartedAt = nil
	out, _ = b.MarshalJSON()
	for _, want := range []string{`"duration_ms":3,`, `"started_at":null,`, `"completed_at":1E+16,`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("after a change, output lacks %s:\n%s", want, out)
		}
	}
}
