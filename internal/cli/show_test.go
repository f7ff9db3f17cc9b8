package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// showStore writes one call per dialect with a system prompt, a conversation and tools, as the
// harnesses send them, into a fresh capture dir under rollout "conv".
func showStore(t *testing.T) string {
	t.Helper()
	st := capturetest.NewStore(t)
	dir := st.Dir()
	ok, rl := 200, 429
	src := "upstream"
	rlCat := "rate_limit"
	ttft := 12.5
	calls := []*capture.Exchange{
		{Dialect: "chat", StatusCode: &ok, ResponseSource: &src, LatencyTTFTMS: &ttft,
			Request: []byte(`{"model":"gpt-4.1","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Weather in Paris?"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":"18C, sunny"}],"tools":[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"search"}}]}`),
			Response: []byte(`{"id":"r1","model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"18C and sunny.","reasoning_content":"The tool said so."},"finish_reason":"stop"}],` +
				`"usage":{"prompt_tokens":120,"completion_tokens":7,"total_tokens":127,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":3}}}`)},
		{Dialect: "responses", StatusCode: &ok,
			Request: []byte(`{"model":"o4","instructions":"Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"List files"}]}],"tools":[{"type":"function","name":"shell"},{"type":"web_search"}]}`),
			Response: []byte(`{"id":"resp_1","model":"o4","status":"completed","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"Use ls."}]},` +
				`{"type":"function_call","call_id":"fc1","name":"shell","arguments":"{\"cmd\":[\"ls\"]}"}],"usage":{"input_tokens":50,"output_tokens":20,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":70}}`)},
		{Dialect: "messages", StatusCode: &ok,
			Request: []byte(`{"model":"claude-x","system":[{"type":"text","text":"You are Claude Code."}],"messages":[{"role":"user","content":[{"type":"text","text":"fix it"}]}],"tools":[{"name":"Bash"},{"name":"Edit"}]}`),
			Response: []byte(`{"id":"msg_1","model":"claude-x","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"Look first."},{"type":"text","text":"Running tests."},` +
				`{"type":"tool_use","id":"tu1","name":"Bash","input":{"command":"go test ./..."}}],"stop_reason":"tool_use",` +
				`"usage":{"input_tokens":4,"cache_read_input_tokens":9000,"cache_creation_input_tokens":500,"output_tokens":60}}`)},
		{Dialect: "messages", StatusCode: &rl, ErrorCategory: &rlCat,
			Request:  []byte(`{"model":"claude-x","messages":[{"role":"user","content":"again"}]}`),
			Response: []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)},
	}
	for i, ex := range calls {
		ex.ModelCallID = strings.Repeat(string(rune('a'+i)), 32)
		ex.StartedAt, ex.CompletedAt, ex.LatencyMS = 1795968571.5+float64(i), 1795968572+float64(i), 500.25
		if err := st.AppendExchange("conv", ex); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestShowGolden(t *testing.T) {
	dir := showStore(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"summary", []string{"conv"}},
		{"chat-tool-result", []string{"conv", "0"}},
		{"responses-function-call", []string{"conv", "1"}},
		{"messages-cache-fold", []string{"conv", "cccccccccccccccccccccccccccccccc"}},
		{"messages-rate-limit", []string{"conv", "3"}},
		{"raw-both", []string{"conv", "1", "--raw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, "", append([]string{"show", "--capture-dir", dir}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			checkGolden(t, "show/"+tc.name+".txt", strings.ReplaceAll(out, dir, "DIR"))
		})
	}
}

func TestShowRawIsStoredBytes(t *testing.T) {
	dir := showStore(t)
	out, _, code := runCLI(t, "", "show", "--capture-dir", dir, "conv", "3", "--raw=response")
	if want := `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}` + "\n"; code != ExitOK || out != want {
		t.Errorf("exit %d, got %q", code, out)
	}
	out, _, _ = runCLI(t, "", "show", "--capture-dir", dir, "conv", "3", "--raw=request")
	if out != `{"model":"claude-x","messages":[{"role":"user","content":"again"}]}`+"\n" {
		t.Errorf("request: %q", out)
	}
}

