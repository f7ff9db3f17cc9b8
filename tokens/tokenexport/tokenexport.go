// Package tokenexport turns capture lines into training rows: one Row per captured call with its
// prompt ids, generated ids and log probabilities (package tokens reads them), written as JSON
// Lines, as Parquet (lists as Parquet LIST columns, so DuckDB, pyarrow and Hugging Face datasets
// read them as lists), or as NeMo Gym's per-call token record (GymRecord, schema_version 1), one
// file per rollout in a directory that GymDir keeps current across exports.
//
// A row is about the first choice of its call: calls that ask for several choices are rare in
// agent rollouts, and NeMo Gym's record has one generation. Choices says how many there were.
package tokenexport

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/tokens"
)

// Row is one call. Its JSON form is one line of the JSONL export; its Parquet form one row.
type Row struct {
	RolloutID   string `json:"rollout_id" parquet:"rollout_id"`
	ModelCallID string `json:"model_call_id" parquet:"model_call_id"`
	// CallIndex is the call's capture index: its position among the rollout's capture lines.
	CallIndex int64 `json:"call_index" parquet:"call_index"`
	// Model is the response's model, else the request's, else null.
	Model   *string `json:"model" parquet:"model,optional"`
	Dialect string  `json:"dialect" parquet:"dialect"`
	// PromptTokenIDs, GenerationTokenIDs and GenerationLogProbs are null when absent (Parquet: a
	// null list). GenerationLogProbs is null unless there is one log probability per generated id.
	PromptTokenIDs     []int64   `json:"prompt_token_ids" parquet:"prompt_token_ids,optional,list"`
	GenerationTokenIDs []int64   `json:"generation_token_ids" parquet:"generation_token_ids,optional,list"`
	GenerationLogProbs []float64 `json:"generation_log_probs" parquet:"generation_log_probs,optional,list"`
	// TokenSource and PromptTokenSource are tokens.Source values.
	TokenSource       string `json:"token_source" parquet:"token_source"`
	PromptTokenSource string `json:"prompt_token_source" parquet:"prompt_token_source"`
	// Choices is how many choices the response carried; the row holds the first.
	Choices               int64     `json:"choices" parquet:"choices"`
	Streamed              bool      `json:"streamed" parquet:"streamed"`
	UsagePromptTokens     *int64    `json:"usage_prompt_tokens" parquet:"usage_prompt_tokens,optional"`
	UsageCompletionTokens *int64    `json:"usage_completion_tokens" parquet:"usage_completion_tokens,optional"`
	StatusCode            *int64    `json:"status_code" parquet:"status_code,optional"`
	Findings              []Finding `json:"findings" parquet:"findings,list"`
	// Reward is the rollout record's reward (export with rollout records), else null.
	Reward *float64 `json:"reward" parquet:"reward,optional"`
	// CreatedAt is the call's completed_at, seconds since the Unix epoch.
	CreatedAt float64 `json:"created_at" parquet:"created_at"`

	outputItems    []json.RawMessage // the answer's items, Responses-shaped (GymRecord)
	routedExperts  json.RawMessage
	tokenItemIndex *int
}

// Finding is a tokens.Finding in a row: its code, the choice it is about (-1 for the call), and
// its sentence.
type Finding struct {
	Code   string `json:"code" parquet:"code"`
	Choice int64  `json:"choice" parquet:"choice"`
	Detail string `json:"detail" parquet:"detail"`
}

// Complete reports whether the row has what a trainer needs: prompt ids, generated ids and one
// log probability per generated id.
func (r *Row) Complete() bool {
	return r.PromptTokenIDs != nil && r.GenerationTokenIDs != nil && r.GenerationLogProbs != nil
}

// HasTokenData reports whether the row has prompt ids and generated ids.
func (r *Row) HasTokenData() bool { return r.PromptTokenIDs != nil && r.GenerationTokenIDs != nil }

// lineScanner is FromLine's reusable check of a line: the scanner (the response indexed) and the
// slice the line's top-level members go into.
type lineScanner struct {
	sc      jsonscan.Scanner
	members []jsonscan.Member
}

var lineScanners = sync.Pool{New: func() any { return &lineScanner{sc: jsonscan.Scanner{Nested: "response"}} }}

