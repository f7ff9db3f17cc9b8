package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcalls/modelcalls"
)

func TestRun(t *testing.T) {
	res, err := Run(context.Background(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rollouts) != 8 {
		t.Fatalf("%d rollouts, want 8", len(res.Rollouts))
	}
	merged, err := os.ReadFile(res.MergedPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(merged), []byte("\n"))
	if len(lines) != len(res.Rollouts) {
		t.Fatalf("%d merged lines, want %d", len(lines), len(res.Rollouts))
	}
	for i, r := range res.Rollouts {
		t.Run(r.ID, func(t *testing.T) {
			records, err := modelcalls.ReadRecords(res.Store, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(records) != r.Calls {
				t.Fatalf("%d capture lines, the script made %d calls", len(records), r.Calls)
			}
			var rec struct {
				ID      string `json:"_ng_rollout_id"`
				Capture struct {
					RolloutID string `json:"rollout_id"`
					Metrics   struct {
						NumCalls int `json:"num_calls"`
					} `json:"metrics"`
					Calls []json.RawMessage `json:"calls"`
					Gaps  []struct {
						Code string `json:"code"`
					} `json:"gaps"`
				} `json:"ng_model_call_capture"`
			}
			if err := json.Unmarshal(lines[i], &rec); err != nil {
				t.Fatal(err)
			}
			if rec.ID != r.ID || rec.Capture.RolloutID != r.ID || rec.Capture.Metrics.NumCalls != r.Calls || len(rec.Capture.Calls) != r.Calls {
				t.Fatalf("merged record = %+v", rec)
			}
			if r.Calls == 0 {
				if len(rec.Capture.Gaps) != 1 || rec.Capture.Gaps[0].Code != "model_call_capture_no_records" {
					t.Fatalf("gaps = %+v, want no_records", rec.Capture.Gaps)
				}
				return
			}
			if len(rec.Capture.Gaps) != 0 {
				t.Fatalf("unexpected gaps %+v", rec.Capture.Gaps)
			}
			for _, c := range records {
				if c.ClientSessionID == nil || *c.ClientSessionID != r.ID+"-session" {
					t.Errorf("call %d client_session_id = %v", c.CallIndex, c.ClientSessionID)
				}
				if c.ResponseSource == nil || *c.ResponseSource != "upstream" || c.ModelRef == nil || c.ModelRef.Name != ModelServerName {
					t.Errorf("call %d provenance/model_ref wrong: %v %v", c.CallIndex, c.ResponseSource, c.ModelRef)
				}
				if c.LatencyTTFTMS == nil || (c.TokensIn == nil && c.ErrorCategory == nil) {
					t.Errorf("call %d lacks tokens or TTFT", c.CallIndex)
				}
			}
			if r.Calls == 2 && (len(records[0].ToolCalls) != 1 || len(records[1].ToolCalls) != 0) {
				t.Errorf("tool calls per turn = %d, %d; want 1, 0", len(records[0].ToolCalls), len(records[1].ToolCalls))
			}
			if r.Calls == 1 && (records[0].ErrorCategory == nil || *records[0].ErrorCategory != "rate_limit") {
				t.Errorf("rate-limited call category = %v", records[0].ErrorCategory)
			}
		})
	}
	// The script sends an Authorization header on every call; it must not reach any capture file.
	files, _ := filepath.Glob(filepath.Join(res.CaptureDir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte("demo-key-never-captured")) {
			t.Errorf("%s holds the Authorization header", f)
		}
	}
}
