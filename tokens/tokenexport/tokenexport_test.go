package tokenexport

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// captureLine builds a capture line from one of package tokens' golden cases.
func captureLine(t *testing.T, name, id string) []byte {
	t.Helper()
	dir := filepath.Join("..", "testdata", name)
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil
		}
		return bytes.TrimSpace(b)
	}
	m := map[string]any{"model_call_id": id, "dialect": "chat", "started_at": 1790000000.0, "completed_at": 1790000001.5, "status_code": 200}
	for key, f := range map[string]string{"request": "request.json", "response": "response.json", "token_capture": "token_capture.json"} {
		if b := read(f); b != nil {
			m[key] = json.RawMessage(b)
		} else if key != "token_capture" {
			m[key] = nil
		}
	}
	if b := read("response.sse"); b != nil {
		m["response_raw"] = string(b)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rows(t *testing.T) []Row {
	var out []Row
	for i, name := range []string{"vllm_chat_json", "vllm_chat_sse_lost_tokens", "llamacpp_chat_sse", "messages_plain", "sglang_sglext_json"} {
		r, err := FromLine("r1", i, captureLine(t, name, name))
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			reward := 0.5
			r.Reward = &reward
		}
		out = append(out, r)
	}
	return out
}

func TestFromLine(t *testing.T) {
	rs := rows(t)
	r := rs[0]
	if r.TokenSource != "engine_ids" || len(r.PromptTokenIDs) != 9 || len(r.GenerationTokenIDs) != 3 || len(r.GenerationLogProbs) != 3 ||
		*r.Model != "Qwen/Qwen3-0.6B" || !r.Complete() || len(r.Findings) != 0 || r.CreatedAt != 1790000001.5 || *r.StatusCode != 200 {
		t.Errorf("vllm chat row: %+v", r)
	}
	if rs[1].Findings[0].Code != "stream_chunk_without_ids" || rs[1].Findings[0].Choice != 0 || rs[1].Findings[1].Choice != -1 {
		t.Errorf("stream findings: %+v", rs[1].Findings)
	}
	if rs[3].HasTokenData() || rs[3].TokenSource != "absent" {
		t.Errorf("messages row has token data: %+v", rs[3])
	}
	if rs[4].Choices != 2 {
		t.Errorf("choices = %d", rs[4].Choices)
	}
	if _, err := FromLine("r1", 0, []byte(`[1]`)); err == nil {
		t.Error("a line that is not an object gave no error")
	}
}