// release drops the references to the last line (its index) and pools s.
func (s *lineScanner) release() {
	s.members = s.members[:0]
	s.sc.Reset()
	lineScanners.Put(s)
}

// FindingMalformedCaptureField is the code of a row's finding that one of the line's own members
// the row copies (model_call_id, dialect and response_raw strings, completed_at a number,
// status_code an integer) has another JSON type or an out-of-range value. The member is not read:
// the row field keeps its zero value ("", 0 or null; response_raw's stream is not read) and the
// detail names the member and its value. The finding is about the call (choice -1).
const FindingMalformedCaptureField = "malformed_capture_field"

// FromLine builds the row of one capture line (a JSON object as the capture file stores it) of
// rollout rolloutID at capture index callIndex. It fails only when the line is not a JSON object;
// everything about its tokens becomes the row's sources and findings, and a member of the line
// that has the wrong type becomes a FindingMalformedCaptureField finding, listed first.
func FromLine(rolloutID string, callIndex int, b []byte) (Row, error) {
	line := jsonscan.TrimWS(b)
	if !jsonscan.IsObject(line) {
		return Row{}, errors.New("decode capture line: not a JSON object")
	}
	// The check maps the line's members and indexes its response (the last of a repeated name
	// wins, as with Lookup): a token line is mostly its response, which every later read then
	// steps through by the index instead of reading its long lists again.
	ls := lineScanners.Get().(*lineScanner)
	defer ls.release()
	members, err := ls.sc.Members(line, ls.members[:0])
	ls.members = members
	if err != nil {
		return Row{}, fmt.Errorf("decode capture line: %w", err)
	}
	var m struct{ mcid, dialect, raw, completed, status, request, response, tokenCapture []byte }
	for _, mb := range members {
		k, v := line[mb.KeyStart:mb.KeyEnd], line[mb.ValStart:mb.ValEnd]
		for _, f := range []struct {
			key  string
			into *[]byte
		}{{"model_call_id", &m.mcid}, {"dialect", &m.dialect}, {"response_raw", &m.raw}, {"completed_at", &m.completed},
			{"status_code", &m.status}, {"request", &m.request}, {"response", &m.response}, {"token_capture", &m.tokenCapture}} {
			if jsonscan.KeyIs(k, f.key) {
				*f.into = nonNull(v)
				break
			}
		}
	}
	tree := &ls.sc.Tree
	var mcid, dialect string
	var raw *string
	var completed float64
	var status *int64
	var malformed []Finding
	for _, f := range []struct {
		key  string
		val  []byte
		into any
		want string
	}{{"model_call_id", m.mcid, &mcid, "a string"}, {"dialect", m.dialect, &dialect, "a string"}, {"response_raw", m.raw, &raw, "a string"},
		{"completed_at", m.completed, &completed, "a number"}, {"status_code", m.status, &status, "an integer"}} {
		if f.val == nil {
			continue
		}
		// A member of the wrong type is not read (the row keeps its zero value: "", 0 or null)
		// and is named; the line's token data is still read.
		if json.Unmarshal(f.val, f.into) != nil {
			switch p := f.into.(type) { // a failed decode may have set it
			case *string:
				*p = ""
			case **string:
				*p = nil
			case *float64:
				*p = 0
			case **int64:
				*p = nil
			}
			malformed = append(malformed, Finding{Code: FindingMalformedCaptureField, Choice: -1,
				Detail: fmt.Sprintf("%s is %s, not %s: not read", f.key, excerpt(f.val), f.want)})
		}
	}
	// The line was checked whole above: the reader need not check its members again.
	c := tokens.Call{Dialect: dialect, Request: m.request, Response: m.response, TokenCapture: m.tokenCapture, Checked: true, Index: tree}
	if raw != nil {
		c.ResponseRaw = []byte(*raw)
	}
	t := tokens.Read(c)
	r := Row{
		RolloutID: rolloutID, ModelCallID: mcid, CallIndex: int64(callIndex), Dialect: dialect,
		PromptTokenIDs: t.PromptTokenIDs, GenerationTokenIDs: t.GenerationTokenIDs(), GenerationLogProbs: t.GenerationLogProbs(),
		TokenSource: string(t.Source), PromptTokenSource: string(t.PromptSource), Choices: int64(len(t.Choices)),
		Streamed: t.Streamed, UsagePromptTokens: t.PromptTokens, UsageCompletionTokens: t.CompletionTokens,
		StatusCode: status, Findings: append([]Finding{}, malformed...), CreatedAt: completed,
	}
	if len(t.Choices) > 0 {
		r.routedExperts = t.Choices[0].RoutedExperts
	}
	for _, f := range t.Findings {
		ch := int64(-1)
		if f.Choice != nil {
			ch = int64(*f.Choice)
		}
		r.Findings = append(r.Findings, Finding{Code: f.Code, Choice: ch, Detail: f.Detail})
	}
	// One walk over the response's members (the last of a repeated name wins, as with Lookup).
	var model, output, choices []byte
	tree.EachMember(c.Response, func(k, v []byte) bool {
		switch {
		case jsonscan.KeyIs(k, "model"):
			model = v
		case jsonscan.KeyIs(k, "output"):
			output = v
		case jsonscan.KeyIs(k, "choices"):
			choices = v
		}
		return true
	})
	if r.Model = modelOf(model); r.Model == nil {
		r.Model = modelOf(jsonscan.Lookup(c.Request, "model"))
	}
	if jsonscan.IsObject(c.Response) {
		r.outputItems = outputItems(tree, nonNull(output), nonNull(choices))
	}
	if r.GenerationTokenIDs != nil && len(r.outputItems) > 0 {
		i := len(r.outputItems) - 1
		r.tokenItemIndex = &i
	}
	return r, nil
}

