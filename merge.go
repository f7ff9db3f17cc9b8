package modelcalls

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/record"
	"github.com/modelcalls/modelcalls/rollout"
)

// CaptureDrainTimeout is how long a merge waits for a rollout's outstanding capture writes (claims)
// before reading it: the seed's CAPTURE_DRAIN_TIMEOUT_S = 10 s. Claims still outstanding then give a
// model_call_capture_pending gap.
const CaptureDrainTimeout = 10 * time.Second

// CaptureDrainPoll is how often the quiescence wait looks at the claims: the seed's
// _CAPTURE_DRAIN_POLL_S = 50 ms.
const CaptureDrainPoll = 50 * time.Millisecond

// ErrNotRolloutRecord is the errors.Is target of merge errors about the line itself: it is not a
// JSON object, or its rollout id cannot be derived or is invalid (then errors.Is(err,
// rollout.ErrInvalidID) holds too). The caller passes such a line through unchanged and reports it
// (`modelcalls merge` names the line number and the reason on stderr and exits 1 at the end);
// nothing is dropped.
var ErrNotRolloutRecord = errors.New("cannot merge line")

// MergeOptions tune a merge. The zero value is NeMo Gym's behaviour: payloads left out, a 10 s
// quiescence wait polled every 50 ms.
type MergeOptions struct {
	// IncludePayloads keeps request, response, request_raw and response_raw in each attached call
	// (NeMo Gym's include_payloads).
	IncludePayloads bool
	// DrainTimeout bounds the quiescence wait per rollout; 0 means CaptureDrainTimeout, a negative
	// value means do not wait (claims are still counted once).
	DrainTimeout time.Duration
	// DrainPoll is the interval between claim checks; 0 means CaptureDrainPoll.
	DrainPoll time.Duration
	// Lineage derives each rollout's lineage (package lineage) and adds "parent_call_id" and
	// "relation" to each attached call and a "lineage" summary to the attachment (keys NeMo Gym
	// does not write and its readers ignore). It parses every request and response, so it is off
	// unless asked for.
	Lineage bool
}

func (o MergeOptions) drain() (timeout, poll time.Duration) {
	timeout, poll = o.DrainTimeout, o.DrainPoll
	if timeout == 0 {
		timeout = CaptureDrainTimeout
	}
	if timeout < 0 {
		timeout = 0
	}
	if poll <= 0 {
		poll = CaptureDrainPoll
	}
	return timeout, poll
}

// MergeResult says what a merge did with one line.
type MergeResult struct {
	// RolloutID is the rollout id derived from the record ("" when none).
	RolloutID string
	// Attached is true when ng_model_call_capture was written; false when the line came back
	// untouched (a record without rollout fields, or no capture dirs).
	Attached bool
	// Calls is the number of calls attached; Damaged the number of damaged capture lines.
	Calls, Damaged int
	// Gaps are the gaps attached to ng_model_call_capture, in order.
	Gaps []rollout.Gap
	// ObservationsJoined is true when ng_agent_observations was joined and rewritten.
	ObservationsJoined bool
}

// Merger merges capture evidence into rollout records, as NeMo Gym's merge does (see Merge). It holds the
// capture stores of its dirs and is safe for concurrent use: Merge may run on many lines at once.
type Merger struct {
	stores []*capture.Store
	opts   MergeOptions
}

// NewMerger returns a Merger over capture dirs, searched in order. Every dir must exist (a missing
// dir is an error here rather than silently "no records" for every rollout); no dirs is allowed and
// makes Merge a no-op, as NeMo Gym's merge without capture dirs.
func NewMerger(dirs []string, opts MergeOptions) (*Merger, error) {
	m := &Merger{opts: opts}
	for _, d := range dirs {
		s, err := capture.OpenExisting(d)
		if err != nil {
			return nil, err
		}
		m.stores = append(m.stores, s)
	}
	return m, nil
}

// MergeRecord ports merge_model_call_capture_into_record for one JSONL line: NewMerger(dirs, opts)
// then Merge. Use a Merger to merge many lines.
func MergeRecord(ctx context.Context, line []byte, dirs []string, opts MergeOptions) ([]byte, MergeResult, error) {
	m, err := NewMerger(dirs, opts)
	if err != nil {
		return line, MergeResult{}, err
	}
	return m.Merge(ctx, line)
}

