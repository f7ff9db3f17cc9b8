package otelexport

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxBodyExcerpt is the most bytes of an endpoint's response body an export error keeps.
const MaxBodyExcerpt = 100

// briefError is an export error whose text holds at most a short single-line excerpt of the
// response body the endpoint answered with. The OTLP/HTTP exporters put the whole body into their
// error ("failed to send to URL: 501 Not Implemented (body: <!DOCTYPE HTML>..."), which for a
// server that is not an OTLP receiver is a whole HTML page over many lines. Unwrap gives the
// exporter's error, so errors.Is and errors.As see through it.
type briefError struct {
	err  error
	text string
}

func (e *briefError) Error() string { return e.text }
func (e *briefError) Unwrap() error { return e.err }

// Brief returns err with its text on one line and any response body it quotes cut to an excerpt
// of at most MaxBodyExcerpt bytes (HTML tags dropped, whitespace runs made one space). nil stays
// nil; an error that needs no change is returned as it is.
func Brief(err error) error {
	if err == nil {
		return nil
	}
	if _, done := err.(*briefError); done {
		return err
	}
	text := err.Error()
	short := text
	if body := bodyText(err); body != "" {
		short = strings.Replace(short, body, "body: "+excerpt(strings.TrimPrefix(body, "body: ")), 1)
	}
	short = strings.Join(strings.Fields(short), " ")
	if short == text {
		return err
	}
	return &briefError{err: err, text: short}
}

// bodyText finds the error the OTLP/HTTP exporters make of a response body ("body: <text>") in
// err's tree, and returns its text.
func bodyText(err error) string {
	if err == nil {
		return ""
	}
	if s := err.Error(); strings.HasPrefix(s, "body: ") {
		return s
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return bodyText(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if s := bodyText(e); s != "" {
				return s
			}
		}
	}
	return ""
}

// excerpt makes a response body one short line: an HTML or XML page loses its tags, whitespace
// runs become one space, and past MaxBodyExcerpt bytes it is cut (at a character boundary) with
// "..." and the body's size.
func excerpt(body string) string {
	n := len(body)
	s := strings.TrimSpace(body)
	if strings.HasPrefix(s, "<") {
		var b strings.Builder
		in := false
		for _, r := range s {
			switch {
			case r == '<':
				in = true
				b.WriteByte(' ')
			case r == '>':
				in = false
			case !in:
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= MaxBodyExcerpt {
		return s
	}
	cut := MaxBodyExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(n) + " bytes)"
}
