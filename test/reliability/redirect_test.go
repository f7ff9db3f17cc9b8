//go:build unix

package reliability

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Redirects stay inside the gateway: a Location on the upstream's own origin is rewritten to the
// gateway's address under the same /ng-rollout/<id> prefix (nginx's "proxy_redirect default"), so
// a client that follows it is captured again and never learns the upstream's address; other
// redirects pass through unchanged.

func TestRedirectsStayInsideTheGateway(t *testing.T) {
	var upstream string // the upstream's base URL, with its base path /base
	srv := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("case") {
		case "absolute":
			w.Header().Set("Location", upstream+"/v1/chat/completions?case=moved")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "path":
			w.Header().Set("Location", "/base/v1/chat/completions?case=moved")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "foreign":
			w.Header().Set("Location", "https://example.com/v1/chat/completions")
			w.WriteHeader(http.StatusMovedPermanently)
		case "outside":
			w.Header().Set("Location", strings.TrimSuffix(upstream, "/base")+"/login")
			w.WriteHeader(http.StatusFound)
		case "relative":
			w.Header().Set("Location", "completions?case=moved")
			w.WriteHeader(http.StatusSeeOther)
		default:
			echoHandler(w, r)
		}
	})
	upstream = srv.URL + "/base"
	g := startGateway(t, upstream, nil)
	noFollow := &http.Client{Transport: g.ctr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	host := strings.TrimPrefix(srv.URL, "http://")

	for _, tc := range []struct {
		name, want string
	}{
		{"absolute", "/ng-rollout/rd-absolute/v1/chat/completions?case=moved"},
		{"path", "/ng-rollout/rd-path/v1/chat/completions?case=moved"},
		{"foreign", "https://example.com/v1/chat/completions"},
		{"outside", "http://" + host + "/login"},
		{"relative", "completions?case=moved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "rd-" + tc.name
			res, err := noFollow.Post(g.url(id, "/v1/chat/completions?case="+tc.name), "application/json", bytesReader(echoRequest(id, false, 0)))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			got := res.Header.Get("Location")
			t.Logf("%s: %d Location %q", tc.name, res.StatusCode, got)
			if got != tc.want {
				t.Errorf("Location %q, want %q", got, tc.want)
			}
		})
	}

	// A client that follows the redirect (Go's client re-sends a 307's method and body) comes
	// back through the gateway: both calls are in the rollout's capture.
	id := "rd-follow"
	res, err := g.client.Post(g.url(id, "/v1/chat/completions?case=absolute"), "application/json", bytesReader(echoRequest(id, false, 0)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != string(echoAnswer(id, false, 0)) {
		t.Fatalf("followed redirect: %d %.100q", res.StatusCode, body)
	}
	if res.Request.URL.Host == host {
		t.Errorf("the client followed the redirect straight to the upstream (%s)", res.Request.URL)
	}
	g.drain()
	xs := capturetest.Lines(t, g.store, id)
	var statuses []string
	for _, x := range xs {
		statuses = append(statuses, num(x.StatusCode))
	}
	t.Logf("followed redirect: final URL %s, captured statuses %v", res.Request.URL, statuses)
	if fmt.Sprint(statuses) != "[307 200]" {
		t.Errorf("captured statuses %v, want [307 200]: the follow-up call must be captured too", statuses)
	}
}
