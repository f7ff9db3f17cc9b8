package record

import (
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

// TestBoxesReset: records read with a Boxes take their boxes from it, and Reset zeroes every box
// of the chunk so that a pooled Boxes keeps no string of a dropped read alive.
func TestBoxesReset(t *testing.T) {
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n"+ok("b", 2)+"\n")
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	var boxes Boxes
	var buf []byte
	recs, damaged, err := ReadAvailableInto(store, "r", nil, &boxes, &buf)
	if err != nil || damaged != 0 || len(recs) != 2 || *recs[1].ModelCallID != "b" {
		t.Fatalf("read: %d records, %d damaged, %v", len(recs), damaged, err)
	}
	if len(boxes.slab.boxes) != 2 || boxes.Cap() < 2 {
		t.Fatalf("boxes hold %d records (cap %d), want 2", len(boxes.slab.boxes), boxes.Cap())
	}
	boxes.Reset()
	for i, b := range boxes.slab.boxes[:boxes.Cap()] {
		if b != (recordBox{}) {
			t.Fatalf("box %d (model_call_id %q) kept after Reset", i, b.modelCallID)
		}
	}
	if len(boxes.slab.boxes) != 0 {
		t.Fatalf("Reset left %d boxes", len(boxes.slab.boxes))
	}
}