func TestShowCutsAndFull(t *testing.T) {
	st := capturetest.NewStore(t)
	dir := st.Dir()
	var msgs []string
	for i := range 30 {
		msgs = append(msgs, `{"role":"user","content":"message `+string(rune('A'+i%26))+`"}`)
	}
	long := strings.Repeat("x", 2000)
	ok := 200
	ex := &capture.Exchange{ModelCallID: capture.NewModelCallID(), Dialect: "chat", StatusCode: &ok,
		Request: []byte(`{"model":"m","messages":[{"role":"system","content":"` + long + `"},` + strings.Join(msgs, ",") + `]}`)}
	if err := st.AppendExchange("long", ex); err != nil {
		t.Fatal(err)
	}
	out, _, _ := runCLI(t, "", "show", "--capture-dir", dir, "long", "0")
	if !strings.Contains(out, "… (1400 more characters; --full shows all)") || !strings.Contains(out, "… 18 earlier messages (--full shows them)") || !strings.Contains(out, "messages (30):") {
		t.Errorf("not cut as expected:\n%s", out)
	}
	out, _, _ = runCLI(t, "", "show", "--capture-dir", dir, "long", "0", "--full")
	if !strings.Contains(out, long) || strings.Contains(out, "earlier messages") || strings.Count(out, "[user]") != 30 {
		t.Errorf("--full cut something:\n%s", clipText(out))
	}
}

// TestShowCallByDigitID: a model_call_id made of digits only names its call, not the call_index
// with that number.
func TestShowCallByDigitID(t *testing.T) {
	st := capturetest.NewStore(t)
	dir := st.Dir()
	ok := 200
	ids := []string{strings.Repeat("0", 31) + "1", capture.NewModelCallID()} // call 0's id reads as the number 1
	for i, id := range ids {
		ex := &capture.Exchange{ModelCallID: id, Dialect: "chat", StatusCode: &ok,
			Request: []byte(`{"model":"m","messages":[{"role":"user","content":"question ` + string(rune('A'+i)) + `"}]}`)}
		if err := st.AppendExchange("digits", ex); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ arg, want string }{{ids[0], "question A"}, {"1", "question B"}, {"0", "question A"}, {ids[1], "question B"}} {
		out, _, code := runCLI(t, "", "show", "--capture-dir", dir, "digits", tc.arg)
		if code != ExitOK || !strings.Contains(out, tc.want) {
			t.Errorf("show %s: exit %d, want %q in:\n%s", tc.arg, code, tc.want, clipText(out))
		}
	}
	// All digits but no call's id: read as a call_index.
	if _, errOut, code := runCLI(t, "", "show", "--capture-dir", dir, "digits", strings.Repeat("0", 31)+"7"); code != ExitNotFound || !strings.Contains(errOut, "no call with that call_index") {
		t.Errorf("an unknown digit id: exit %d, %q", code, errOut)
	}
}

// TestShowCallByIDPrefix: a leading part of a model_call_id (6 characters or more, as copied from
// a table) names the one call whose id starts with it; a part two ids share says so and names them.
func TestShowCallByIDPrefix(t *testing.T) {
	st := capturetest.NewStore(t)
	dir := st.Dir()
	ok := 200
	ids := []string{"abcdef01" + strings.Repeat("1", 24), "abcdef02" + strings.Repeat("2", 24), "0123456a" + strings.Repeat("3", 24)}
	for i, id := range ids {
		ex := &capture.Exchange{ModelCallID: id, Dialect: "chat", StatusCode: &ok,
			Request: []byte(`{"model":"m","messages":[{"role":"user","content":"question ` + string(rune('A'+i)) + `"}]}`)}
		if err := st.AppendExchange("ids", ex); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ arg, want string }{{"abcdef01", "question A"}, {"abcdef02", "question B"}, {"0123456a", "question C"}} {
		out, errOut, code := runCLI(t, "", "show", "--capture-dir", dir, "ids", tc.arg)
		if code != ExitOK || !strings.Contains(out, tc.want) {
			t.Errorf("show %s: exit %d, %s, want %q in:\n%s", tc.arg, code, errOut, tc.want, clipText(out))
		}
	}
	checkExits(t, []exitCase{
		{"shared prefix", []string{"show", "--capture-dir", dir, "ids", "abcdef"}, ExitUsage,
			`call "abcdef": the model_call_id of 2 calls starts with it (` + ids[0] + ", " + ids[1] + "); give more of it"},
		{"too short", []string{"show", "--capture-dir", dir, "ids", "abcde"}, ExitNotFound, "neither a call_index nor a model_call_id"},
		{"digits are a call_index", []string{"show", "--capture-dir", dir, "ids", "0123456"}, ExitNotFound, "no call with that call_index"},
	})
}

