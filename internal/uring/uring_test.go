package uring

import "testing"

func TestOff(t *testing.T) {
	for v, want := range map[string]bool{"": false, "on": false, "1": false, "auto": false,
		"off": true, "OFF": true, " off ": true, "0": true, "false": true, "no": true} {
		t.Setenv(EnvVar, v)
		if got := Off(); got != want {
			t.Errorf("%s=%q: Off() = %v, want %v", EnvVar, v, got, want)
		}
	}
}
