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

// Field is one request member with its JSON value.
type Field struct {
	Name  string
	Value string
}

// RequestFields returns the members a Chat Completions request ("chat" dialect) needs for the
// engine to return the prompt ids, the generated ids and one logprob per generated token, in the
// order they are added; nil for another dialect (none of these engines returns ids on the
// Responses or Messages APIs) or no engine.
//
//   - vLLM: return_token_ids (prompt_token_ids and choices[].token_ids, streamed too) and logprobs
//     (vLLM's top_logprobs defaults to 0: the sampled token's logprob only).
//   - SGLang: return_input_ids_in_sglext and return_output_ids_in_sglext (sglext.input_ids and
//     sglext.output_ids, streamed in a last chunk; SGLang refuses return_token_ids on a streamed
//     chat call), and logprobs.
//   - llama-server: logprobs and top_logprobs 1 (0 would turn its logprobs off); each logprob
//     entry carries its token id. It returns no prompt ids: see the gateway's server render.
func (e Engine) RequestFields(dialect string) []Field {
	if dialect != "chat" {
		return nil
	}
	switch e {
	case EngineVLLM:
		return []Field{{"return_token_ids", "true"}, {"logprobs", "true"}}
	case EngineSGLang:
		return []Field{{"return_input_ids_in_sglext", "true"}, {"return_output_ids_in_sglext", "true"}, {"logprobs", "true"}}
	case EngineLlamaServer:
		return []Field{{"logprobs", "true"}, {"top_logprobs", "1"}}
	}
	return nil
}

// AddRequestFields returns body with each of e's RequestFields for dialect that the client did
// not set (a top-level member of that name, null included, counts as set) appended to the
// object, and the members it added as one compact JSON object ({} when the client had set them
// all). When body is not a JSON object, or the engine needs nothing on the dialect, it returns
// body itself and nil. The client's members and their bytes are kept as sent; the added members
// follow them.
func AddRequestFields(e Engine, dialect string, body []byte) (out, added []byte) {
	fields := e.RequestFields(dialect)
	if len(fields) == 0 {
		return body, nil
	}
	t := jsonscan.TrimWS(body)
	if !jsonscan.IsObject(t) || jsonscan.Validate(t) != nil {
		return body, nil
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
		}
		return true
	})
	if e == EngineLlamaServer && streams && tools {
		// llama-server answers a streamed call with tools and logprobs with 400 "logprobs is not
		// supported with tools + stream": asking would break the client's call, so nothing is
		// added (the prompt is still rendered) and the call reads without generated ids.
		return body, []byte("{}")
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
		return body, []byte("{}")
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
	return out, append(append([]byte{'{'}, add.Bytes()...), '}')
}

// nonEmptyArray reports whether the JSON value v is an array with at least one element.
func nonEmptyArray(v []byte) bool {
	v = jsonscan.TrimWS(v)
	return len(v) > 1 && v[0] == '[' && len(jsonscan.TrimWS(v[1:len(v)-1])) > 0
}