func TestShowErrors(t *testing.T) {
	dir := showStore(t)
	checkExits(t, []exitCase{
		{"no capture dir", []string{"show", "conv"}, ExitUsage, "show: missing --capture-dir DIR"},
		{"unknown rollout", []string{"show", "--capture-dir", dir, "cnv"}, ExitNotFound, "did you mean conv?"},
		{"extra argument", []string{"show", "--capture-dir", dir, "conv", "1", "2"}, ExitUsage, `show: unexpected argument "2"`},
		{"call index out of range", []string{"show", "--capture-dir", dir, "conv", "9"}, ExitNotFound, "call 9: no call with that call_index (the rollout has 4 calls"},
		{"neither index nor id", []string{"show", "--capture-dir", dir, "conv", "ffff"}, ExitNotFound, `call "ffff": neither a call_index nor a model_call_id`},
		{"missing rollout", []string{"show", "--capture-dir", dir, "nope"}, ExitNotFound, "rollout nope has no capture"},
		{"raw without call", []string{"show", "--capture-dir", dir, "conv", "--raw"}, ExitUsage, "--raw needs a call"},
		{"bad raw", []string{"show", "--capture-dir", dir, "conv", "1", "--raw=headers"}, ExitUsage, "--raw=headers: want"},
		{"damaged line", []string{"show", "--capture-dir", gymCapture, "3-0", "6"}, ExitFailure, "call 6: its capture line (line 7) is damaged"},
		// A negative index is a usage error that says what an index is, whether pflag sees it as
		// shorthand flags or it comes after --.
		{"negative index", []string{"show", "--capture-dir", dir, "conv", "-1"}, ExitUsage, "show: call -1: a call index is >= 0"},
		{"negative index after --", []string{"show", "--capture-dir", dir, "conv", "--", "-12"}, ExitUsage, "show: call -12: a call index is >= 0"},
		{"other shorthand", []string{"show", "--capture-dir", dir, "conv", "-x"}, ExitUsage, "unknown shorthand flag: 'x'"},
		// The capture dir as the first argument, as calls and stats take it.
		{"positional dir", []string{"show", dir, "conv"}, ExitOK, ""},
		{"positional dir and call", []string{"show", dir, "conv", "1"}, ExitOK, ""},
		{"positional dir, extra argument", []string{"show", dir, "conv", "1", "2"}, ExitUsage, `show: unexpected argument "2"`},
		{"positional missing dir", []string{"show", "/nonexistent/capture", "conv"}, ExitNotFound, "capture dir /nonexistent/capture does not exist"},
		{"flag dir, extra argument", []string{"show", "--capture-dir", dir, dir, "conv", "1"}, ExitUsage, `show: unexpected argument "1" (the capture dir is already given by --capture-dir)`},
		{"nothing", []string{"show"}, ExitUsage, "show: missing --capture-dir DIR and ROLLOUT_ID"},
	})
}

// TestShowPositionalDirSameOutput: show DIR ID prints what show --capture-dir DIR ID prints.
func TestShowPositionalDirSameOutput(t *testing.T) {
	dir := showStore(t)
	for _, args := range [][]string{{"conv"}, {"conv", "1"}} {
		flagOut, _, c1 := runCLI(t, "", append([]string{"show", "--capture-dir", dir}, args...)...)
		posOut, _, c2 := runCLI(t, "", append([]string{"show", dir}, args...)...)
		if c1 != ExitOK || c2 != ExitOK || flagOut != posOut || flagOut == "" {
			t.Errorf("%q: exit %d/%d, outputs differ or empty:\n%s\n---\n%s", args, c1, c2, flagOut, posOut)
		}
	}
}

// TestRequestView: show reads a request as the viewer does; the leading system and developer
// messages are the system prompt, later ones stay in place, a tool message answering one call is
// labelled with its call id, and every kind of part has its line form.
func TestRequestView(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    string
		system string
		msgs   []messageView
		tools  []string
	}{
		{"responses items", `{"instructions":"Be brief.","input":[{"role":"developer","content":"Use tools."},{"role":"user","content":"hi"},` +
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"think"}]},{"type":"function_call","call_id":"f1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},` +
			`{"type":"function_call_output","call_id":"f1","output":"a.txt"}],"tools":[{"type":"function","name":"shell"},{"type":"web_search"}]}`,
			"Be brief.\nUse tools.",
			[]messageView{{"user", "hi"}, {"assistant", "(thinking) think"}, {"assistant", `→ tool call shell {"cmd":"ls"}`}, {"tool result f1", "a.txt"}},
			[]string{"shell", "web_search"}},
		{"chat system later stays in place", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"q"},{"role":"system","content":"late"}]}`,
			"S", []messageView{{"user", "q"}, {"system", "late"}}, nil},
		{"messages blocks", `{"system":"You are Claude.","messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{}}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}],"tools":[{"name":"Bash"}]}`,
			"You are Claude.",
			[]messageView{{"user", "see\n[image]"}, {"assistant", "(thinking) hm\n→ tool call Bash {\"command\":\"ls\"}"}, {"user", "← tool result t1: ok"}},
			[]string{"Bash"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := requestView([]byte(tc.req))
			if v.system != tc.system || !slices.Equal(v.messages, tc.msgs) || !slices.Equal(v.tools, tc.tools) {
				t.Errorf("requestView = system %q, messages %q, tools %q\nwant system %q, messages %q, tools %q",
					v.system, v.messages, v.tools, tc.system, tc.msgs, tc.tools)
			}
		})
	}
}
