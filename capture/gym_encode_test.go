package capture_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestEncodeMatchesGymBytes re-encodes every complete line NeMo Gym's CaptureStore wrote
// (testdata/gym-capture/capture at the repository root) and expects the very same bytes: key names and
// order, compact separators, float and string forms.
// The rule it checks: docs/format.md, section 3 (the capture line) and 3.1 (its bytes).
func TestEncodeMatchesGymBytes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(capturetest.GymCaptureDir(), "*.capture.jsonl"))
	if len(files) < 30 {
		t.Fatalf("only %d gym capture files found", len(files))
	}
	lines := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if capture.CheckLine(line) != nil {
				continue // 3-0 ends with a line torn on purpose
			}
			g, err := capturetest.Decode(line)
			if err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			ex := &capture.Exchange{
				ModelCallID: g.ModelCallID, Dialect: g.Dialect, ModelRef: g.ModelRef,
				StartedAt: g.StartedAt, CompletedAt: g.CompletedAt, LatencyMS: g.LatencyMS,
				LatencyTTFTMS: g.LatencyTTFTMS, StatusCode: g.StatusCode, ErrorCategory: g.ErrorCategory,
				Request: nullToNil(g.Request), Response: nullToNil(g.Response),
				RequestRaw: g.RequestRaw, ResponseRaw: g.ResponseRaw,
			}
			got, err := capture.EncodeExchange(ex)
			if err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			if !bytes.Equal(got, line) {
				t.Errorf("%s:%d: re-encoded line differs\n got: %.300s\nwant: %.300s", f, n, got, line)
			}
			lines++
		}
	}
	if lines < 40 {
		t.Fatalf("compared only %d lines", lines)
	}
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if string(r) == "null" {
		return nil
	}
	return r
}
