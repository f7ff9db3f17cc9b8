package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls"
)

func TestParseOverride(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want Override
	}{
		{"++observability_enabled=true", Override{OpForce, []string{"observability_enabled"}, true, true}},
		{"+a.b=3", Override{OpAdd, []string{"a", "b"}, 3, true}},
		{"a=1.5", Override{OpSet, []string{"a"}, 1.5, true}},
		{"++dir=/tmp/x y", Override{OpForce, []string{"dir"}, "/tmp/x y", true}},
		{"++url=http://h:1/v1", Override{OpForce, []string{"url"}, "http://h:1/v1", true}},
		{"++a=", Override{OpForce, []string{"a"}, "", true}},
		{"++a=null", Override{OpForce, []string{"a"}, nil, true}},
		{"++a=[1, b]", Override{OpForce, []string{"a"}, []any{1, "b"}, true}},
		{"++a={k: v}", Override{OpForce, []string{"a"}, map[string]any{"k": "v"}, true}},
		{"++a='true'", Override{OpForce, []string{"a"}, "true", true}},
		{"++a=x=y", Override{OpForce, []string{"a"}, "x=y", true}},
		{"++a=[unclosed", Override{OpForce, []string{"a"}, "[unclosed", true}},
		{"~a", Override{OpDelete, []string{"a"}, nil, false}},
		{"~a=1", Override{OpDelete, []string{"a"}, 1, true}},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := ParseOverride(tc.arg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseOverride(%q) = %#v, want %#v", tc.arg, got, tc.want)
			}
		})
	}
}

func TestParseOverrideErrors(t *testing.T) {
	for _, arg := range []string{"++a", "+a", "a", "++=1", "=1", "++a..b=1", "++.a=1", "~"} {
		if _, err := ParseOverride(arg); err == nil || !strings.Contains(err.Error(), arg) {
			t.Errorf("ParseOverride(%q) error = %v, want one quoting the argument", arg, err)
		}
	}
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   Values
		args    []string
		want    Values
		wantErr string
	}{
		{"force adds", Values{}, []string{"++observability_enabled=true", "++model_call_capture_dir=/c"},
			Values{"observability_enabled": true, "model_call_capture_dir": "/c"}, ""},
		{"force replaces", Values{"a": 1}, []string{"++a=2"}, Values{"a": 2}, ""},
		{"later wins", Values{}, []string{"++a=1", "++a=2"}, Values{"a": 2}, ""},
		{"nested created", Values{}, []string{"++s.m.k=v"}, Values{"s": map[string]any{"m": map[string]any{"k": "v"}}}, ""},
		{"set existing", Values{"a": 1}, []string{"a=2"}, Values{"a": 2}, ""},
		{"set missing", Values{}, []string{"a=2"}, nil, "does not exist"},
		{"add present", Values{"a": 1}, []string{"+a=2"}, nil, "already exists"},
		{"delete", Values{"a": 1, "b": 2}, []string{"~a"}, Values{"b": 2}, ""},
		{"delete matching", Values{"a": 1}, []string{"~a=1"}, Values{}, ""},
		{"delete mismatch", Values{"a": 1}, []string{"~a=2"}, nil, "holds"},
		{"delete missing", Values{}, []string{"~a"}, nil, "does not exist"},
		{"through scalar", Values{"a": 1}, []string{"++a.b=1"}, nil, "not a mapping"},
		{"set through missing", Values{}, []string{"a.b=1"}, nil, "a does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.start
			err := v.Apply(tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply error = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, tc.want) {
				t.Fatalf("after Apply: %#v, want %#v", v, tc.want)
			}
		})
	}
}

func TestOverridesFeedCapture(t *testing.T) {
	v, err := Parse([]byte("observability_enabled: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Apply("++observability_enabled=true", "++model_call_capture_dir=/data/caps"); err != nil {
		t.Fatal(err)
	}
	dirs, err := modelcalls.CaptureDirsFromConfig(v)
	if err != nil || len(dirs) != 1 || dirs[0] != "/data/caps" {
		t.Fatalf("CaptureDirsFromConfig = %q, %v", dirs, err)
	}
}

func TestIsOverride(t *testing.T) {
	for arg, want := range map[string]bool{
		"++a=1": true, "+a=1": true, "~a": true, "a=1": true, "=1": false, "plain": false, "": false,
	} {
		if got := IsOverride(arg); got != want {
			t.Errorf("IsOverride(%q) = %v, want %v", arg, got, want)
		}
	}
}

func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{"++a=1", "+a.b=[1,2]", "~a", "a={k: v}", "++a=", "++a..b=1", "++a=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		o, err := ParseOverride(arg)
		if err != nil {
			return
		}
		if len(o.Key) == 0 {
			t.Fatalf("ParseOverride(%q) gave an empty key", arg)
		}
		for _, k := range o.Key {
			if k == "" {
				t.Fatalf("ParseOverride(%q) gave an empty key part: %q", arg, o.Key)
			}
		}
		v := Values{}
		if o.Op == OpForce {
			if err := v.Apply(arg); err != nil {
				t.Fatalf("++ override %q did not apply to empty values: %v", arg, err)
			}
		}
	})
}
