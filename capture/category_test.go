package capture

import "testing"

func TestStatusCategory(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{0, ""}, {200, ""}, {204, ""}, {302, ""}, {399, ""},
		{400, "client_error"}, {401, "auth"}, {403, "auth"}, {404, "not_found"},
		{408, "timeout"}, {409, "client_error"}, {413, "client_error"}, {422, "client_error"},
		{429, "rate_limit"}, {499, "client_error"},
		{500, "upstream_error"}, {502, "upstream_error"}, {503, "upstream_error"},
		{504, "timeout"}, {529, "upstream_error"}, {600, "upstream_error"}, {999, "upstream_error"},
	}
	for _, tt := range tests {
		if got := StatusCategory(tt.status); got != tt.want {
			t.Errorf("StatusCategory(%d) = %q, want %q", tt.status, got, tt.want)
		}
	}
}
