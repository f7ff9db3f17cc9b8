package capturetest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// Line is one capture line decoded (capture.Exchange) with the line's bytes, position, members
// and record.
type Line struct {
	capture.Exchange

	Keys   map[string]json.RawMessage `json:"-"` // every member of the line, for presence checks
	Data   []byte                     `json:"-"` // the line as stored, without its newline
	Index  int                        `json:"-"` // the capture index: 0-based among the non-blank lines
	Num    int                        `json:"-"` // the 1-based line number in the file
	Record *record.ModelCallRecord    `json:"-"` // the record built from the line (Lines only)
}

// Has reports whether the line has a member named key (null counts).
func (l *Line) Has(key string) bool { _, ok := l.Keys[key]; return ok }

// Category is error_category, "<null>" when null.
func (l *Line) Category() string {
	if l.ErrorCategory == nil {
		return "<null>"
	}
	return *l.ErrorCategory
}

// Body is the response body as the line stores it: response_raw when present, else the response
// object's bytes.
func (l *Line) Body() []byte {
	if l.ResponseRaw != nil {
		return []byte(*l.ResponseRaw)
	}
	return l.Response
}

// Decode decodes one capture line.
func Decode(data []byte) (*Line, error) {
	l := &Line{Data: data}
	if err := json.Unmarshal(data, l); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &l.Keys); err != nil {
		return nil, err
	}
	return l, nil
}

// Lines reads rollout id's capture file strictly (every line must be whole), decodes every line and
// builds its record; any failure fails the test, naming the line.
func Lines(t testing.TB, store *capture.Store, id string) []*Line {
	t.Helper()
	entries, err := store.Read(id)
	if err != nil {
		t.Fatalf("read capture of %s: %v", id, err)
	}
	out := make([]*Line, 0, len(entries))
	for _, e := range entries {
		l, err := entryLine(e)
		if err != nil {
			t.Fatalf("%s line %d: %v\n%s", id, e.Line, err, e.Data)
		}
		out = append(out, l)
	}
	return out
}

func entryLine(e capture.Entry) (*Line, error) {
	l, err := Decode(e.Data)
	if err != nil {
		return nil, err
	}
	l.Index, l.Num = e.Index, e.Line
	if l.Record, err = record.BuildRecord(e.Data, e.Index); err != nil {
		return nil, fmt.Errorf("no record builds: %w", err)
	}
	return l, nil
}

// One is Lines requiring exactly one line.
func One(t testing.TB, store *capture.Store, id string) *Line {
	t.Helper()
	ls := Lines(t, store, id)
	if len(ls) != 1 {
		t.Fatalf("rollout %s: %d capture lines, want 1", id, len(ls))
	}
	return ls[0]
}

// ReadDir reads rollout id's capture file in dir strictly, as Lines does.
func ReadDir(t testing.TB, dir, id string) []*Line {
	t.Helper()
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatalf("capture dir: %v", err)
	}
	defer store.Close()
	return Lines(t, store, id)
}

// NewStore opens a capture store in a fresh temp dir (<temp>/captures), closed at cleanup.
func NewStore(t testing.TB) *capture.Store {
	t.Helper()
	store, err := capture.Open(filepath.Join(t.TempDir(), "captures"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
