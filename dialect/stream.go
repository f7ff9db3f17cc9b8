package dialect

import (
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// Stream follows one streamed (text/event-stream) response of a dialect as its body passes
// through the gateway: it decodes the chunks into events (package sse), detects the first
// terminal event (TerminalOf) and reassembles the response incrementally, as NeMo Gym's stream
// reconstruction rebuilds each dialect, with the differences written on messagesState,
// responsesState and chatState (and SSE lines split only where the SSE standard splits them,
// never on U+2028 and the other breaks Python's splitlines adds). It keeps the decoder's
// unfinished line and event plus what the reconstruction needs (text and argument fragments,
// output items, the latest response envelope), never the body.
//
// Events after the first terminal event are still decoded and folded into the reconstruction
// (NeMo Gym reconstructs from the whole body), but they never change Terminal.
//
// A Stream is not safe for concurrent use.
type Stream struct {
	d         Dialect
	dec       sse.Decoder
	emit      func(*sse.RawEvent) // s.onEvent, bound once so Write does not allocate a closure
	term      Terminal
	hit       bool // the first terminal event was seen during the current Write or End
	r         reassembler
	sp        spill
	events    int
	truncated int    // events over the decoder's Max, left out of the reassembly
	lim       budget // the reassembly's element limit, and Stop
	// unstorable: an event held JSON the store cannot hold (a number overflowing a double, an
	// unpaired surrogate escape). Leaving it out would rebuild a different response (an earlier
	// envelope in place of the final one), so there is no reconstruction: response stays null and
	// the stream is kept as response_raw.
	unstorable bool
}

// reassembler folds decoded event payloads (JSON objects) into a reconstructed response.
type reassembler interface {
	add(obj []byte)
	// has reports whether there is anything to rebuild.
	has() bool
	// encode writes the reconstruction as compact JSON; only called when has. It must not change
	// the state: it may be called again after more events.
	encode(e *enc)
}

// entry returns the reassembler's state for index k of an indexed part (a chat choice, a
// Messages content block), creating the map and a zero state the first time k is seen; ok is false
// when k is new and lim refuses another element. The map holds only the indexes seen, so an index
// far beyond the others costs one entry.
func entry[V any](m *map[int64]*V, k int64, lim *budget) (v *V, ok bool) {
	if v = (*m)[k]; v != nil {
		return v, true
	}
	if !lim.take(1) {
		return nil, false
	}
	if *m == nil {
		*m = make(map[int64]*V)
	}
	v = new(V)
	(*m)[k] = v
	return v, true
}

// MaxElements is the most elements one Stream's reassembly creates: choices and tool calls
// (Chat), output items and their content and summary parts (Responses), content blocks
// (Messages), candidates and their parts (Gemini). Every element comes from bytes of the stream, so this bounds the reassembly's
// memory on top of its proportion to the bytes received; real streams stay far below it (a few
// choices, tens to hundreds of tool calls, items or blocks). Past it no element is created: what
// an event adds to the elements already there (text, arguments, a finish reason, the final
// envelope and usage) still applies, what would need a new one is left out, and OverLimit reports
// it (the gateway marks the line capture_too_large).
const MaxElements = 1 << 16

// maxPartGap is how many parts a Responses content or summary index may skip: parts below the
// index that the stream never announced are created (as {"type": <part type>}), at most this many
// for one event; an index further beyond the parts the item has is refused (the event is skipped
// and OverLimit reports it), so a small event cannot make the reassembly create thousands of
// empty parts.
const maxPartGap = 16

// budget is a Stream's limit on the elements its reassembly creates (MaxElements), shared by the
// Stream and its reassembler, and the flag Stop sets.
type budget struct {
	left    int         // elements that may still be created
	full    bool        // an element was refused at the limit
	refused int         // events skipped for an index far beyond what arrived (maxPartGap)
	stopped atomic.Bool // Stop was called
}

// take reports whether the reassembly may create n more elements, counting them; past the limit
// it refuses and records that, and after Stop it refuses.
func (b *budget) take(n int) bool {
	if b.stopped.Load() {
		return false
	}
	if n > b.left {
		b.full = true
		return false
	}
	b.left -= n
	return true
}

// done reports that the reassembly must not go on: Stop was called. A reassembler checks it
// between the elements of one event, so that a long event stops early.
func (b *budget) done() bool { return b.stopped.Load() }

// NewStream returns a Stream for dialect d. A value that is not Valid is reassembled as chat (as
// NeMo Gym's reconstruction does) and never sees a terminal event.
func NewStream(d Dialect) *Stream {
	s := &Stream{d: d}
	s.lim.left = MaxElements
	b, ok := registry[d]
	if !ok {
		b = chatDialect{}
	}
	s.r = b.reassembler(&s.sp, &s.lim)
	s.emit = s.onEvent
	return s
}

// Limit bounds the Stream's memory: an event larger than maxEvent bytes (0: no limit) is not
// held whole; it still counts for terminal detection (by its event type, or by the "type" member
// that starts its data) but is left out of the reassembly and counted by Truncated. Text the
// reassembly joins (content, reasoning, arguments) beyond spillAt bytes per text (0: never)
// moves to an unlinked temp file in dir ("" for the system temp dir) until Close. Call Limit
// before the first Write.
func (s *Stream) Limit(maxEvent, spillAt int, dir string) {
	s.dec.Max = maxEvent
	s.sp.threshold, s.sp.dir = spillAt, dir
}

// Stop ends the reassembly: later events are still decoded for terminal detection, but add
// nothing (the gateway stops keeping a capture at its size limit, and stops reassembling when the
// client has gone). Response then rebuilds what came before. Unlike the other methods, Stop may be
// called from another goroutine while Write or End runs: the event being reassembled then stops
// at its next element.
func (s *Stream) Stop() { s.lim.stopped.Store(true) }

// Truncated returns how many events were too large to reassemble (see Limit).
func (s *Stream) Truncated() int { return s.truncated }

// OverLimit reports whether the reassembly left part of the stream out for its limits: it reached
// MaxElements (and stopped), or an event named a Responses part index far beyond the parts that
// arrived (and was skipped). Response then rebuilds the rest; the gateway marks the line
// capture_too_large, as for an event too large to reassemble.
func (s *Stream) OverLimit() bool { return s.lim.full || s.lim.refused > 0 }

// Err reports a failure to spool reassembled text: the reconstruction is then incomplete and
// must not be stored.
func (s *Stream) Err() error { return s.sp.err }

// Close releases the temp files of spooled text. The Stream must not be used afterwards.
func (s *Stream) Close() { s.sp.close() }

// Dialect returns the dialect the Stream was made for.
func (s *Stream) Dialect() Dialect { return s.d }

// Write feeds the next chunk of the body. It reports true iff this chunk completed the first
// terminal event of the stream (the chunk that held the event's dispatching blank line); the
// gateway holds exactly that chunk until the capture line is durable, as NeMo Gym's capture
// middleware holds it. It reports true at most once per Stream, counting End.
func (s *Stream) Write(chunk []byte) (terminalInChunk bool) {
	s.hit = false
	s.dec.FeedRaw(chunk, s.emit)
	return s.hit
}

// End tells the Stream the body is over. An unterminated last event (no blank line after it, as
// some real recordings end) is decoded for reassembly and terminal detection too (NeMo Gym's
// terminal detection misses such an event and calls the stream truncated); End reports true iff
// that event was the first terminal event. Call End once, after the last Write.
func (s *Stream) End() (terminalInFlush bool) {
	s.hit = false
	s.dec.FlushRaw(s.emit)
	return s.hit
}

// Terminal returns the kind of the first terminal event seen so far, TerminalNone if none.
func (s *Stream) Terminal() Terminal { return s.term }

// Events returns the number of events decoded so far (comments and empty blocks are not
// events).
func (s *Stream) Events() int { return s.events }

// Response returns the reconstructed response object as compact JSON, or nil when the events
// seen so far give nothing to reconstruct (as in NeMo Gym's reconstruction: no events, no
// message or content block, no choice, no response object). It may be called at any time, also
// before the stream ends (partial reconstruction of a truncated or cancelled stream), and does
// not change the Stream.
func (s *Stream) Response() json.RawMessage {
	if !s.has() {
		return nil
	}
	var e enc
	s.r.encode(&e)
	return json.RawMessage(e.b)
}

// Summary returns what Response returns, except that a text that spilled to a temp file (see
// Limit) is cut to its first textBytes bytes (0: written as ""; a UTF-8 sequence the cut would
// split is left out whole): the ids, model, usage, finish reasons and tool-call names of a
// reconstruction, and the start of its long texts, in memory bounded by textBytes per spilled
// text, for consumers that need those and not the whole text (the gateway's access log line, live
// span export, which cuts content at SummaryTextBytes anyway). Nil when Response would be.
func (s *Stream) Summary(textBytes int) json.RawMessage {
	if !s.has() {
		return nil
	}
	e := enc{elide: true, elideAt: max(textBytes, 0)}
	s.r.encode(&e)
	return json.RawMessage(e.b)
}

// SummaryTextBytes is the length the gateway cuts spilled texts to for OnCaptured: 1 MiB and 4
// bytes, one UTF-8 sequence more than live span export carries of one text (1 MiB), so that the
// exporter's own cut falls where it falls on the whole text of the capture line.
const SummaryTextBytes = 1<<20 + utf8.UTFMax

// HasResponse reports whether Response would return an object.
func (s *Stream) HasResponse() bool { return s.has() }

func (s *Stream) has() bool { return !s.unstorable && s.r.has() }

// WriteResponse writes what Response returns to w (null when there is nothing to rebuild)
// without building it in memory: spooled text is streamed from its file. The JSON is compact,
// valid UTF-8 and nested less than jsonscan.MaxNesting deep.
func (s *Stream) WriteResponse(w io.Writer) error {
	var bp *[]byte
	select {
	case bp = <-encBufs:
	default:
		b := make([]byte, 0, encFlush+encFlush/4)
		bp = &b
	}
	e := enc{w: w, b: (*bp)[:0]}
	if s.has() {
		s.r.encode(&e)
	} else {
		e.raw("null")
	}
	e.flush()
	if cap(e.b) <= 2*encFlush {
		*bp = e.b[:0]
		select {
		case encBufs <- bp:
		default:
		}
	}
	return errors.Join(e.err, s.sp.err)
}

// encBufs recycles WriteResponse's buffers: one is about 40 KiB, written at every stream's
// terminal event, and allocating (and zeroing) it each time showed in the terminal event's hold.
// A small free list rather than a sync.Pool, which garbage collections empty between two streams'
// terminal events; it holds at most 8 (320 KiB).
var encBufs = make(chan *[]byte, 8)

func (s *Stream) onEvent(ev *sse.RawEvent) {
	s.events++
	if ev.Truncated {
		s.truncated++
		if s.term == TerminalNone {
			if t := s.d.terminalOfPrefix(ev); t != TerminalNone {
				s.term, s.hit = t, true
			}
		}
		return
	}
	obj := payload(ev.HasData, ev.Data)
	reassemble := !s.lim.done()
	if obj == nil && ev.HasData && reassemble && unrepresentable(ev.Data) {
		s.unstorable = true
	}
	if s.term == TerminalNone {
		if t := s.d.terminalOf(ev.Type, ev.HasData, ev.Data, obj); t != TerminalNone {
			s.term, s.hit = t, true
		}
	}
	if obj != nil && reassemble {
		s.r.add(obj)
	}
}

// unrepresentable reports whether an event's data, refused by payload, is a JSON object refused
// only for a value the store cannot hold (jsonscan.SyntaxError.Unrepresentable). Rare: called only
// for data payload refused.
func unrepresentable(data []byte) bool {
	if !utf8.Valid(data) {
		data = replaceInvalidUTF8(data) // as payload does, so the first refusal is the same
	}
	i := jsonscan.SkipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	var se *jsonscan.SyntaxError
	return errors.As(jsonscan.Validate(data), &se) && se.Unrepresentable()
}
