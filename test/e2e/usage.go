package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
)

// Observed is what the tests read, on their own, from one upstream response body: the answer's
// id, model and usage as the upstream reported them. Nil fields were not reported.
type Observed struct {
	ResponseID *string
	Model      *string
	TokensIn   *int // whole prompt: input_tokens|prompt_tokens, plus Anthropic cache_read/cache_creation; Gemini promptTokenCount
	TokensOut  *int // output_tokens|completion_tokens; Gemini candidatesTokenCount + thoughtsTokenCount
	TokensAll  *int // total_tokens (Gemini totalTokenCount), else in+out
	Cached     *int // cached prompt tokens: OpenAI *_tokens_details.cached_tokens, Anthropic cache_read_input_tokens, Gemini cachedContentTokenCount
}

// Observe reads an upstream response body of the given dialect: a JSON object, or an SSE
// stream (detected by its content). It is deliberately simple and independent of the
// product's parsers: the last usage wins (Chat: the last chunk with a non-null usage;
// Responses: the terminal event's response.usage; Messages: message_start usage overridden
// field by field by non-null message_delta usage; Gemini: the last event's usageMetadata, its id
// and model from responseId and modelVersion).
func Observe(dialect string, body []byte) Observed {
	var obs Observed
	usage := map[string]any{}
	trimmed := bytes.TrimSpace(body)
	if dialect == DialectGemini {
		return observeGemini(trimmed)
	}
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var obj map[string]any
		if json.Unmarshal(trimmed, &obj) == nil {
			obs.ResponseID, obs.Model = str(obj["id"]), str(obj["model"])
			if u, ok := obj["usage"].(map[string]any); ok {
				usage = u
			}
		}
		return fillUsage(obs, usage)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &ev) != nil {
			continue // [DONE], keep-alives
		}
		switch dialect {
		case DialectChat, DialectCompletions:
			setOnce(&obs.ResponseID, str(ev["id"]))
			setOnce(&obs.Model, str(ev["model"]))
			if u, ok := ev["usage"].(map[string]any); ok {
				usage = u
			}
		case DialectResponses:
			resp, _ := ev["response"].(map[string]any)
			if resp == nil {
				continue
			}
			setOnce(&obs.ResponseID, str(resp["id"]))
			setOnce(&obs.Model, str(resp["model"]))
			switch ev["type"] {
			case "response.completed", "response.incomplete", "response.failed":
				if u, ok := resp["usage"].(map[string]any); ok {
					usage = u
				}
			}
		case DialectMessages:
			switch ev["type"] {
			case "message_start":
				msg, _ := ev["message"].(map[string]any)
				if msg == nil {
					continue
				}
				setOnce(&obs.ResponseID, str(msg["id"]))
				setOnce(&obs.Model, str(msg["model"]))
				if u, ok := msg["usage"].(map[string]any); ok {
					for k, v := range u {
						usage[k] = v
					}
				}
			case "message_delta":
				if u, ok := ev["usage"].(map[string]any); ok {
					for k, v := range u {
						if v != nil {
							usage[k] = v
						}
					}
				}
			}
		}
	}
	return fillUsage(obs, usage)
}

// observeGemini reads a Gemini body: one GenerateContentResponse, or an SSE stream of them.
func observeGemini(body []byte) Observed {
	var obs Observed
	var last map[string]any
	take := func(obj map[string]any) {
		if id := str(obj["responseId"]); id != nil {
			obs.ResponseID = id
		}
		if m := str(obj["modelVersion"]); m != nil {
			obs.Model = m
		}
		if u, ok := obj["usageMetadata"].(map[string]any); ok {
			last = u
		}
	}
	if len(body) > 0 && body[0] == '{' {
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil {
			take(obj)
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data:")
			var obj map[string]any
			if ok && json.Unmarshal([]byte(strings.TrimSpace(data)), &obj) == nil {
				take(obj)
			}
		}
	}
	if last != nil {
		obs.TokensIn = intOf(last["promptTokenCount"])
		cand, thoughts := intOf(last["candidatesTokenCount"]), intOf(last["thoughtsTokenCount"])
		if cand != nil || thoughts != nil {
			out := 0
			for _, p := range []*int{cand, thoughts} {
				if p != nil {
					out += *p
				}
			}
			obs.TokensOut = &out
		}
		obs.TokensAll = intOf(last["totalTokenCount"])
		obs.Cached = intOf(last["cachedContentTokenCount"])
	}
	return obs
}

func fillUsage(obs Observed, u map[string]any) Observed {
	obs.TokensIn = firstInt(u["input_tokens"], u["prompt_tokens"])
	obs.TokensOut = firstInt(u["output_tokens"], u["completion_tokens"])
	read, creation := intOf(u["cache_read_input_tokens"]), intOf(u["cache_creation_input_tokens"])
	if _, anthropicShape := u["input_tokens"]; anthropicShape && (read != nil || creation != nil) {
		in := 0
		if obs.TokensIn != nil {
			in = *obs.TokensIn
		}
		if read != nil {
			in += *read
		}
		if creation != nil {
			in += *creation
		}
		obs.TokensIn = &in
	}
	obs.TokensAll = intOf(u["total_tokens"])
	if obs.TokensAll == nil && obs.TokensIn != nil && obs.TokensOut != nil {
		t := *obs.TokensIn + *obs.TokensOut
		obs.TokensAll = &t
	}
	for _, group := range []string{"prompt_tokens_details", "input_tokens_details"} {
		if g, ok := u[group].(map[string]any); ok && obs.Cached == nil {
			obs.Cached = intOf(g["cached_tokens"])
		}
	}
	if obs.Cached == nil {
		obs.Cached = read
	}
	return obs
}

func str(v any) *string {
	if s, ok := v.(string); ok {
		return &s
	}
	return nil
}

func setOnce(dst **string, v *string) {
	if *dst == nil && v != nil && *v != "" {
		*dst = v
	}
}

// intOf returns a JSON number that is a non-negative whole number, else nil.
func intOf(v any) *int {
	f, ok := v.(float64)
	if !ok || f < 0 || f != float64(int(f)) {
		return nil
	}
	i := int(f)
	return &i
}

func firstInt(vs ...any) *int {
	for _, v := range vs {
		if i := intOf(v); i != nil {
			return i
		}
	}
	return nil
}
