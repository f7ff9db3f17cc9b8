package view

import "io"

// ScannedBytes returns the bytes of capture lines the index has read so far.
func (x *Index) ScannedBytes() int64 { return x.scanned.Load() }

// WriteCallDetail is writeCallDetail, for the test that compares it with encoding/json.
func WriteCallDetail(w io.Writer, d *CallDetail) error { return writeCallDetail(w, d) }
