package jsonmember

import (
	"reflect"
	"testing"
)

func TestMembers(t *testing.T) {
	obj := []byte(`{ "a": 1 ,"b":{"x":[1,2]},  "a" : "s"}`)
	ms := Members(t, obj)
	want := []Member{{"a", 1, 7, 8}, {"b", 8, 14, 25}, {"a", 25, 34, 37}}
	if !reflect.DeepEqual(ms, want) {
		t.Fatalf("Members = %v, want %v", ms, want)
	}
	if got := string(obj[ms[1].Start:ms[1].ValueEnd]); got != ` ,"b":{"x":[1,2]}` {
		t.Errorf("member b with its separator = %q", got)
	}
	if m, ok := Last(ms, "a"); !ok || string(obj[m.ValueStart:m.ValueEnd]) != `"s"` {
		t.Errorf("Last(a) = %v, %v; want the second a", m, ok)
	}
	if _, ok := Last(ms, "c"); ok {
		t.Error("Last(c) found a member that is not there")
	}
	if got := Keys(ms); !reflect.DeepEqual(got, []string{"a", "b", "a"}) {
		t.Errorf("Keys = %v", got)
	}
	if got := Members(t, []byte(`{}`)); len(got) != 0 {
		t.Errorf("Members of {} = %v", got)
	}
}
