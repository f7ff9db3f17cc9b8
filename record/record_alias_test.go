package record

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

// TestAppendJSONAliasedStrings: a record read into a buffer writes the same JSON whether or not
// the writer is told the buffer (appendJSON copies the strings that lie in it without escaping
// them), for every fixture line and for lines whose strings hold escapes, non-ASCII text and
// characters AppendString escapes.
func TestAppendJSONAliasedStrings(t *testing.T) {
	var file bytes.Buffer
	for _, l := range capturefile.GymLines(t, "../testdata") {
		file.Write(l)
		file.WriteByte('\n')
	}
	for _, l := range []string{
		`{"model_call_id":"a\u0062c","dialect":"chat","model_ref":{"type":"responses_api_models","name":"p\/m"},"response":{"model":"m\u00e9","choices":[{"finish_reason":"st\"op","message":{"reasoning_content":"thé\nthink","tool_calls":[{"id":"c\\1","function":{"name":"f\u2028","arguments":"{\"a\":1}"}}]}}]}}`,
		`{"model_call_id":"ü€𝄞","dialect":"messages","response":{"model":"claude","stop_reason":"end","content":[{"type":"thinking","thinking":"x"},{"type":"thinking","thinking":"y\ud83d\ude00"},{"type":"tool_use","id":"t","name":"n","input":{"k":"v"}}]}}`,
	} {
		file.WriteString(l)
		file.WriteByte('\n')
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "0-0"+capture.CaptureSuffix), file.Bytes(), 0o640); err != nil {
		t.Fatal(err)
	}
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	var boxes boxSlab
	var buf []byte
	recs, _, err := readAvailableRecords(store, "0-0", nil, &boxes, &buf)
	if err != nil || len(recs) < 40 {
		t.Fatalf("read: %d records, %v", len(recs), err)
	}
	for i := range recs {
		for _, payloads := range []bool{false, true} {
			want := recs[i].AppendJSON(nil, payloads)
			if got := recs[i].appendJSON(nil, payloads, buf); !bytes.Equal(got, want) {
				t.Fatalf("record %d (payloads %v):\n got %s\nwant %s", i, payloads, got, want)
			}
		}
	}
}
