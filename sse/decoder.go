package sse

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the value of the event's "event:" field (the last one when there are several), ""
	// when the event had none.
	Type string
	// Data is the event's "data:" field values joined with "\n", in order.
	Data string
	// HasData reports whether the event had at least one "data:" field (Data may still be "").
	HasData bool
	// ID is the value of the event's "id:" field, "" when it had none.
	ID string
	// Truncated reports an event larger than the Decoder's Max: Data then holds only the first
	// PrefixBytes of the event's data, and the event must not be taken for the whole.
	Truncated bool
}

// RawEvent is an Event whose Data aliases the Decoder's buffer: valid only until the emit
// function returns, for consumers that parse the data in place instead of keeping it.
type RawEvent struct {
	Type      string
	Data      []byte
	HasData   bool
	ID        string
	Truncated bool
}

// PrefixBytes is how much of an over-long line or event a Decoder with a Max keeps: enough for
// the field name and the start of a JSON payload (its "type" member, for terminal detection).
const PrefixBytes = 4 << 10

// Decoder decodes a text/event-stream body fed to it in chunks of any size. The zero value is
// ready to use. A Decoder buffers only the current unfinished line and the fields of the current
// unfinished event; memory does not grow with the number of events. With Max set, it does not
// grow with the size of a line or an event either: a line or an event's data longer than Max
// bytes is cut to its first PrefixBytes and the event is emitted with Truncated set. It is not
// safe for concurrent use.
type Decoder struct {
	// Max is the largest line, and the largest data of one event, buffered whole; 0 means no
	// limit. An upstream that sends hundreds of MiB without a line break costs at most Max bytes.
	Max int

	ev       RawEvent // the event being emitted (a field, so emitting does not allocate)
	lineOver bool     // the current line passed Max: only its prefix is kept, the rest is dropped
	over     bool     // the current event's data passed Max (or held an over-long line)

	line    []byte // bytes of the current line not yet terminated
	data    []byte // data field values of the current event, joined with '\n'
	typ     string // event field of the current event
	id      string // id field of the current event
	hasData bool   // the current event has at least one data field
	pending bool   // the current event has at least one event, data or id field
	skipLF  bool   // the previous chunk ended in CR: an LF starting the next chunk ends no line
	started bool   // the first line has been seen (a byte order mark is only skipped there)
}

// Feed decodes chunk, calling emit for every event that chunk completes, in stream order. Bytes
// after the last line break are kept until the next Feed or Flush. The Event's strings are
// copies: emit may keep them.
func (d *Decoder) Feed(chunk []byte, emit func(Event)) {
	d.FeedRaw(chunk, func(ev *RawEvent) { emit(ev.event()) })
}

func (ev *RawEvent) event() Event {
	return Event{Type: ev.Type, Data: string(ev.Data), HasData: ev.HasData, ID: ev.ID, Truncated: ev.Truncated}
}

// FeedRaw is Feed without the copy of each event's data: the RawEvent and its Data are valid
// only while emit runs.
func (d *Decoder) FeedRaw(chunk []byte, emit func(*RawEvent)) {
	for len(chunk) > 0 {
		if d.skipLF {
			d.skipLF = false
			if chunk[0] == '\n' {
				chunk = chunk[1:]
				continue
			}
		}
		i := indexLineBreak(chunk)
		if i < 0 {
			d.appendLine(chunk)
			return
		}
		line := chunk[:i]
		if len(d.line) > 0 || d.lineOver {
			d.appendLine(line)
			line = d.line
		} else if d.Max > 0 && len(line) > d.Max {
			d.lineOver = true
			line = line[:min(len(line), PrefixBytes)]
		}
		if chunk[i] == '\r' {
			if i+1 < len(chunk) {
				if chunk[i+1] == '\n' {
					i++
				}
			} else {
				d.skipLF = true
			}
		}
		chunk = chunk[i+1:]
		d.processLine(line, emit)
		d.line = d.line[:0]
		d.lineOver = false
	}
}

// appendLine adds p to the unfinished line, keeping only its prefix once it passes Max.
func (d *Decoder) appendLine(p []byte) { d.line = appendCapped(d.line, p, d.Max, &d.lineOver) }

