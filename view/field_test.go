package view

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestSummaryFieldIsTheRowsJSON: what a filter or sort compares for each sortable field is the value
// the API shows in the row (numbers as float64, null for unknown), set and unset.
func TestSummaryFieldIsTheRowsJSON(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	str := func(v string) *string { return &v }
	set := RolloutSummary{ID: "r1", Dir: "/c", Calls: 3, Errors: 1, Pending: 2, Abandoned: 4, DamagedLines: 5,
		Incomplete: true, TokensIn: i64(10), TokensOut: i64(11), TokensCached: i64(12), TokensReasoning: i64(13),
		LatencyMS: 1.5, MaxTTFTMS: f64(0.5), StartedAt: f64(100), EndedAt: f64(101), DurationS: f64(1),
		Model: str("m"), Dialect: str("chat")}
	for _, s := range []RolloutSummary{set, {ID: "r2"}} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var row map[string]any
		if err := json.Unmarshal(b, &row); err != nil {
			t.Fatal(err)
		}
		for _, name := range SortFields {
			if got, want := s.field(name, nil), row[name]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: field(%s) = %#v, the row shows %#v", s.ID, name, got, want)
			}
		}
	}
}
