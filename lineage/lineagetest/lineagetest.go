// Package lineagetest gives tests of lineage and of what is built on it (samples, the merge) the
// conversation parser the command line gives lineage: the viewer's. Tests only.
package lineagetest

import (
	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/view"
)

// UseViewParser sets lineage.Parser to the viewer's conversation parser.
func UseViewParser() {
	lineage.Parser = lineage.ConversationParser{
		Request: func(req []byte) ([]lineage.Message, []string) {
			msgs, tools := view.ParseRequest(req)
			return convert(msgs), tools
		},
		Response: func(resp []byte) []lineage.Message {
			msgs, _ := view.ParseResponse(resp)
			return convert(msgs)
		},
	}
}

func convert(in []view.Message) []lineage.Message {
	if len(in) == 0 {
		return nil
	}
	out := make([]lineage.Message, len(in))
	for i, m := range in {
		out[i].Role = m.Role
		out[i].Parts = make([]lineage.Part, len(m.Parts))
		for j, p := range m.Parts {
			out[i].Parts[j] = lineage.Part{Kind: p.Kind, Text: p.Text, Name: p.Name, CallID: p.CallID, Arguments: p.Arguments}
		}
	}
	return out
}
