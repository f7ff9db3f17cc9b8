package tokens

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Engine names an inference server whose token ids and logprobs a gateway can ask for.
type Engine string

// The engines a request can be prepared for.
const (
	EngineVLLM        Engine = "vllm"
	EngineSGLang      Engine = "sglang"
	EngineLlamaServer Engine = "llama-server"
)

// Engines lists the engines in the order a usage message names them.
var Engines = []Engine{EngineVLLM, EngineSGLang, EngineLlamaServer}

// ParseEngine returns the Engine named s ("" is no engine).
func ParseEngine(s string) (Engine, error) {
	for _, e := range Engines {
		if string(e) == s {
			return e, nil
		}
	}
	if s == "" {
		return "", nil
	}
	names := make([]string, len(Engines))
	for i, e := range Engines {
		names[i] = string(e)
	}
	return "", fmt.Errorf("unknown engine %q (known: %s)", s, strings.Join(names, ", "))
}

// Field is one request member with its JSON value. Aliases are other member names the engine
// reads for the same setting: a client that set one of them has set the field.
type Field struct {
	Name    string
	Value   string
	Aliases []string
}

// NotAsked says why the gateway deliberately asked the engine for nothing on a request it asks on
// otherwise; it is the capture line's token_capture.not_asked value, and reads as a finding.
type NotAsked string

// NotAskedStreamWithTools: llama-server answers a streamed Chat request that has tools and asks
// for logprobs with 400 "logprobs is not supported with tools + stream", and its streamed chat
// chunks carry no generated ids either; so the gateway adds nothing, and the call has no
// generated ids (the finding FindingNotAskedStreamWithTools).
const NotAskedStreamWithTools NotAsked = "stream_with_tools"

// NotAskedRequestEncoded: the client sent the request compressed (a Content-Encoding); the
// gateway forwards such a body as sent rather than decode, edit and encode it again, so it adds
// nothing and renders no prompt (the finding FindingNotAsked names why).
const NotAskedRequestEncoded NotAsked = "request_encoded"

// RequestFields returns the members a request of dialect ("chat" or "completions") needs for the
// engine to return the prompt ids, the generated ids and one logprob per generated token, in the
// order they are added; nil for another dialect (none of these engines returns ids on the
// Responses or Messages APIs) or no engine.
//
// Chat Completions:
//   - vLLM: return_token_ids (prompt_token_ids and choices[].token_ids, streamed too) and logprobs
//     (vLLM's top_logprobs defaults to 0: the sampled token's logprob only).
//   - SGLang: return_input_ids_in_sglext and return_output_ids_in_sglext (sglext.input_ids and
//     sglext.output_ids, streamed in a last chunk; SGLang refuses return_token_ids on a streamed
//     chat call), and logprobs.
//   - llama-server: logprobs and top_logprobs 1 (0 would turn its logprobs off); each logprob
//     entry carries its token id. It returns no prompt ids: see the gateway's server render.
//
// Completions (the legacy API, whose logprobs is the number of alternatives per position):
//   - vLLM and SGLang: return_token_ids (choices[].prompt_token_ids and choices[].token_ids,
//     streamed too) and logprobs 0 (the legacy {tokens, token_logprobs, top_logprobs} of the
//     sampled token only).
//   - llama-server: logprobs 1 (its n_probs; 0 turns logprobs off, and a client's own n_probs
//     wins), giving logprobs.content[] entries with ids as on Chat.
func (e Engine) RequestFields(dialect string) []Field {
	switch dialect {
	case "chat":
		switch e {
		case EngineVLLM:
			return []Field{{Name: "return_token_ids", Value: "true"}, {Name: "logprobs", Value: "true"}}
		case EngineSGLang:
			return []Field{{Name: "return_input_ids_in_sglext", Value: "true"},
				{Name: "return_output_ids_in_sglext", Value: "true"}, {Name: "logprobs", Value: "true"}}
		case EngineLlamaServer:
			return []Field{{Name: "logprobs", Value: "true"}, {Name: "top_logprobs", Value: "1"}}
		}
	case "completions":
		switch e {
		case EngineVLLM, EngineSGLang:
			return []Field{{Name: "return_token_ids", Value: "true"}, {Name: "logprobs", Value: "0"}}
		case EngineLlamaServer:
			return []Field{{Name: "logprobs", Value: "1", Aliases: []string{"n_probs"}}}
		}
	}
	return nil
}

// AddRequestFields returns body with each of e's RequestFields for dialect that the client did
// not set (a top-level member of that name or an alias, null included, counts as set) appended to
// the object, and the members it added as one compact JSON object ({} when the client had set
// them all). When body is not a JSON object, or the engine needs nothing on the dialect, it
// returns body itself and nil. The client's members and their bytes are kept as sent; the added
// members follow them.
//
// When asking would break the call, it adds nothing, returns body, {} and why (not is
// NotAskedStreamWithTools for a streamed llama-server Chat request with tools); not is "" when it
// asked.
func AddRequestFields(e Engine, dialect string, body []byte) (out, added []byte, not NotAsked) {
	fields := e.RequestFields(dialect)
	if len(fields) == 0 {
		return body, nil, ""
	}
	t := jsonscan.TrimWS(body)
	if !jsonscan.IsObject(t) || jsonscan.Validate(t) != nil {
		return body, nil, ""
	}
	set := make([]bool, len(fields))
	members := 0
	streams, tools := false, false
	jsonscan.EachMember(t, func(k, v []byte) bool {
		members++
		if jsonscan.KeyIs(k, "stream") {
			streams = string(jsonscan.TrimWS(v)) == "true"
		}
		if jsonscan.KeyIs(k, "tools") {
			tools = nonEmptyArray(v)
		}
		for i, f := range fields {
			if jsonscan.KeyIs(k, f.Name) {
				set[i] = true
			}
			for _, a := range f.Aliases {
				if jsonscan.KeyIs(k, a) {
					set[i] = true
				}
			}
		}
		return true
	})
	if e == EngineLlamaServer && dialect == "chat" && streams && tools {
		// Asking would turn the client's call into a 400; nothing is added (the prompt is still
		// rendered) and the line says why.
		return body, []byte("{}"), NotAskedStreamWithTools
	}
	var add bytes.Buffer
	for i, f := range fields {
		if set[i] {
			continue
		}
		if add.Len() > 0 {
			add.WriteByte(',')
		}
		fmt.Fprintf(&add, "%q:%s", f.Name, f.Value)
	}
	if add.Len() == 0 {
		return body, []byte("{}"), ""
	}
	// The client's leading white space is kept; the object's own closing brace is the last byte.
	t = body[:len(body)-len(bytes.TrimLeft(body, " \t\r\n"))+len(t)]
	out = make([]byte, 0, len(t)+add.Len()+1)
	out = append(out, t[:len(t)-1]...)
	if members > 0 {
		out = append(out, ',')
	}
	out = append(out, add.Bytes()...)
	out = append(out, '}')
	return out, append(append([]byte{'{'}, add.Bytes()...), '}'), ""
}

// nonEmptyArray reports whether the JSON value v is an array with at least one element.
func nonEmptyArray(v []byte) bool {
	v = jsonscan.TrimWS(v)
	return len(v) > 1 && v[0] == '[' && len(jsonscan.TrimWS(v[1:len(v)-1])) > 0
}