// Merge attaches ng_model_call_capture = {"rollout_id", "metrics", "calls", "gaps"?} to the rollout
// record in line (one JSON object; surrounding whitespace is kept) and returns the new line. Every
// byte outside the spliced values stays identical and in order: an existing ng_model_call_capture is
// replaced in place (the last one, if the key repeats), else the field is appended as the last
// member, in the record's own separator style; the attachment itself is compact JSON. line is not
// modified; the result is a new slice unless the line comes back untouched.
//
// Steps (NeMo Gym's merge, with the seed's quiescence wait and pending gap, and our byte-preserving
// splice):
//  1. A line that is not a JSON object, or whose rollout id cannot be derived or is invalid, gives an
//     error wrapping ErrNotRolloutRecord, and line itself. A record with none of the four _ng_*
//     fields, or a Merger without dirs, gives line untouched and Attached false.
//  2. Wait up to DrainTimeout for the rollout's claims (in every dir) to go away.
//  3. Pick the first dir holding the capture file or the incomplete marker; read it tolerantly.
//  4. Gaps, in order: model_call_capture_records_unreadable (detail "count=<n>") when lines are
//     damaged; model_call_capture_incomplete when the marker exists or stale claims were found
//     (detail "stale_claims=<n>" then); model_call_capture_pending (detail "count=<n>") for claims
//     still live after the wait; model_call_capture_no_records when there is nothing at all (no
//     calls, no damage, not incomplete). When the capture cannot be read (I/O), the calls are empty
//     and the gap is model_call_capture_unreadable (detail: the error) instead of records_unreadable
//     and no_records.
//  5. A non-null ng_agent_observations is parsed, joined with JoinModelCallObservations and written
//     back compactly in place; if it does not parse or validate, it stays untouched and the gap
//     agent_observation_join_failed (detail: the reason) is added last.
//
// Calls leave out the payload fields unless IncludePayloads. Only a cancelled ctx (during the wait)
// and the line errors of step 1 are returned as errors; capture problems become gaps.
func (m *Merger) Merge(ctx context.Context, line []byte) ([]byte, MergeResult, error) {
	var res MergeResult
	layout, err := scanRecord(line)
	if err != nil {
		return line, res, fmt.Errorf("%w: %w", ErrNotRolloutRecord, err)
	}
	if !rollout.HasRolloutFields(layout.idFields) {
		return line, res, nil
	}
	id, ok, err := rollout.FromRecord(layout.idFields)
	if err != nil {
		return line, res, fmt.Errorf("%w: rollout id: %w", ErrNotRolloutRecord, err)
	}
	if !ok {
		return line, res, fmt.Errorf("%w: rollout id cannot be derived: %s and %s are both needed when %s is absent",
			ErrNotRolloutRecord, rollout.FieldTaskIndex, rollout.FieldRolloutIndex, rollout.FieldRolloutID)
	}
	res.RolloutID = id
	if len(m.stores) == 0 {
		return line, res, nil
	}

	// The records, their boxes and the attachment's small part live only until the output line
	// is written: they are a pooled scratch (mergeScratch), zeroed when handed back.
	sc := mergeScratches.Get().(*mergeScratch)
	defer sc.release()
	ev, err := m.collect(ctx, id, sc)
	if err != nil {
		return line, res, err
	}
	sc.records = ev.calls
	res.Calls, res.Damaged, res.Gaps = len(ev.calls), ev.damaged, ev.gaps

	var edits []edit
	if layout.observations >= 0 {
		mem := layout.members[layout.observations]
		joined, jerr := joinObservations(line[mem.ValStart:mem.ValEnd], ev.calls)
		switch {
		case jerr != nil:
			res.Gaps = append(res.Gaps, rollout.Gap{Code: rollout.GapAgentObservationJoinFailed, Detail: jerr.Error()})
		case joined != nil:
			edits = append(edits, edit{mem.ValStart, mem.ValEnd, joined})
			res.ObservationsJoined = true
		}
	}

	// The attachment is written straight into the output line: no intermediate value, so a merge
	// with payloads holds the capture file and the output line, about twice the largest capture
	// line (raw texts are copied from their tokens, never decoded; appendStringToken).
	var lin *lineage.Lineage
	if m.opts.Lineage {
		lin = lineage.Derive(lineage.FromRecords(ev.calls))
	}
	att := planAttachment(sc.small[:0], id, ev.calls, res.Gaps, m.opts.IncludePayloads, sc.file, lin)
	sc.small = att.small
	edits = append(edits, layout.setFieldEdit(line, layout.capture, FieldModelCallCapture, nil))
	capIdx := len(edits) - 1
	if len(edits) == 2 && edits[1].start < edits[0].start {
		edits[0], edits[1] = edits[1], edits[0]
		capIdx = 0
	}
	size := len(line) + att.size
	for _, e := range edits {
		size += len(e.repl)
	}
	out := make([]byte, 0, size)
	pos := 0
	for i, e := range edits {
		out = append(out, line[pos:e.start]...)
		out = append(out, e.repl...)
		if i == capIdx {
			out = att.appendTo(out)
		}
		pos = e.end
	}
	out = append(out, line[pos:]...)
	res.Attached = true
	return out, res, nil
}

