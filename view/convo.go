package view

import (
	"github.com/modelcalls/modelcalls/dialect"
)

// Part, Message and Conversation are the conversation of one call as package dialect reads it
// (dialect.ParseRequest, dialect.ParseResponse); the viewer adds Message.New (markNew).
type (
	Part         = dialect.Part
	Message      = dialect.Message
	Conversation = dialect.Conversation
)

// ParseRequest is dialect.ParseRequest: the messages and tool names of a request of any dialect.
func ParseRequest(req []byte) ([]Message, []string) { return dialect.ParseRequest(req) }

// ParseResponse is dialect.ParseResponse: the messages of a response, or its error message.
func ParseResponse(resp []byte) ([]Message, string) { return dialect.ParseResponse(resp) }

// partKey identifies one part of a message for telling new from resent: the message's role, the
// part's kind, text, name, call id and arguments (JSON arguments compared by value, so key order and
// spacing do not matter).
func partKey(role string, p *Part) string {
	return role + "\x00" + p.Kind + "\x00" + p.Text + "\x00" + p.Name + "\x00" + p.CallID + "\x00" + dialect.CanonicalArguments(p.Arguments)
}

// markNew sets Message.New on each call's input: a message is new on a call when one of its parts
// appeared in no earlier call (earlier in the order given), neither in its request nor in its
// response output. Matching parts rather than whole messages keeps a resent turn history when the
// harness drops some of its blocks (thinking, text beside a tool call) or regroups Responses items.
// A message without parts is new unless an earlier call had an empty message of that role. A repeated identical message (the same user
// text twice) counts as history.
func markNew(convs []*Conversation) {
	seen := map[string]bool{}
	for _, c := range convs {
		if c == nil {
			continue
		}
		for i := range c.Input {
			m := &c.Input[i]
			m.New = len(m.Parts) == 0 && !seen[m.Role+"\x00(empty)"]
			for j := range m.Parts {
				if !seen[partKey(m.Role, &m.Parts[j])] {
					m.New = true
				}
			}
		}
		for i := range c.Output {
			c.Output[i].New = true
		}
		for _, list := range [][]Message{c.Input, c.Output} {
			for i := range list {
				if len(list[i].Parts) == 0 {
					seen[list[i].Role+"\x00(empty)"] = true
				}
				for j := range list[i].Parts {
					seen[partKey(list[i].Role, &list[i].Parts[j])] = true
				}
			}
		}
	}
}
