package record

import (
	"sync"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/internal/schema"
)

// ReadRecords ports read_model_call_records: the records of rollout id in durable append order,
// from the strict read (capture.Store.Read), with call_index 0, 1, 2, ... as NeMo Gym numbers them. A missing
// capture file gives no records. The first line that is not a readable exchange, or whose record
// cannot be built (BuildRecord), stops the read with a *capture.LineError naming the file and line
// (errors.Is(err, ErrInvalidExchange) for the latter). I/O errors and an invalid id are returned as
// the store reports them.
func ReadRecords(store *capture.Store, id string) ([]ModelCallRecord, error) {
	entries, err := store.Read(id)
	if err != nil {
		return nil, err
	}
	records := make([]ModelCallRecord, len(entries))
	for i, e := range entries {
		if err := buildRecord(&records[i], jsonscan.TrimWS(e.Data), i); err != nil {
			path, _ := store.CapturePath(id)
			return nil, &capture.LineError{Path: path, Line: e.Line, Err: err}
		}
	}
	return records, nil
}

// ReadAvailableRecords ports read_available_model_call_records: the records of rollout id that can
// be read and built, each with call_index = its capture index, and the number of damaged lines:
// lines the tolerant read rejects (not a valid strict JSON object, capture.CheckLine) plus lines
// whose record cannot be built (an envelope field of the wrong JSON type, see BuildRecord). Every
// non-blank line consumes a capture index, damaged or not, so indices may have holes; blank lines
// consume none. Only I/O errors and an invalid id are returned as errors.
//
// The records share one buffer, the file as read: Request, Response, RequestRaw, ResponseRaw and
// tool-call arguments are slices of it, and string fields without escapes share its bytes (see
// docs/records-and-merge.md, "Reading"). Do not modify a record's Request or Response bytes:
// strings read from them (response_id, model, ...) would change with them.
func ReadAvailableRecords(store *capture.Store, id string) (records []ModelCallRecord, damaged int, err error) {
	return readAvailableRecords(store, id, nil, nil, nil)
}

// readAvailableRecords is ReadAvailableRecords with the records appended to dst (nil: a new slice),
// their boxes taken from boxes (nil: one allocation per record, the fewest bytes for records
// that are kept) and the file read into *buf's memory when buf is not nil (capture.Store.ScanAvailableBuffer;
// *buf is set to the buffer used): only for records dropped before buf is used again (a Merger's).
func readAvailableRecords(store *capture.Store, id string, dst []ModelCallRecord, boxes *boxSlab, buf *[]byte) (records []ModelCallRecord, damaged int, err error) {
	// The scanner and its member map are reused across reads (their scratch memory grows to the
	// size of a line's index once, not once per rollout).
	//
	// Each line is walked once: the validating pass (the tolerant read's rule, capture.CheckLine: a
	// valid strict JSON object) maps the line's top-level members and the members of its response,
	// and the record is built from them.
	p := readScanners.Get().(*readScanner)
	defer p.release()
	members, sc := p.members[:0], &p.sc
	records = dst
	scan := func(index, _ int, b []byte) {
		var verr error
		members, verr = sc.Members(b, members[:0])
		p.members = members
		if verr != nil || !jsonscan.IsObject(b[jsonscan.SkipWS(b, 0):]) {
			damaged++
			return
		}
		if records == nil {
			records = make([]ModelCallRecord, 0, 32) // skips the small steps of append's growth
		}
		records = append(records, ModelCallRecord{})
		if buildRecordMembers(&records[len(records)-1], b, members, sc, index, true, boxes) != nil {
			records[len(records)-1] = ModelCallRecord{} // a reused dst is handed out zeroed
			records = records[:len(records)-1]
			damaged++
		}
	}
	if buf != nil {
		*buf, err = store.ScanAvailableBuffer(id, *buf, scan)
	} else {
		err = store.ScanAvailable(id, scan)
	}
	if err != nil {
		clear(records[len(dst):])
		if dst == nil {
			return nil, 0, err
		}
		return records[:len(dst)], 0, err
	}
	return records, damaged, nil
}

// readScanner is readAvailable's reusable validating pass: the scanner and the slice the line's
// top-level members go into.
type readScanner struct {
	sc      jsonscan.Scanner
	members []jsonscan.Member
}

var readScanners = sync.Pool{New: func() any { return &readScanner{sc: jsonscan.Scanner{Nested: schema.Response}} }}

// release drops the references to the last line (its index) and pools p.
func (p *readScanner) release() {
	p.members = p.members[:0]
	p.sc.Reset()
	readScanners.Put(p)
}
