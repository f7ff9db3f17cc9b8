package modelcalls

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// rawEscapes are JSON string tokens of request_raw/response_raw values as writers other than ours
// may put them in a line: escapes our writer never produces next to the ones it does, and the
// characters it writes as they are (é, U+2028, a U+FFFD that replaced invalid UTF-8).
var rawEscapes = []struct{ tok, want string }{
	{`""`, `""`},
	{`"plain text"`, `"plain text"`},
	{`"data: {\"a\":1}\n\n"`, `"data: {\"a\":1}\n\n"`},
	{`"a\/b"`, `"a/b"`},
	{`"caf\u00e9 caf\u00E9 café"`, `"café café café"`},
	{`"\ud83d\ude00 \uD83D\uDE00 😀"`, `"😀 😀 😀"`},
	{`"\u0001\u001f\u001F\u0000\u007f"`, `"\u0001\u001f\u001f\u0000` + "\x7f" + `"`},
	{`"\u0008\u0009\u000a\u000c\u000d\b\t\n\f\r"`, `"\b\t\n\f\r\b\t\n\f\r"`},
	{`"\u0022\u005c\"\\"`, `"\"\\\"\\"`},
	{`"\u2028\u2029` + "\u2028" + `"`, `"` + "\u2028\u2029\u2028" + `"`},
	{`"bad \ufffd byte ` + "\ufffd" + `"`, `"bad ` + "\ufffd" + ` byte ` + "\ufffd" + `"`},
	{`"\\\/\\"`, `"\\/\\"`},
	{`"\u0041\u00e9\u4e2d\ud800\udc00"`, `"Aé中` + "\U00010000" + `"`},
	{`"ends in escape \n"`, `"ends in escape \n"`},
}

// TestMergePayloadsByteIdentical: with payloads, Merge writes raw texts from their tokens; the
// merged line must be byte for byte the line built from decoded records (ReadAvailableRecords,
// AppendJSON with payloads), for raw texts full of escapes, non-string raw values and several
// calls, and with ng_model_call_capture appended or replaced in place.
func TestMergePayloadsByteIdentical(t *testing.T) {
	const env = `{"model_call_id":"%s","dialect":"chat","model_ref":null,"started_at":1.0,"completed_at":2.0,"latency_ms":5.0,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{"model":"m","x":"\/\u00e9"},"response":null`
	var lines []string
	for i, c := range rawEscapes {
		id := strings.Repeat(string(rune('a'+i%6)), 32)
		l := strings.Replace(env, "%s", id, 1)
		switch i % 3 {
		case 0:
			l += `,"response_raw":` + c.tok + `}`
		case 1:
			l += `,"request_raw":` + c.tok + `,"response_raw":` + rawEscapes[len(rawEscapes)-1-i].tok + `}`
		default:
			l += `,"request_raw":` + c.tok + `,"response_raw":12}`
		}
		lines = append(lines, l)
	}
	// A damaged line in between keeps its index but gives no call.
	lines = append(lines[:3], append([]string{`{"model_call_id":7}`}, lines[3:]...)...)
	dir := t.TempDir()
	writeCapture(t, dir, "r", strings.Join(lines, "\n")+"\n")

	recs, damaged, err := ReadAvailableRecords(openStore(t, dir), "r")
	if err != nil || damaged != 1 || len(recs) != len(rawEscapes) {
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
