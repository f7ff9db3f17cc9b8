// Package sse owns the decoding of a text/event-stream body into events. It knows the wire
// format only (the WHATWG "server-sent events" line and field rules) and nothing about which
// provider sent the stream; the meaning of an event (terminal or not, what it adds to a reply)
// belongs to package dialect.
//
// The Decoder is incremental: it is fed the body chunk by chunk as it passes through the gateway
// and keeps only the current unfinished line and the current unfinished event. Parse decodes a
// whole body held in memory.
//
// Where this package follows NeMo Gym's stream scanner and event parser rather than the letter of
// the SSE standard:
//   - a field value has all leading whitespace removed after the colon (Python str.lstrip: ASCII
//     and Unicode white space), not just one space;
//   - an event is dispatched on a blank line when it carried any event, data or id field, even
//     without data (an "event: message_stop" block with no data line is still an event);
//   - the event type is "" when no event field was given (not "message");
//   - the id is the event's own id field; it is not carried over to later events.
//
// As the standard says (and unlike NeMo Gym's Python str.splitlines), lines end at CRLF, LF or a
// lone CR and nowhere else; a CR at the end of one chunk followed by an LF at the start of the next
// is one line break. A UTF-8 byte order mark at the very start of the stream is skipped.
package sse
