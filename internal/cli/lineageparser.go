package cli

import (
	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/view"
)

// lineage reads conversations with the viewer's parser, which lineage itself may not import (it
// sits below the merge). Re-point this when the dialect package owns the parser.
func init() {
	lineage.Parser = lineage.ConversationParser{
		Request: func(req []byte) ([]lineage.Message, []string) {
			msgs, tools := view.ParseRequest(req)
			return lineageMessages(msgs), tools
		},
		Response: func(resp []byte) []lineage.Message {
			msgs, _ := view.ParseResponse(resp)
			return lineageMessages(msgs)
		},
	}
}

func lineageMessages(in []view.Message) []lineage.Message {
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
