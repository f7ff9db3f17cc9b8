package dialect

import (
	"encoding/json"

	"github.com/modelcalls/modelcalls/sse"
)

// Stream follows one streamed (text/event-stream) response of a dialect as its body passes
// through the gateway: it decodes the chunks into events (package sse), detects the first
// terminal event (TerminalOf) and reassembles the response incrementally (reference §7.3
// Anthropic, §7.4 Responses, §7.5 Chat, with the SPEC §7 differences). It keeps the decoder's
// unfinished line and event plus what the reconstruction needs (text and argument fragments,
// output items, the latest response envelope), never the body.
//
// Events after the first terminal event are still decoded and folded into the reconstruction
// (NeMo Gym reconstructs from the whole body), but they never change Terminal.
//
// A Stream is not safe for concurrent use.
type Stream struct {
	d      Dialect
	dec    sse.Decoder
	emit   func(sse.Event) // s.onEvent, bound once so Write does not allocate a closure
	term   Terminal
	hit    bool // the first terminal event was seen during the current Write or End
	r      reassembler
	events int
}

// reassembler folds decoded event payloads (JSON objects) into a reconstructed response.
type reassembler interface {
	add(obj []byte)
	// response returns the reconstruction as compact JSON, or nil when there is nothing to
	// rebuild. It must not change the state: it may be called again after more events.
	response() []byte
}

// NewStream returns a Stream for dialect d. A value other than the three dialects is
// reassembled as chat (as NeMo Gym does, reference §7.2) and never sees a terminal event.
func NewStream(d Dialect) *Stream {
	s := &Stream{d: d}
	switch d {
	case Messages:
		s.r = &messagesState{}
	case Responses:
		s.r = &responsesState{}
	default:
		s.r = &chatState{}
	}
	s.emit = s.onEvent
	return s
}

// Dialect returns the dialect the Stream was made for.
func (s *Stream) Dialect() Dialect { return s.d }

// Write feeds the next chunk of the body. It reports true iff this chunk completed the first
// terminal event of the stream (the chunk that held the event's dispatching blank line); the
// gateway holds exactly that chunk until the capture line is durable (reference §6.2). It
// reports true at most once per Stream, counting End.
func (s *Stream) Write(chunk []byte) (terminalInChunk bool) {
	s.hit = false
	s.dec.Feed(chunk, s.emit)
	return s.hit
}

// End tells the Stream the body is over. An unterminated last event (no blank line after it, as
// some real recordings end) is decoded for reassembly and terminal detection (SPEC §7); End
// reports true iff that event was the first terminal event. Call End once, after the last Write.
func (s *Stream) End() (terminalInFlush bool) {
	s.hit = false
	s.dec.Flush(s.emit)
	return s.hit
}

// Terminal returns the kind of the first terminal event seen so far, TerminalNone if none.
func (s *Stream) Terminal() Terminal { return s.term }

// Events returns the number of events decoded so far (comments and empty blocks are not
// events).
func (s *Stream) Events() int { return s.events }

// Response returns the reconstructed response object as compact JSON, or nil when the events
// seen so far give nothing to reconstruct (reference §7.2–§7.5: no events, no message or
// content block, no choice, no response object). It may be called at any time, also before the
// stream ends (partial reconstruction of a truncated or cancelled stream), and does not change
// the Stream.
func (s *Stream) Response() json.RawMessage {
	if b := s.r.response(); b != nil {
		return json.RawMessage(b)
	}
	return nil
}

func (s *Stream) onEvent(ev sse.Event) {
	s.events++
	obj := payload(ev.HasData, ev.Data)
	if s.term == TerminalNone {
		if t := s.d.terminalOf(ev, obj); t != TerminalNone {
			s.term, s.hit = t, true
		}
	}
	if obj != nil {
		s.r.add(obj)
	}
}