// evidence is what the capture dirs hold for one rollout.
type evidence struct {
	calls   []ModelCallRecord
	damaged int
	gaps    []rollout.Gap
}

// mergeScratch is the memory one Merge uses and drops: the records read (which alias the capture
// file's buffer), their boxes and the attachment's small part. Merge hands it back zeroed, so a
// pooled scratch keeps no capture buffer alive.
type mergeScratch struct {
	records []ModelCallRecord
	boxes   record.Boxes
	small   []byte
	// file is the buffer the capture file is read into (the records alias it), reused by the next
	// Merge: no per-rollout allocation, zeroing and collection of the largest buffer of a merge.
	file []byte
}

var mergeScratches = sync.Pool{New: func() any { return new(mergeScratch) }}

// maxScratchCalls bounds the records (and boxes) a pooled scratch keeps: the scratch of a rare
// huge rollout is dropped instead of being kept by the pool.
const maxScratchCalls = 4096

// maxScratchFile bounds the file buffer a pooled scratch keeps (a rollout of 20 calls is about
// 100 KB; a larger one gets its own buffer, dropped with it).
const maxScratchFile = 4 << 20

func (sc *mergeScratch) release() {
	clear(sc.records)
	sc.records = sc.records[:0]
	sc.boxes.Reset()
	sc.small = sc.small[:0]
	if cap(sc.file) > maxScratchFile {
		sc.file = nil
	}
	sc.file = sc.file[:0]
	if cap(sc.records) > maxScratchCalls || sc.boxes.Cap() > maxScratchCalls || cap(sc.small) > maxScratchCalls<<10 {
		return
	}
	mergeScratches.Put(sc)
}

func (m *Merger) collect(ctx context.Context, id string, sc *mergeScratch) (evidence, error) {
	var ev evidence
	timeout, poll := m.opts.drain()
	claims, _, err := AwaitStores(ctx, m.stores, id, timeout, poll)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ev, ctxErr
		}
		ev.gaps = append(ev.gaps, rollout.Gap{Code: rollout.GapCaptureUnreadable, Detail: err.Error()})
		return ev, nil
	}

	store, marker, err := mergeStore(m.stores, id)
	if err == nil && store != nil {
		ev.calls, ev.damaged, err = record.ReadAvailableInto(store, id, sc.records[:0], &sc.boxes, &sc.file)
	}
	if err != nil {
		ev.calls, ev.damaged = nil, 0
		ev.gaps = append(ev.gaps, rollout.Gap{Code: rollout.GapCaptureUnreadable, Detail: err.Error()})
	} else if ev.damaged > 0 {
		ev.gaps = append(ev.gaps, rollout.Gap{Code: rollout.GapCaptureRecordsUnreadable, Detail: "count=" + strconv.Itoa(ev.damaged)})
	}
	incomplete := marker || claims.Stale > 0
	if incomplete {
		g := rollout.Gap{Code: rollout.GapCaptureIncomplete}
		if claims.Stale > 0 {
			g.Detail = "stale_claims=" + strconv.Itoa(claims.Stale)
		}
		ev.gaps = append(ev.gaps, g)
	}
	if claims.Live > 0 {
		ev.gaps = append(ev.gaps, rollout.Gap{Code: rollout.GapCapturePending, Detail: "count=" + strconv.Itoa(claims.Live)})
	}
	if err == nil && !incomplete && len(ev.calls) == 0 && ev.damaged == 0 {
		ev.gaps = append(ev.gaps, rollout.Gap{Code: rollout.GapCaptureNoRecords})
	}
	return ev, nil
}