// excerpt returns v for a finding's detail: whole up to 40 bytes, else its first 40 and "...".
func excerpt(v []byte) string {
	const n = 40
	if len(v) <= n {
		return string(v)
	}
	return strings.ToValidUTF8(string(v[:n]), "") + "..."
}

func nonNull(v []byte) []byte {
	if jsonscan.IsNull(v) {
		return nil
	}
	return v
}

// modelOf returns the model a model member names, nil when it is absent, not a string or empty.
func modelOf(v []byte) *string {
	var m string
	if jsonscan.IsString(v) && json.Unmarshal(v, &m) == nil && m != "" {
		return &m
	}
	return nil
}

// tokenFields are the members NeMo Gym's model servers attach to an answer item; they are held
// once on the record, not on its items.
var tokenFields = []string{"prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts"}

// outputItems returns the answer as NeMo Gym's record holds it, given the response object's
// output and choices members (nil when absent or null): a Responses answer's output items, or each
// Chat choice's message as a {"type":"message","role":"assistant",...} item; the token members
// removed. Other answers give none.
func outputItems(tree *jsonscan.Tree, output, choices []byte) []json.RawMessage {
	// The response was validated with its line: walk it, and decode only the items themselves.
	if (output != nil && !jsonscan.IsArray(output)) || (choices != nil && !jsonscan.IsArray(choices)) {
		return nil
	}
	var items []json.RawMessage
	strip := func(raw []byte, defaults bool) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return
		}
		for _, k := range tokenFields {
			delete(m, k)
		}
		if defaults {
			if _, ok := m["type"]; !ok {
				m["type"] = json.RawMessage(`"message"`)
			}
			if _, ok := m["role"]; !ok {
				m["role"] = json.RawMessage(`"assistant"`)
			}
		}
		b, err := json.Marshal(m)
		if err == nil {
			items = append(items, b)
		}
	}
	var outs [][]byte
	tree.EachElement(output, func(v []byte) bool { outs = append(outs, v); return true })
	if len(outs) > 0 {
		for _, it := range outs {
			strip(it, false)
		}
		return items
	}
	var msgs [][]byte
	ok := true
	tree.EachElement(choices, func(c []byte) bool {
		switch {
		case jsonscan.IsNull(c):
			msgs = append(msgs, nil)
		case jsonscan.IsObject(c):
			msgs = append(msgs, tree.Lookup(c, "message"))
		default:
			ok = false // a choice that is not an object: the answer is not a Chat answer
		}
		return ok
	})
	if !ok {
		return nil
	}
	for _, m := range msgs {
		strip(m, true)
	}
	return items
}

