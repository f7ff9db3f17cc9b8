package lineage

// This file is the one place lineage reads conversations: it turns a request or response object
// into lineage's own messages through the conversation parser of the dialects. Re-pointing lineage
// at another parser changes only this file.
//
// The parser is the program's to give (ConversationParser): lineage sits below the merge and may
// not import the viewer, whose package holds the parser until the dialect package owns it.

// ConversationParser reads the messages of a request object (system prompt first, then the
// messages or input items in request order) and the names of the tools it offers, and the messages
// a response object answered (Chat choices, Responses output items, a Messages message). It must
// accept any bytes (nil for what it cannot read).
type ConversationParser struct {
	Request  func(req []byte) ([]Message, []string)
	Response func(resp []byte) []Message
}

// Parser is the conversation parser lineage uses; a program sets it once, before deriving any
// lineage. With no parser every call has no messages, and only declared ids, previous_response_id
// and token ids place calls.
var Parser ConversationParser

// parseRequest returns the context messages of a request object and the tool names it offers.
func parseRequest(req []byte) ([]Message, []string) {
	if Parser.Request == nil {
		return nil, nil
	}
	return Parser.Request(req)
}

// parseResponse returns the messages a response object answered.
func parseResponse(resp []byte) []Message {
	if Parser.Response == nil {
		return nil
	}
	return Parser.Response(resp)
}