// appendCapped appends p to buf while buf stays within limit bytes (0: none). Once it would
// pass limit, *over is set and buf keeps only its first PrefixBytes from then on; the big buffer
// is dropped for a small one, so memory goes back to the prefix.
func appendCapped(buf, p []byte, limit int, over *bool) []byte {
	if !*over {
		if limit <= 0 || len(buf)+len(p) <= limit {
			return append(buf, p...)
		}
		buf = append(make([]byte, 0, PrefixBytes), buf[:min(len(buf), PrefixBytes)]...)
		*over = true
	}
	if room := PrefixBytes - len(buf); room > 0 {
		buf = append(buf, p[:min(room, len(p))]...)
	}
	return buf
}

// Flush ends the stream: an unterminated last line is processed as if it had ended, and an event
// that was started but not yet dispatched by a blank line is emitted (so a final event without its
// blank line still counts for reassembly and terminal detection; NeMo Gym's terminal scan misses
// it and records stream_truncated). The Decoder is then reset and may decode a new stream.
func (d *Decoder) Flush(emit func(Event)) {
	d.FlushRaw(func(ev *RawEvent) { emit(ev.event()) })
}

// FlushRaw is Flush for FeedRaw's callers.
func (d *Decoder) FlushRaw(emit func(*RawEvent)) {
	if len(d.line) > 0 {
		d.processLine(d.line, emit)
	}
	d.dispatch(emit)
	*d = Decoder{Max: d.Max, line: d.line[:0], data: d.data[:0]}
}

// Parse decodes a whole body: Feed followed by Flush. It returns nil when the body holds no event.
func Parse(body []byte) []Event {
	var d Decoder
	var events []Event
	emit := func(ev Event) { events = append(events, ev) }
	d.Feed(body, emit)
	d.Flush(emit)
	return events
}

// indexLineBreak returns the index of the first CR or LF in b, or -1.
func indexLineBreak(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// processLine interprets one complete line (without its line break).
func (d *Decoder) processLine(line []byte, emit func(*RawEvent)) {
	if !d.started {
		d.started = true
		line = bytes.TrimPrefix(line, utf8BOM)
	}
	if len(line) == 0 {
		d.dispatch(emit)
		return
	}
	if line[0] == ':' {
		return // comment
	}
	field, value := line, []byte(nil)
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		field, value = line[:c], trimLeftSpace(line[c+1:])
	}
	switch string(field) {
	case "data":
		if d.lineOver {
			d.over = true
		}
		if d.hasData {
			d.appendData([]byte{'\n'})
		}
		d.appendData(value)
		d.hasData = true
		d.pending = true
	case "event":
		if d.lineOver {
			d.over = true
		}
		if string(value) != d.typ { // keep the previous string when equal: no allocation
			d.typ = string(value)
		}
		d.pending = true
	case "id":
		if d.lineOver {
			d.over = true
		}
		if string(value) != d.id {
			d.id = string(value)
		}
		d.pending = true
	}
	// Other fields (retry and unknown names) are ignored, as the standard says.
}

// appendData adds p to the current event's data, keeping only its prefix once it passes Max.
func (d *Decoder) appendData(p []byte) { d.data = appendCapped(d.data, p, d.Max, &d.over) }

// dispatch emits the current event, if any field started one, and clears it.
func (d *Decoder) dispatch(emit func(*RawEvent)) {
	if !d.pending {
		return
	}
	d.ev = RawEvent{Type: d.typ, Data: d.data, HasData: d.hasData, ID: d.id, Truncated: d.over}
	emit(&d.ev)
	d.ev = RawEvent{}
	d.data = d.data[:0]
	d.typ, d.id = "", ""
	d.hasData, d.pending, d.over = false, false, false
}

// trimLeftSpace removes leading white space as Python's str.lstrip does: ASCII white space, the
// separators U+001C..U+001F, and every Unicode white space character. Invalid UTF-8 is not white
// space.
func trimLeftSpace(b []byte) []byte {
	for len(b) > 0 {
		c := b[0]
		if c < utf8.RuneSelf {
			if c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) {
				b = b[1:]
				continue
			}
			return b
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError || !unicode.IsSpace(r) {
			return b
		}
		b = b[size:]
	}
	return b
}