// GymRecord is NeMo Gym's per-call token record, one line of <rollout_id>.tokens.jsonl, with its
// fields in its order and its types: ids are integers, log probabilities floats, routed_experts
// whatever the engine returned (or null), output_items the answer's items without token members,
// token_item_index the item the ids belong to (null when there is none), created_at seconds since
// the Unix epoch.
type GymRecord struct {
	SchemaVersion      int               `json:"schema_version"`
	RolloutID          string            `json:"rollout_id"`
	ModelCallID        string            `json:"model_call_id"`
	Model              string            `json:"model"`
	PromptTokenIDs     []int64           `json:"prompt_token_ids"`
	GenerationTokenIDs []int64           `json:"generation_token_ids"`
	GenerationLogProbs []float64         `json:"generation_log_probs"`
	RoutedExperts      json.RawMessage   `json:"routed_experts"`
	OutputItems        []json.RawMessage `json:"output_items"`
	TokenItemIndex     *int              `json:"token_item_index"`
	CreatedAt          float64           `json:"created_at"`
}

// GymSchemaVersion is the version of NeMo Gym's token record that GymRecord writes.
const GymSchemaVersion = 1

// Gym returns r as NeMo Gym's token record, and false when r is not Complete: Gym's record
// requires prompt ids, generated ids and one log probability per generated id.
func (r *Row) Gym() (GymRecord, bool) {
	if !r.Complete() {
		return GymRecord{}, false
	}
	g := GymRecord{
		SchemaVersion: GymSchemaVersion, RolloutID: r.RolloutID, ModelCallID: r.ModelCallID,
		PromptTokenIDs: r.PromptTokenIDs, GenerationTokenIDs: r.GenerationTokenIDs, GenerationLogProbs: r.GenerationLogProbs,
		RoutedExperts: r.routedExperts, OutputItems: r.outputItems, TokenItemIndex: r.tokenItemIndex, CreatedAt: r.CreatedAt,
	}
	if r.Model != nil {
		g.Model = *r.Model
	}
	if g.RoutedExperts == nil {
		g.RoutedExperts = json.RawMessage("null")
	}
	if g.OutputItems == nil {
		g.OutputItems = []json.RawMessage{}
	}
	return g, true
}

// Writer writes rows in one format.
type Writer interface {
	Write(r *Row) error
	// Close flushes what is buffered (Parquet writes its footer); it does not close the
	// underlying io.Writer.
	Close() error
}

// NewJSONLWriter writes one compact JSON object per row, each followed by "\n".
func NewJSONLWriter(w io.Writer) Writer {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonlWriter{bw: bw, enc: enc}
}

type jsonlWriter struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

func (j *jsonlWriter) Write(r *Row) error { return j.enc.Encode(r) }
func (j *jsonlWriter) Close() error       { return j.bw.Flush() }

// NewParquetWriter writes rows as one Parquet file with zstd-compressed columns, in row groups
// of at most 4096 rows.
func NewParquetWriter(w io.Writer) Writer {
	return &parquetWriter{w: parquet.NewGenericWriter[Row](w, parquet.Compression(&zstd.Codec{}))}
}

type parquetWriter struct {
	w   *parquet.GenericWriter[Row]
	buf []Row
}

func (p *parquetWriter) Write(r *Row) error {
	p.buf = append(p.buf, *r)
	if len(p.buf) >= 4096 {
		return p.flush()
	}
	return nil
}

func (p *parquetWriter) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	if _, err := p.w.Write(p.buf); err != nil {
		return fmt.Errorf("write parquet rows: %w", err)
	}
	p.buf = p.buf[:0]
	return p.w.Flush()
}

func (p *parquetWriter) Close() error {
	if err := p.flush(); err != nil {
		return err
	}
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("close parquet file: %w", err)
	}
	return nil
}

// ReadParquet reads the rows of a Parquet file NewParquetWriter wrote.
func ReadParquet(r io.ReaderAt, size int64) ([]Row, error) {
	rows, err := parquet.Read[Row](r, size)
	if err != nil {
		return nil, fmt.Errorf("read parquet rows: %w", err)
	}
	return rows, nil
}
