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
}

// Decoder decodes a text/event-stream body fed to it in chunks of any size. The zero value is
// ready to use. A Decoder buffers only the current unfinished line and the fields of the current
// unfinished event; memory does not grow with the number of events. It is not safe for
// concurrent use.
type Decoder struct {
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
			d.line = append(d.line, chunk...)
			return
		}
		line := chunk[:i]
		if len(d.line) > 0 {
			d.line = append(d.line, line...)
			line = d.line
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
	}
}

// Flush ends the stream: an unterminated last line is processed as if it had ended, and an event
// that was started but not yet dispatched by a blank line is emitted (SPEC §7: at end of stream,
// an unterminated last event is parsed). The Decoder is then reset and may decode a new stream.
func (d *Decoder) Flush(emit func(Event)) {
	if len(d.line) > 0 {
		d.processLine(d.line, emit)
	}
	d.dispatch(emit)
	*d = Decoder{line: d.line[:0], data: d.data[:0]}
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
func (d *Decoder) processLine(line []byte, emit func(Event)) {
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
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
		d.pending = true
	case "event":
		if string(value) != d.typ { // keep the previous string when equal: no allocation
			d.typ = string(value)
		}
		d.pending = true
	case "id":
		if string(value) != d.id {
			d.id = string(value)
		}
		d.pending = true
	}
	// Other fields (retry and unknown names) are ignored, as the standard says.
}

// dispatch emits the current event, if any field started one, and clears it.
func (d *Decoder) dispatch(emit func(Event)) {
	if !d.pending {
		return
	}
	emit(Event{Type: d.typ, Data: string(d.data), HasData: d.hasData, ID: d.id})
	d.data = d.data[:0]
	d.typ, d.id = "", ""
	d.hasData, d.pending = false, false
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
