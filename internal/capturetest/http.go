package capturetest

import (
	"io"
	"net/http"
	"testing"
)

// Do sends req with http.DefaultClient and returns the response's status code and whole body (the
// body is closed); a transport error fails t.
func Do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return res.StatusCode, string(b)
}

// Get is Do of a GET of url.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	return Do(t, newRequest(t, http.MethodGet, url, nil))
}

// Post is Do of a POST of body to url with Content-Type contentType.
func Post(t testing.TB, url, contentType string, body io.Reader) (int, string) {
	t.Helper()
	req := newRequest(t, http.MethodPost, url, body)
	req.Header.Set("Content-Type", contentType)
	return Do(t, req)
}

func newRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return req
}