func TestParquetRoundTrip(t *testing.T) {
	want := rows(t)
	var buf bytes.Buffer
	w := NewParquetWriter(&buf)
	for i := range want {
		if err := w.Write(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadParquet(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows read back, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		w.outputItems, w.routedExperts, w.tokenItemIndex = nil, nil, nil
		wj, _ := json.Marshal(w)
		gj, _ := json.Marshal(g)
		if !bytes.Equal(wj, gj) {
			t.Errorf("row %d:\n got %s\nwant %s", i, gj, wj)
		}
	}
}

// TestGymRecordShape checks a --format gym line against NeMo Gym's token record: exactly its
// field names, in its order, with its types.
func TestGymRecordShape(t *testing.T) {
	rs := rows(t)
	g, ok := rs[0].Gym()
	if !ok {
		t.Fatal("complete row gave no Gym record")
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var keys []string
	dec.Token()
	vals := map[string]any{}
	for dec.More() {
		k, _ := dec.Token()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		vals[k.(string)] = v
	}
	wantKeys := []string{"schema_version", "rollout_id", "model_call_id", "model", "prompt_token_ids", "generation_token_ids",
		"generation_log_probs", "routed_experts", "output_items", "token_item_index", "created_at"}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("keys %v\nwant %v", keys, wantKeys)
	}
	isInt := func(v any) bool {
		n, ok := v.(json.Number)
		_, err := n.Int64()
		return ok && err == nil
	}
	isNum := func(v any) bool { _, ok := v.(json.Number); return ok }
	allOf := func(v any, f func(any) bool) bool {
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range l {
			if !f(e) {
				return false
			}
		}
		return true
	}
	checks := map[string]bool{
		"schema_version":       isInt(vals["schema_version"]) && vals["schema_version"].(json.Number) == "1",
		"rollout_id":           vals["rollout_id"] == "r1",
		"model_call_id":        vals["model_call_id"] == "vllm_chat_json",
		"model":                vals["model"] == "Qwen/Qwen3-0.6B",
		"prompt_token_ids":     allOf(vals["prompt_token_ids"], isInt),
		"generation_token_ids": allOf(vals["generation_token_ids"], isInt),
		"generation_log_probs": allOf(vals["generation_log_probs"], isNum) && len(vals["generation_log_probs"].([]any)) == 3,
		"routed_experts":       vals["routed_experts"] == nil,
		"output_items": allOf(vals["output_items"], func(v any) bool {
			m, ok := v.(map[string]any)
			return ok && m["type"] == "message" && m["role"] == "assistant"
		}),
		"token_item_index": isInt(vals["token_item_index"]),
		"created_at":       isNum(vals["created_at"]),
	}
	for k, ok := range checks {
		if !ok {
			t.Errorf("%s has the wrong type or value: %v", k, vals[k])
		}
	}
	if _, ok := rs[3].Gym(); ok {
		t.Error("a row without token data gave a Gym record")
	}
}

// TestFromLineMalformedCaptureField checks that a line member of the wrong type is named as a
// finding on the row, and the row keeps the line's token data and its other members.
func TestFromLineMalformedCaptureField(t *testing.T) {
	const tokenData = `"response":{"choices":[{"index":0,"token_ids":[5,6],"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"logprob":-1},{"logprob":-2}]}}]},"token_capture":{"prompt_token_ids":[1,2]}`
	long := `"` + strings.Repeat("a", 60) + `"`
	cases := []struct {
		name    string
		members string // the line's other members, before the token data
		details []string
		check   func(r *Row) bool
	}{
		{"dialect number", `"model_call_id":"m","dialect":7,"status_code":200`,
			[]string{"dialect is 7, not a string: not read"},
			func(r *Row) bool { return r.Dialect == "" && r.ModelCallID == "m" && *r.StatusCode == 200 }},
		{"status_code string", `"model_call_id":"m","dialect":"chat","status_code":"200"`,
			[]string{`status_code is "200", not an integer: not read`},
			func(r *Row) bool { return r.StatusCode == nil && r.Dialect == "chat" }},
		{"status_code float", `"dialect":"chat","status_code":200.0`,
			[]string{"status_code is 200.0, not an integer: not read"},
			func(r *Row) bool { return r.StatusCode == nil }},
		{"completed_at string", `"dialect":"chat","completed_at":"1790000001.5"`,
			[]string{`completed_at is "1790000001.5", not a number: not read`},
			func(r *Row) bool { return r.CreatedAt == 0 }},
		{"model_call_id object, long", `"model_call_id":{"a":` + long + `},"dialect":"chat"`,
			[]string{`model_call_id is {"a":"` + strings.Repeat("a", 34) + `..., not a string: not read`},
			func(r *Row) bool { return r.ModelCallID == "" }},
		{"two members", `"dialect":["chat"],"status_code":true,"completed_at":1.5`,
			[]string{`dialect is ["chat"], not a string: not read`, "status_code is true, not an integer: not read"},
			func(r *Row) bool { return r.CreatedAt == 1.5 }},
		{"response_raw number", `"dialect":"chat","response_raw":3`,
			[]string{"response_raw is 3, not a string: not read"},
			func(r *Row) bool { return !r.Streamed }},
		{"last occurrence wins", `"dialect":7,"dialect":"chat","status_code":null`,
			nil,
			func(r *Row) bool { return r.Dialect == "chat" && r.StatusCode == nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := FromLine("r1", 3, []byte(`{`+c.members+`,`+tokenData+`}`))
			if err != nil {
				t.Fatalf("FromLine: %v", err)
			}
			var got []string
			for _, f := range r.Findings {
				if f.Code == FindingMalformedCaptureField {
					if f.Choice != -1 {
						t.Errorf("finding choice %d, want -1", f.Choice)
					}
					got = append(got, f.Detail)
				}
			}
			if !reflect.DeepEqual(got, c.details) {
				t.Errorf("findings %q\nwant %q", got, c.details)
			}
			if !reflect.DeepEqual(r.PromptTokenIDs, []int64{1, 2}) || !reflect.DeepEqual(r.GenerationTokenIDs, []int64{5, 6}) ||
				!reflect.DeepEqual(r.GenerationLogProbs, []float64{-1, -2}) || !r.Complete() || r.CallIndex != 3 {
				t.Errorf("token data lost: %+v", r)
			}
			if !c.check(&r) {
				t.Errorf("row fields: %+v", r)
			}
		})
	}
}
