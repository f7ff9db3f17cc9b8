package view

import (
	"bufio"
	"cmp"
	"errors"
	"io"
	"slices"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// TranscriptEntry is one message of a rollout's transcript (GET /api/rollouts/{id}/transcript):
// every message of the rollout once, in the order the calls ran, with the call that first carried
// it.
type TranscriptEntry struct {
	CallIndex int      `json:"call_index"` // the call that first sent or received the message
	StartedAt *float64 `json:"started_at"` // that call's started_at, seconds since the Unix epoch
	Model     *string  `json:"model"`      // that call's model
	// Source is "request" for a message the client sent first on that call (a user turn, a tool
	// result, the system prompt, or an assistant turn the client wrote itself) and "response" for
	// what the model answered on it.
	Source  string  `json:"source"`
	Message Message `json:"message"`
}

// WriteTranscript writes rollout id's transcript as JSON to w: {"version", "rollout_id", "calls",
// "entries": [TranscriptEntry...]} and, when a read failed midway, "error". Calls are taken in
// started_at order (capture order for ties and unknown times), as the new-vs-history rule takes
// them; of each call's request only its new messages are written, then its whole response. It
// reads one call's line at a time (capture.Store.ReadLineAt) and writes each entry as it goes, so
// memory is one line and the hashes of the parts seen so far, whatever the rollout's size.
func (x *Index) WriteTranscript(w io.Writer, id string) error {
	v, _ := x.Version()
	e, err := x.refresh(id)
	if err != nil {
		return err
	}
	var calls []callStat
	if e.store != nil && e.sum.HasCapture {
		calls = slices.Clone(e.calls)
	}
	slices.SortStableFunc(calls, func(a, b callStat) int { return cmp.Compare(a.start, b.start) })
	bw := bufio.NewWriterSize(w, 32<<10)
	var werr error
	raw := func(s string) {
		if werr == nil {
			_, werr = bw.WriteString(s)
		}
	}
	val := func(v any) {
		if werr == nil {
			werr = encodeJSON(bw, v)
		}
	}
	raw(`{"version":`)
	val(v)
	raw(`,"rollout_id":`)
	val(id)
	raw(`,"calls":`)
	val(len(calls))
	raw(`,"entries":[`)
	seen := map[uint64]struct{}{}
	first := true
	emit := func(te *TranscriptEntry) {
		if !first {
			raw(",")
		}
		first = false
		val(te)
	}
	var readErr error
	for i := range calls {
		if werr != nil {
			break
		}
		c := &calls[i]
		line, err := e.store.ReadLineAt(id, c.off, c.size)
		if err != nil {
			if errors.Is(err, capture.ErrRewritten) {
				err = errors.New("the capture file was rewritten while the transcript was read: load it again")
			}
			readErr = err
			break
		}
		r, err := record.BuildRecord(line, c.index)
		if err != nil {
			continue
		}
		conv := conversation(r)
		markCall(conv, seen)
		for j := range conv.Input {
			if conv.Input[j].New {
				emit(&TranscriptEntry{CallIndex: c.index, StartedAt: r.StartedAt, Model: r.Model, Source: "request", Message: conv.Input[j]})
			}
		}
		for j := range conv.Output {
			emit(&TranscriptEntry{CallIndex: c.index, StartedAt: r.StartedAt, Model: r.Model, Source: "response", Message: conv.Output[j]})
		}
		for j := range conv.Input {
			for _, k := range messageKeys(&conv.Input[j]) {
				seen[k] = struct{}{}
			}
		}
		for j := range conv.Output {
			for _, k := range messageKeys(&conv.Output[j]) {
				seen[k] = struct{}{}
			}
		}
	}
	raw("]")
	if readErr != nil {
		raw(`,"error":`)
		val(readErr.Error())
	}
	raw("}\n")
	if werr != nil {
		return werr
	}
	return bw.Flush()
}
