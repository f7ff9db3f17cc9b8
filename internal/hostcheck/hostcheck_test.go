package hostcheck

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAllowed(t *testing.T) {
	g, err := New(http.NotFoundHandler(), []string{"192.168.1.7:7580"}, []string{"box.lan", "Other.Example:9000", "10.0.0.5"}, "--allowed-host", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"", true},
		{"localhost", true},
		{"localhost:7580", true},
		{"LOCALHOST.:1", true},
		{"app.localhost:3000", true},
		{"127.0.0.1", true},
		{"127.0.0.1:7580", true},
		{"127.255.3.4:1", true},
		{"[::1]:7580", true},
		{"::1", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"192.168.1.7:7580", true}, // the listen address
		{"192.168.1.7:1234", true}, // any port
		{"box.lan", true},
		{"BOX.LAN:8080", true},
		{"other.example", true},
		{"10.0.0.5:1", true},

		{"evil.example", false},
		{"evil.example:7580", false},
		{"127.0.0.1.evil.example", false},
		{"localhost.evil.example", false},
		{"evillocalhost", false},
		{"192.168.1.8:7580", false},
		{"0.0.0.0:7580", false},
		{"[::]:7580", false},
		{"2130706433", false},
		{"box.lan.evil.example", false},
		{"evil.example:80:80", false},
	} {
		if got := g.Allowed(tc.host); got != tc.want {
			t.Errorf("Allowed(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

// An unspecified listen address (all interfaces) adds no name: a page must not reach it as 0.0.0.0.
func TestUnspecifiedListenAddsNothing(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:7580", "[::]:7580", ":7580"} {
		g, err := New(http.NotFoundHandler(), []string{listen}, nil, "--allowed-host", nil)
		if err != nil {
			t.Fatal(err)
		}
		if g.Allowed("0.0.0.0:7580") || g.Allowed("[::]:7580") || g.Allowed("evil.example") || !g.Allowed("127.0.0.1:7580") {
			t.Errorf("listen %s: unspecified or foreign hosts allowed, or loopback refused", listen)
		}
	}
	if _, err := New(http.NotFoundHandler(), []string{"127.0.0.1:0"}, []string{" "}, "--allowed-host", nil); err == nil {
		t.Error("an empty --allowed-host was accepted")
	}
}

func TestRefusedWith403(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	g, err := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret prompts") }),
		[]string{"127.0.0.1:7580"}, nil, "--allowed-host", log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/overview", nil)
		req.Host = "rebind.evil.example:7580"
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var v struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if res.StatusCode != http.StatusForbidden || json.Unmarshal(b, &v) != nil || v.Error.Code != "host_not_allowed" ||
			!strings.Contains(v.Error.Message, "--allowed-host rebind.evil.example") || strings.Contains(string(b), "secret") {
			t.Fatalf("answer %d %s; want 403 host_not_allowed naming the flag", res.StatusCode, b)
		}
	}
	if n := strings.Count(logs.String(), "refused a request for another host"); n != 1 {
		t.Errorf("%d warn lines for one host, want 1:\n%s", n, logs.String())
	}
	res, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(b) != "secret prompts" {
		t.Errorf("loopback request: %d %q", res.StatusCode, b)
	}
}
