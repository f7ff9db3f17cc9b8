package modelcalls

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

// TestMergePayloadsByteIdentical: with payloads, Merge writes raw texts from their tokens; the
// merged line must be byte for byte the line built from decoded records (ReadAvailableRecords,
// AppendJSON with payloads), for raw texts full of escapes, non-string raw values and several
// calls, and with ng_model_call_capture appended or replaced in place.
func TestMergePayloadsByteIdentical(t *testing.T) {
	const env = `{"model_call_id":"%s","dialect":"chat","model_ref":null,"started_at":1.0,"completed_at":2.0,"latency_ms":5.0,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{"model":"m","x":"\/\u00e9"},"response":null`
	var lines []string
	for i, c := range capturefile.RawEscapes {
		id := strings.Repeat(string(rune('a'+i%6)), 32)
		l := strings.Replace(env, "%s", id, 1)
		switch i % 3 {
		case 0:
			l += `,"response_raw":` + c.Tok + `}`
		case 1:
			l += `,"request_raw":` + c.Tok + `,"response_raw":` + capturefile.RawEscapes[len(capturefile.RawEscapes)-1-i].Tok + `}`
		default:
			l += `,"request_raw":` + c.Tok + `,"response_raw":12}`
		}
		lines = append(lines, l)
	}
	// A damaged line in between keeps its index but gives no call.
	lines = append(lines[:3], append([]string{`{"model_call_id":7}`}, lines[3:]...)...)
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "r", strings.Join(lines, "\n")+"\n")

	recs, damaged, err := ReadAvailableRecords(capturefile.OpenStore(t, dir), "r")
	if err != nil || damaged != 1 || len(recs) != len(capturefile.RawEscapes) {
		t.Fatalf("read: %d records, %d damaged, %v", len(recs), damaged, err)
	}
	value := []byte(`{"rollout_id":"r","metrics":`)
	metrics := AggregateRecords(recs)
	value = metrics.AppendJSON(value)
	value = append(value, `,"calls":[`...)
	for i := range recs {
		if i > 0 {
			value = append(value, ',')
		}
		value = recs[i].AppendJSON(value, true)
	}
	value = append(value, `],"gaps":[{"code":"model_call_capture_records_unreadable","detail":"count=1"}]}`...)

	m, err := NewMerger([]string{dir}, MergeOptions{IncludePayloads: true, DrainTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		{`{"_ng_rollout_id":"r"}`, `{"_ng_rollout_id":"r","ng_model_call_capture":` + string(value) + `}`},
		{` {"_ng_rollout_id": "r", "ng_model_call_capture": null, "z": 1} `,
			` {"_ng_rollout_id": "r", "ng_model_call_capture": ` + string(value) + `, "z": 1} `},
	} {
		out, res, err := m.Merge(context.Background(), []byte(c.in))
		if err != nil || !res.Attached {
			t.Fatalf("merge %s: %v %+v", c.in, err, res)
		}
		if string(out) != c.want {
			t.Errorf("merge %s:\n got %s\nwant %s", c.in, out, c.want)
		}
	}
	// The hand-written canonical forms are what the merged line carries.
	out, _, _ := m.Merge(context.Background(), []byte(`{"_ng_rollout_id":"r"}`))
	// A raw value that is not a string (12) is null.
	for _, want := range []string{`"response_raw":"a/b"`, `"request_raw":"😀 😀 😀"`, `"request_raw":"café café café"`, `"response_raw":null`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("merged line lacks %s", want)
		}
	}
}