// storeForRollout ports _store_for_rollout: the store of the first dir (in order) that holds the
// capture file or the incomplete marker of rollout id, or nil when none does. Dirs that do not exist
// are skipped (nothing is created). An invalid id or a stat error is returned.
func storeForRollout(id string, dirs []string) (*capture.Store, error) {
	stores, err := existingStores(dirs)
	if err != nil {
		return nil, err
	}
	s, _, err := selectStore(stores, id)
	return s, err
}

// selectStore returns the first store holding id's capture file or marker, and whether that store
// has the marker.
func selectStore(stores []*capture.Store, id string) (*capture.Store, bool, error) {
	for _, s := range stores {
		hasCapture, hasMarker, err := s.Stat(id)
		if err != nil {
			return nil, false, err
		}
		if hasCapture || hasMarker {
			return s, hasMarker, nil
		}
	}
	return nil, false, nil
}

// mergeStore is selectStore for a merge, over at least one store: the last store is chosen
// without looking for its capture file, since reading a capture file that does not exist gives
// what no store gives (no records, no error); only its marker is looked for. A merge of one dir so
// makes one lstat less per rollout.
func mergeStore(stores []*capture.Store, id string) (*capture.Store, bool, error) {
	last := len(stores) - 1
	if s, marker, err := selectStore(stores[:last], id); err != nil || s != nil {
		return s, marker, err
	}
	mp, err := stores[last].MarkerPath(id)
	if err != nil {
		return nil, false, err
	}
	switch _, err := os.Lstat(mp); {
	case err == nil:
		return stores[last], true, nil
	case errors.Is(err, fs.ErrNotExist):
		return stores[last], false, nil
	default:
		return nil, false, fmt.Errorf("stat %s: %w", mp, err)
	}
}

// existingStores opens the stores of dirs that exist.
func existingStores(dirs []string) ([]*capture.Store, error) {
	var stores []*capture.Store
	for _, d := range dirs {
		s, err := capture.OpenExisting(d)
		if err != nil {
			if isNotExist(err) {
				continue
			}
			return nil, err
		}
		stores = append(stores, s)
	}
	return stores, nil
}

// joinObservations parses, joins and re-encodes an ng_agent_observations value. A JSON null gives
// (nil, nil): nothing to join.
func joinObservations(raw []byte, calls []ModelCallRecord) ([]byte, error) {
	if jsonscan.IsNull(raw) {
		return nil, nil
	}
	b, err := rollout.ParseObservationBundle(raw)
	if err != nil {
		return nil, err
	}
	out, err := JoinModelCallObservations(b, calls).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode agent observations: %w", err)
	}
	return out, nil
}

// attachment is ng_model_call_capture = {"rollout_id","metrics","calls","gaps"?} ready to be
// written: gaps only when non-empty, each without empty fields (NeMo Gym omits null gap fields). Everything but the
// payloads is built in small; with payloads, the payload members of calls[i] go at small[cuts[i]]
// and are copied from the records (raw texts from their tokens) only when the attachment is written.
type attachment struct {
	small []byte
	cuts  []int
	calls []ModelCallRecord
	size  int // an upper bound of the written length (exact unless a payload is compacted)
}

