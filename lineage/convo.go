package lineage

import "github.com/modelcalls/modelcalls/dialect"

// This file is the one place lineage reads conversations: it turns a request or response object
// into lineage's own messages through the dialects' conversation parser (package dialect), which
// tells the shapes apart by their keys. Re-pointing lineage at another parser changes only this
// file.

// parseRequest returns the context messages of a request object (system prompt first, then the
// messages or input items in request order) and the names of the tools it offers.
func parseRequest(req []byte) ([]Message, []string) {
	msgs, tools := dialect.ParseRequest(req)
	return convert(msgs), tools
}

// parseResponse returns the messages a response object answered (Chat choices, Responses output
// items, a Messages message, Gemini candidates).
func parseResponse(resp []byte) []Message {
	msgs, _ := dialect.ParseResponse(resp)
	return convert(msgs)
}

func convert(in []dialect.Message) []Message {
	if len(in) == 0 {
		return nil
	}
	out := make([]Message, len(in))
	for i, m := range in {
		out[i].Role = m.Role
		out[i].Parts = make([]Part, len(m.Parts))
		for j, p := range m.Parts {
			out[i].Parts[j] = Part{Kind: p.Kind, Text: p.Text, Name: p.Name, CallID: p.CallID, Arguments: p.Arguments}
		}
	}
	return out
}
