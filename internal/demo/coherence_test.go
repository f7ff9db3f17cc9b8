package demo

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/view"
)

// staleTopics are words of the unrelated fixtures the demo's conversations were once stitched from
// (other cities, a calculator, a holiday, crossing a street, the capital of Denmark): none may appear
// in a conversation about the weather in Tokyo.
var staleTopics = []string{"Paris", "San Francisco", "Edinburgh", "London", "Berlin", "Denmark", "street",
	"Galaxy", "570", "6666", "925", "calculator", "final_result"}

// estTokens is a rough token count of text: one token per 4 characters, rounded up.
func estTokens(s string) int64 { return int64(utf8.RuneCountInString(s)+3) / 4 }

// partsText joins the texts of the parts of the given kinds ("" for every kind), tool calls as
// their name and arguments.
func partsText(msgs []view.Message, kinds ...string) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			if len(kinds) > 0 && !slices.Contains(kinds, p.Kind) {
				continue
			}
			b.WriteString(p.Text + p.Name + p.Arguments + " ")
		}
	}
	return b.String()
}

// TestConversationsCoherent: every demo conversation is one conversation. Each call's response is
// the answer of the model its request asks for; the first call asks for the weather in Tokyo and
// is answered with a get_weather call for Tokyo, a tool the request offers; the second carries that
// call and the tool's result for it, and is answered with the result's figures; texts and
// reasoning stay on that topic; and the token figures fit the texts: totals add up, cached and
// reasoning counts are parts of their totals, a cache hit covers at most the previous call's
// prompt, the second prompt is longer than the first by about what was added, and the output
// counts are about what the texts need.
func TestConversationsCoherent(t *testing.T) {
	res, err := Run(context.Background(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rollouts {
		if r.Calls == 0 {
			continue
		}
		t.Run(r.ID, func(t *testing.T) {
			records, err := modelcalls.ReadRecords(res.Store, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			var prevIn int64
			for i := range records {
				c := &records[i]
				var req struct {
					Model string `json:"model"`
				}
				if err := json.Unmarshal(c.Request, &req); err != nil {
					t.Fatalf("call %d request: %v", i, err)
				}
				in, tools := view.ParseRequest(c.Request)
				out, errMsg := view.ParseResponse(c.Response)
				all := partsText(in) + partsText(out) + errMsg + deref(c.ReasoningContent)
				for _, w := range staleTopics {
					if strings.Contains(all, w) {
						t.Errorf("call %d mentions %q, a topic of another conversation", i, w)
					}
				}
				if !strings.Contains(partsText(in, "text"), "weather in Tokyo") {
					t.Errorf("call %d: the request does not ask for the weather in Tokyo: %q", i, partsText(in, "text"))
				}
				if c.StatusCode != nil && *c.StatusCode != 200 {
					// The 429: the error names the model the request asked for.
					if !strings.Contains(errMsg, "model: "+req.Model) {
						t.Errorf("call %d: error %q does not name the requested model %s", i, errMsg, req.Model)
					}
					continue
				}
				if c.Model == nil || *c.Model != req.Model {
					t.Errorf("call %d: answered by model %q, the request asks for %s", i, deref(c.Model), req.Model)
				}
				switch i {
				case 0:
					if len(c.ToolCalls) != 1 {
						t.Fatalf("call 0: %d tool calls, want 1", len(c.ToolCalls))
					}
					tc := c.ToolCalls[0]
					var args map[string]any
					if err := json.Unmarshal(tc.Arguments, &args); err != nil || len(args) != 1 || args["city"] != "Tokyo" {
						t.Errorf("call 0: tool call arguments %s, want the city Tokyo", tc.Arguments)
					}
					if tc.Name == nil || !slices.Contains(tools, *tc.Name) {
						t.Errorf("call 0: tool call %q is not one of the offered tools %v", deref(tc.Name), tools)
					}
					for _, m := range out {
						for _, p := range m.Parts {
							// The viewer's stand-in for reasoning the provider encrypted is no text.
							if (p.Kind == "text" || p.Kind == "reasoning") && p.Text != "(encrypted reasoning)" && !strings.Contains(p.Text, "Tokyo") {
								t.Errorf("call 0: %s %q is not about Tokyo", p.Kind, p.Text)
							}
						}
					}
				case 1:
					first := records[0].ToolCalls[0]
					var result *view.Part
					for _, m := range in {
						for j := range m.Parts {
							if m.Parts[j].Kind == "tool_result" {
								result = &m.Parts[j]
							}
						}
					}
					if result == nil || result.CallID != deref(first.CallID) || result.Text != weatherTool(first.Arguments) {
						t.Errorf("call 1: tool result %+v, want the result of call 0's %s %s", result, deref(first.CallID), first.Arguments)
					}
					if len(c.ToolCalls) != 0 {
						t.Errorf("call 1: %d tool calls, want the answer", len(c.ToolCalls))
					}
					answer := partsText(out, "text")
					for _, w := range []string{"Tokyo", "22", "clear"} {
						if !strings.Contains(answer, w) {
							t.Errorf("call 1: the answer %q lacks %q from the tool result", answer, w)
						}
					}
					if reasoning := partsText(out, "reasoning"); reasoning != "" && !strings.Contains(reasoning, "22 degrees") {
						t.Errorf("call 1: the reasoning %q is not about the tool result", reasoning)
					}
				}
				// Usage.
				if c.TokensIn == nil || c.TokensOut == nil || c.TokensTotal == nil {
					t.Fatalf("call %d: usage incomplete: in %v out %v total %v", i, c.TokensIn, c.TokensOut, c.TokensTotal)
				}
				tin, tout := *c.TokensIn, *c.TokensOut
				if *c.TokensTotal != tin+tout {
					t.Errorf("call %d: total %d != in %d + out %d", i, *c.TokensTotal, tin, tout)
				}
				if c.CachedTokens != nil && *c.CachedTokens > 0 && (i == 0 || *c.CachedTokens > prevIn) {
					t.Errorf("call %d: %d cached tokens, more than an earlier call of the rollout sent (%d)", i, *c.CachedTokens, prevIn)
				}
				visible := partsText(out, "text", "tool_call")
				hidden := tout
				if c.TokensReasoning != nil {
					if *c.TokensReasoning > tout {
						t.Errorf("call %d: reasoning %d > out %d", i, *c.TokensReasoning, tout)
					}
					hidden = tout - *c.TokensReasoning
					if shown := estTokens(partsText(out, "reasoning")); *c.TokensReasoning < shown/2 {
						t.Errorf("call %d: %d reasoning tokens for a reasoning text of about %d", i, *c.TokensReasoning, shown)
					}
				} else {
					visible += partsText(out, "reasoning") // Anthropic counts thinking in output_tokens only
				}
				if est := estTokens(visible); hidden < est/2 || hidden > 2*est+24 {
					t.Errorf("call %d: %d output tokens (reasoning aside) for about %d tokens of output %q", i, hidden, est, visible)
				}
				if est := estTokens(string(c.Request)); tin < estTokens(partsText(in)) || tin > 3*est+400 {
					t.Errorf("call %d: %d input tokens for a request of about %d", i, tin, est)
				}
				if i == 1 {
					added := estTokens(partsText(in)) - estTokens(partsText(mustParseRequest(records[0].Request)))
					if d := tin - prevIn; d < added/2 || d > 3*added+64 {
						t.Errorf("call 1: %d more input tokens than call 0, for about %d tokens added", d, added)
					}
				}
				prevIn = tin
			}
		})
	}
}

func mustParseRequest(req json.RawMessage) []view.Message {
	msgs, _ := view.ParseRequest(req)
	return msgs
}

func TestWeatherTool(t *testing.T) {
	for args, want := range map[string]string{
		`{"city": "Tokyo"}`: "Tokyo: 22 degrees Celsius, clear sky",
		`{"city":"Oslo"}`:   "no weather data for Oslo",
		`{}`:                `error: get_weather needs {"city": NAME}`,
		`not json`:          `error: get_weather needs {"city": NAME}`,
	} {
		if got := weatherTool(json.RawMessage(args)); got != want {
			t.Errorf("weatherTool(%s) = %q, want %q", args, got, want)
		}
	}
}