// planAttachment builds the attachment's small part, appended to dst[:0]; file is the capture
// file's buffer the calls were read from (their strings may share it). With lin (the calls'
// lineage, nil for none) each call ends with "parent_call_id" and "relation", and "lineage"
// follows the gaps.
func planAttachment(dst []byte, id string, calls []ModelCallRecord, gaps []rollout.Gap, payloads bool, file []byte, lin *lineage.Lineage) attachment {
	a := attachment{calls: calls}
	// About 1 KiB a call without payloads: sized once instead of grown call by call.
	if n := 512 + 1024*len(calls); cap(dst) < n {
		dst = make([]byte, 0, n)
	}
	dst = append(dst[:0], `{"rollout_id":`...)
	dst = jsonscan.AppendString(dst, id)
	dst = append(dst, `,"metrics":`...)
	metrics := AggregateRecords(calls)
	dst = metrics.AppendJSON(dst)
	dst = append(dst, `,"calls":[`...)
	if payloads {
		a.cuts = make([]int, len(calls))
	}
	for i := range calls {
		if i > 0 {
			dst = append(dst, ',')
		}
		start := len(dst)
		dst = calls[i].AppendJSONFrom(dst, false, file)
		if lin != nil {
			dst = appendCallLineage(dst[:len(dst)-1], &lin.Calls[i])
		}
		if payloads {
			a.cuts[i] = start + record.PayloadsAt(dst[start:])
			a.size += a.payloadSize(i)
		}
	}
	dst = append(dst, ']')
	if len(gaps) > 0 {
		dst = append(dst, `,"gaps":[`...)
		for i, g := range gaps {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendGap(dst, g)
		}
		dst = append(dst, ']')
	}
	if lin != nil {
		dst = appendLineageSummary(dst, lin)
	}
	a.small = append(dst, '}')
	a.size += len(a.small)
	return a
}

// appendTo appends the attachment: compact JSON, each call as AppendJSON(dst, payloads) writes it.
func (a *attachment) appendTo(dst []byte) []byte {
	pos := 0
	for i, cut := range a.cuts {
		dst = append(dst, a.small[pos:cut]...)
		dst = a.appendPayloads(dst, i)
		pos = cut
	}
	return append(dst, a.small[pos:]...)
}

// appendPayloads appends the four payload members of call i as AppendJSON(dst, true) writes them.
func (a *attachment) appendPayloads(dst []byte, i int) []byte {
	return a.calls[i].AppendPayloads(dst)
}

// payloadSize bounds the length appendPayloads writes for call i.
func (a *attachment) payloadSize(i int) int { return a.calls[i].PayloadsSize() }

func appendGap(dst []byte, g rollout.Gap) []byte {
	dst = append(dst, `{"code":`...)
	dst = jsonscan.AppendString(dst, g.Code)
	if g.InvocationID != "" {
		dst = append(dst, `,"invocation_id":`...)
		dst = jsonscan.AppendString(dst, g.InvocationID)
	}
	if g.Detail != "" {
		dst = append(dst, `,"detail":`...)
		dst = jsonscan.AppendString(dst, g.Detail)
	}
	return append(dst, '}')
}

// appendCallLineage appends a call's lineage keys and closes its object: `,"parent_call_id":<id or
// null>,"relation":<relation>}`.
func appendCallLineage(dst []byte, n *lineage.Node) []byte {
	dst = append(dst, `,"parent_call_id":`...)
	if n.ParentCallID == nil {
		dst = append(dst, "null"...)
	} else {
		dst = jsonscan.AppendString(dst, *n.ParentCallID)
	}
	dst = append(dst, `,"relation":`...)
	dst = jsonscan.AppendString(dst, string(n.Relation))
	return append(dst, '}')
}

// appendLineageSummary appends `,"lineage":{"main_chain":[ids...],<lineage.Summary's members>}`.
func appendLineageSummary(dst []byte, l *lineage.Lineage) []byte {
	dst = append(dst, `,"lineage":{"main_chain":[`...)
	for i, id := range l.MainChain {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, id)
	}
	dst = append(dst, ']')
	s := &l.Summary
	for _, kv := range [...]struct {
		k string
		v int
	}{
		{"calls", s.Calls}, {"roots", s.Roots}, {"extends", s.Extends}, {"forks", s.Forks},
		{"retries", s.Retries}, {"resamples", s.Resamples}, {"compactions", s.Compactions},
		{"main_chain_length", s.MainChainLength}, {"off_main_chain", s.OffMainChain},
		{"audited_edges", s.AuditedEdges}, {"audit_failures", s.AuditFailures},
	} {
		dst = append(dst, ',', '"')
		dst = append(dst, kv.k...)
		dst = append(dst, '"', ':')
		dst = strconv.AppendInt(dst, int64(kv.v), 10)
	}
	return append(dst, '}')
}
