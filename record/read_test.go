package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// TestReadGymCapture reads back every line NeMo Gym wrote: all build, except the one line 3-0's
// test scenario tore on purpose.
func TestReadGymCapture(t *testing.T) {
	store, err := capture.OpenExisting("../testdata/gym-capture/capture")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../testdata/gym-capture/capture/*" + capture.CaptureSuffix)
	if err != nil || len(files) < 39 {
		t.Fatalf("capture files: %d, %v", len(files), err)
	}
	totalLines, totalRecords := 0, 0
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), capture.CaptureSuffix)
		t.Run(id, func(t *testing.T) {
			lines := capturefile.ReadLines(t, f)
			recs, damaged, err := ReadAvailableRecords(store, id)
			if err != nil {
				t.Fatal(err)
			}
			wantDamaged := 0
			if id == "3-0" {
				wantDamaged = 1 // "a line torn by a crash" (gym-capture/README.md)
			}
			totalLines += len(lines)
			totalRecords += len(recs)
			if damaged != wantDamaged || len(recs) != len(lines)-wantDamaged {
				t.Fatalf("%d records, %d damaged; want %d, %d", len(recs), damaged, len(lines)-wantDamaged, wantDamaged)
			}
			for i, r := range recs {
				if r.CallIndex != i || r.ModelCallID == nil || len(*r.ModelCallID) != 32 || r.ModelRef == nil ||
					r.Dialect == nil || r.StartedAt == nil || r.CompletedAt == nil || r.LatencyTotalMS == nil {
					t.Errorf("record %d incomplete: %s", i, r.AppendJSON(nil, false))
				}
				// Gym wrote the pre-seed format: provenance and client ids read back as null.
				if r.ResponseSource != nil || r.UpstreamAttempted != nil || r.ClientSessionID != nil {
					t.Errorf("record %d: seed fields not null", i)
				}
			}
			strict, err := ReadRecords(store, id)
			if wantDamaged > 0 {
				var le *capture.LineError
				if !errors.As(err, &le) || le.Line != len(lines) {
					t.Errorf("strict read: %v, want a LineError at line %d", err, len(lines))
				}
				return
			}
			if err != nil || len(strict) != len(recs) {
				t.Fatalf("strict read: %d records, %v", len(strict), err)
			}
		})
	}
	if totalRecords != totalLines-1 {
		t.Errorf("%d records from %d lines", totalRecords, totalLines)
	}
}

// Lines for hand-built capture files.
const (
	okLine        = `{"model_call_id":"%s","dialect":"chat","model_ref":{"type":"responses_api_models","name":"p"},"started_at":1.0,"completed_at":2.0,"latency_ms":%s,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{"model":"m"},"response":{"usage":{"prompt_tokens":%d,"completion_tokens":1}}}`
	badModelRef   = `{"model_call_id":"bad-ref","dialect":"chat","model_ref":{"type":"agents","name":"p"},"status_code":200}`
	nanLine       = `{"model_call_id":"nan","latency_ms":NaN}`
	badPayload    = `{"model_call_id":"bad-payload","dialect":"responses","response":{"output":[{"type":"reasoning","summary":7}],"usage":{"input_tokens":"9"}}}`
	wrongStatus   = `{"model_call_id":"bad-status","status_code":"200"}`
	wrongStarted  = `{"model_call_id":"bad-started","started_at":"yesterday"}`
	wrongCategory = `{"model_call_id":"bad-category","error_category":["timeout"]}`
)

func ok(id string, tokens int) string { return fmt.Sprintf(okLine, id, "1.5", tokens) }

func TestReadAvailableRecords(t *testing.T) {
	cases := []struct {
		name        string
		content     string
		wantIndices []int
		wantDamaged int
	}{
		// NeMo Gym's tolerant-read example, checked against its reader. With our damage rules the bad
		// model_ref line is still damaged (model_ref is an envelope field), so the result is the same.
		{"reference example", strings.Join([]string{ok("a", 1), "", "{not json", "[1,2]", badModelRef, "  ", ok("b", 2), nanLine, ok("c", 3)}, "\n") + "\n",
			[]int{0, 4, 6}, 4},
		// Where we keep more than NeMo Gym: a malformed payload is skipped, not damage.
		{"malformed payload kept", ok("a", 1) + "\n" + badPayload + "\n", []int{0, 1}, 0},
		{"torn tail", ok("a", 1) + "\n" + ok("b", 2)[:40], []int{0}, 1},
		{"torn line then repaired append", ok("a", 1) + "\n" + ok("b", 2)[:40] + "\n" + ok("c", 3) + "\n", []int{0, 2}, 1},
		{"non-object lines", "1\n\"s\"\nnull\n[]\n" + ok("a", 1) + "\n", []int{4}, 4},
		{"wrong-typed envelope fields", strings.Join([]string{wrongStatus, ok("a", 1), wrongStarted, wrongCategory}, "\n"), []int{1}, 3},
		{"invalid UTF-8", ok("a", 1) + "\n{\"model_call_id\":\"\xff\"}\n" + ok("b", 2) + "\n", []int{0, 2}, 1},
		{"blank lines consume no index", "\n\n \t\n" + ok("a", 1) + "\n\r\n" + ok("b", 2) + "\n", []int{0, 1}, 0},
		{"CRLF line endings", ok("a", 1) + "\r\n" + ok("b", 2) + "\r\n", []int{0, 1}, 0},
		{"empty file", "", nil, 0},
		// The raw texts are checked while they are decoded: the same lines stay damaged.
		{"invalid raw texts", strings.Join([]string{`{"response_raw":"\ud800"}`, "{\"request_raw\":\"a\x01\"}",
			"{\"response_raw\":\"\xff\"}", `{"response_raw":"\x"}`, `{"response_raw":"\udc00","response_raw":"ok"}`,
			`{"request_raw":"` + strings.Repeat(`ab\"cd\n`, 20) + `\u00e9\ud83d\ude00","response_raw":7}`}, "\n"), []int{5}, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			capturefile.WriteCapture(t, dir, "r-1", c.content)
			recs, damaged, err := ReadAvailableRecords(capturefile.OpenStore(t, dir), "r-1")
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			for _, r := range recs {
				idx = append(idx, r.CallIndex)
			}
			if fmt.Sprint(idx) != fmt.Sprint(c.wantIndices) || damaged != c.wantDamaged {
				t.Errorf("call_index %v damaged %d; want %v damaged %d", idx, damaged, c.wantIndices, c.wantDamaged)
			}
		})
	}
}

func TestReadRecordsStrict(t *testing.T) {
	dir := t.TempDir()
	store := capturefile.OpenStore(t, dir)
	if recs, err := ReadRecords(store, "missing"); err != nil || len(recs) != 0 {
		t.Errorf("missing file: %v, %v", recs, err)
	}
	capturefile.WriteCapture(t, dir, "good", ok("a", 1)+"\n\n"+ok("b", 2)+"\n")
	recs, err := ReadRecords(store, "good")
	if err != nil || len(recs) != 2 || recs[1].CallIndex != 1 || *recs[1].ModelCallID != "b" {
		t.Fatalf("good: %v %v", recs, err)
	}
	for name, c := range map[string]struct {
		content string
		line    int
		build   bool
	}{
		"undecodable":        {ok("a", 1) + "\n{not json\n", 2, false},
		"wrong-typed field":  {ok("a", 1) + "\n\n" + wrongStatus + "\n", 3, true},
		"bad model_ref only": {badModelRef + "\n", 1, true},
	} {
		t.Run(name, func(t *testing.T) {
			capturefile.WriteCapture(t, dir, "bad", c.content)
			_, err := ReadRecords(store, "bad")
			var le *capture.LineError
			if !errors.As(err, &le) || le.Line != c.line {
				t.Fatalf("err = %v, want a LineError at line %d", err, c.line)
			}
			if errors.Is(err, ErrInvalidExchange) != c.build {
				t.Errorf("errors.Is(ErrInvalidExchange) = %v, want %v", !c.build, c.build)
			}
		})
	}
	if _, err := ReadRecords(store, "../x"); err == nil {
		t.Error("invalid id accepted")
	}
}

// TestReadAvailableAgrees reads lines with every kind of damage: the records and the damaged count
// are the same as the store's tolerant read followed by BuildRecord, and the raw texts kept as
// tokens decode (RawText.Text) as encoding/json decodes them and are written as AppendString
// writes the decoded text.
func TestReadAvailableAgrees(t *testing.T) {
	lines := []string{ok("a", 1), `{"response_raw":"\ud800"}`, "{\"request_raw\":\"a\x01\"}", "{\"response_raw\":\"\xff\"}",
		`{"response_raw":"\udc00","response_raw":"ok"}`, `{"response_raw":"fine","response_raw":"\ud800\u0041"}`,
		`{"request_raw":"` + strings.Repeat(`ab\"cd\n`, 20) + `\u00e9\ud83d\ude00","response_raw":"x\/y"}`,
		`{"request_raw":"\"unterminated}`, `{"response_raw":"a"`, badModelRef, nanLine, ok("b", 2),
		// Repeated responses: the last one counts, whichever of them the validating pass mapped.
		`{"response":{"id":"r1","model":"m1"},"response":null}`, `{"response":null,"response":{"id":"r2","status":"s"}}`,
		`{"response":{"id":"r3"},"x":1,"respons\u0065":{"id":"r4","stop_reason":"end","usage":{"input_tokens":3}}}`,
		`{"response":{"id":"r5"},"response":[1]}`}
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "r-1", strings.Join(lines, "\n")+"\n")
	store := capturefile.OpenStore(t, dir)
	entries, damages, err := store.ReadAvailable("r-1")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	wantDamaged := len(damages)
	for _, e := range entries {
		rec, err := BuildRecord(e.Data, e.Index)
		if err != nil {
			wantDamaged++
			continue
		}
		want = append(want, string(rec.AppendJSON(nil, true)))
	}
	recs, damaged, err := ReadAvailableRecords(store, "r-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range recs {
		got = append(got, string(recs[i].AppendJSON(nil, true)))
		for _, raw := range []RawText{recs[i].RequestRaw, recs[i].ResponseRaw} {
			if raw == nil {
				continue
			}
			var want string
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("record %d: token %s: %v", i, raw, err)
			}
			if raw.Text() != want {
				t.Errorf("record %d: Text() = %q, want %q", i, raw.Text(), want)
			}
			if enc := string(raw.appendJSON(nil)); enc != string(jsonscan.AppendString(nil, want)) {
				t.Errorf("record %d: appendJSON = %s, want %s", i, enc, jsonscan.AppendString(nil, want))
			}
		}
	}
	if damaged != wantDamaged || len(recs) != len(want) || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d records, %d damaged; want %d, %d\n got %v\nwant %v", len(recs), damaged, len(want), wantDamaged, got, want)
	}
}
