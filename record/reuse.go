package record

import (
	"bytes"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/schema"
)

// What a reader that reads many rollouts in a row (the merge) reuses between reads: the records'
// boxes, the file buffer the records alias, and the writer that knows that buffer.

// Boxes hands out the small values a record's pointer fields point at (model_call_id, tokens,
// timestamps, ...) from shared chunks, one allocation for many records instead of one each. The
// records built from a Boxes keep its chunk alive; Reset reuses the last chunk, so only a caller
// that has dropped every record built from it may call Reset.
type Boxes struct{ slab boxSlab }

// Reset zeroes the last chunk for reuse (see Boxes).
func (b *Boxes) Reset() { b.slab.reset() }

// Cap is the number of records the current chunk holds: a pool bounds what it keeps by it.
func (b *Boxes) Cap() int { return cap(b.slab.boxes) }

// ReadAvailableInto is ReadAvailableRecords with the records appended to dst (nil: a new slice),
// their boxes taken from boxes (nil: one allocation per record) and the file read into *buf's
// memory when buf is not nil (*buf is set to the buffer used, see capture.Store.ScanAvailableBuffer).
// The records alias *buf: only for records dropped before buf is used again.
func ReadAvailableInto(store *capture.Store, id string, dst []ModelCallRecord, boxes *Boxes, buf *[]byte) (records []ModelCallRecord, damaged int, err error) {
	var slab *boxSlab
	if boxes != nil {
		slab = &boxes.slab
	}
	return readAvailableRecords(store, id, dst, slab, buf)
}

// AppendJSONFrom is AppendJSON for a record read from buf (ReadAvailableRecords' or
// ReadAvailableInto's file buffer; nil: any record): string fields whose bytes lie in buf are
// copied without the escape scan, since they are bodies of validated string tokens without
// escapes. The output is the same bytes as AppendJSON's.
func (r *ModelCallRecord) AppendJSONFrom(dst []byte, payloads bool, buf []byte) []byte {
	return r.appendJSON(dst, payloads, buf)
}

// AppendPayloads appends the four payload members (request, response, request_raw,
// response_raw), each with its leading comma, exactly as AppendJSON(dst, true) writes them between
// tokens_total and tool_calls.
func (r *ModelCallRecord) AppendPayloads(dst []byte) []byte { return r.appendPayloads(dst) }

// toolCallsMember is the member AppendJSON writes the payloads just before.
var toolCallsMember = []byte(`,"` + schema.ToolCalls + `":`)

// PayloadsAt returns the offset in b, one record as AppendJSON(dst, false) wrote it, at which
// AppendJSON(dst, true) writes the payload members (AppendPayloads), -1 when b holds no record: the
// offset of the tool_calls member, the first `,"tool_calls":` of b since a JSON string never holds
// an unescaped quote.
func PayloadsAt(b []byte) int { return bytes.Index(b, toolCallsMember) }

// PayloadsSize bounds the length AppendPayloads writes for r: each raw value as it is (at least
// null), each raw text at most its token's length (appendStringToken never writes more).
func (r *ModelCallRecord) PayloadsSize() int {
	n := len(`,"` + schema.Request + `":,"` + schema.Response + `":,"` + schema.RequestRaw + `":,"` + schema.ResponseRaw + `":`)
	for _, v := range [...][]byte{r.Request, r.Response, r.RequestRaw, r.ResponseRaw} {
		n += max(len(v), len("null"))
	}
	return n
}

// AppendFloat appends f as a record writes its float fields: Python's repr of a float (the shortest
// digits that read back as f, always with a fraction or an exponent: 10.0, not 10), with a fast path
// for timestamps and latencies.
func AppendFloat(dst []byte, f float64) []byte { return appendFloat(dst, f) }
