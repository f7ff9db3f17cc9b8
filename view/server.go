package view

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/rollout"
)

//go:embed static
var static embed.FS

// Options configure a Server.
type Options struct {
	// Dirs are the capture dirs to show, in merge's order: a rollout found in several belongs to the
	// first that holds its capture file or marker. Each must exist; nothing is created.
	Dirs []string
	// RolloutsFile is an optional JSONL file of rollout records (what merge reads): its top-level
	// scalar fields (reward, ...) become sortable, filterable columns. "" for none.
	RolloutsFile string
	// Logger receives the indexer's problems; nil discards them.
	Logger *slog.Logger
	// ScanInterval is the shortest pause between two rescans of the dirs; 0 means 500 ms.
	ScanInterval time.Duration
}

// Server is the viewer: an http.Handler serving the pages and the JSON API, backed by an Index that
// rescans the capture dirs. It only reads the dirs.
type Server struct {
	idx   *Index
	mux   *http.ServeMux
	heavy chan struct{} // a slot per request reading capture files (maxHeavyReads)
}

// maxHeavyReads is how many requests that read capture files (a rollout's page, a call's page, a
// stored payload) run at once; the others wait for a slot, or until their client leaves. A call's
// page reads its own line and a rollout's page one line at a time, so each holds a few times its
// largest line: the slots bound the viewer's memory on rollouts of large lines (nine call pages of
// 1 MiB lines opened at once stay under 256 MiB) and keep the index's rescans running.
const maxHeavyReads = 4

// New opens the capture dirs read-only and returns the server. Call Run to start indexing; the
// handler answers from whatever has been indexed so far.
func New(opts Options) (*Server, error) {
	if len(opts.Dirs) == 0 {
		return nil, errors.New("view: no capture dir")
	}
	var stores []*capture.Store
	for _, d := range opts.Dirs {
		st, err := capture.OpenExisting(d)
		if err != nil {
			return nil, fmt.Errorf("view: capture dir: %w", err)
		}
		stores = append(stores, st)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{idx: newIndex(stores, opts.RolloutsFile, log), mux: http.NewServeMux(), heavy: make(chan struct{}, maxHeavyReads)}
	if opts.ScanInterval > 0 {
		s.idx.MinInterval = opts.ScanInterval
	}
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := fs.ReadFile(sub, "index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	})
	api := []struct {
		path string
		h    http.HandlerFunc
	}{
		{"/api/overview", s.overview},
		{"/api/rollouts", s.list},
		{"/api/rollouts/{id}", s.bounded(s.rollout)},
		{"/api/rollouts/{id}/calls/{index}", s.bounded(s.call)},
		{"/api/rollouts/{id}/calls/{index}/raw", s.bounded(s.raw)},
		{"/api/rollouts/{id}/lineage", s.bounded(s.lineage)},
		{"/api/rollouts/{id}/transcript", s.bounded(s.transcript)},
		{"/api/search", s.bounded(s.search)},
		{"/api/diff", s.bounded(s.diff)},
		{"/api/changes", s.changes},
	}
	paths := make([]string, len(api))
	for i, e := range api {
		s.mux.HandleFunc("GET "+e.path, e.h)
		paths[i] = e.path
	}
	// A path that is none of them (/api/ itself, a typo) gets the list, so the API can be found
	// from any wrong guess.
	notFound := "no such API endpoint: %s; the endpoints (GET): " + strings.Join(paths, ", ")
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, fmt.Sprintf(notFound, r.URL.Path))
	})
	return s, nil
}

// bounded runs h in one of the maxHeavyReads slots; a request whose client leaves while it waits
// gets nothing.
func (s *Server) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.heavy <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-s.heavy }()
		h(w, r)
	}
}

// Index returns the server's index.
func (s *Server) Index() *Index { return s.idx }

// Run indexes and rescans the dirs until ctx is done.
func (s *Server) Run(ctx context.Context) { s.idx.Run(ctx) }

// ServeHTTP serves the pages and the API. Every response carries a Content-Security-Policy that
// allows only the viewer's own scripts and styles, so a payload that slipped into markup could not
// run.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// encodeJSON writes v as one line of JSON without HTML escaping: the API's answers are
// application/json (with nosniff), never HTML, so "<", ">" and "&" stay as they are instead of
// becoming \u003c, \u003e and \u0026 in error messages, payloads and filters (errors>0).
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func writeJSON(w http.ResponseWriter, v any) {
	var b bytes.Buffer
	if err := encodeJSON(&b, v); err != nil {
		apiError(w, http.StatusInternalServerError, "encode: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b.Bytes())
}

// apiError answers {"error": msg} with status.
func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	encodeJSON(w, map[string]string{"error": msg})
}

// ListenURL is the URL a user opens for a server listening on addr. An unspecified host
// (0.0.0.0 or ::, which net.Listen reports as [::] for both) is not an address a browser can
// open: the URL then names 127.0.0.1 (the same machine; other machines use one of its
// addresses), and all is true, so the caller can say it listens on all interfaces.
func ListenURL(addr net.Addr) (u string, all bool) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/", false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host, all = "127.0.0.1", true
	}
	return "http://" + net.JoinHostPort(host, port) + "/", all
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.idx.Overview())
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lq := ListQuery{Sort: q.Get("sort"), Desc: q.Get("order") == "desc", Filter: q.Get("filter")}
	if o := q.Get("order"); o != "" && o != "asc" && o != "desc" {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("order %q: want asc or desc", o))
		return
	}
	var err error
	if lq.Offset, err = intParam(q.Get("offset"), 0); err != nil {
		apiError(w, http.StatusBadRequest, "offset: "+err.Error())
		return
	}
	if lq.Limit, err = intParam(q.Get("limit"), 50); err != nil {
		apiError(w, http.StatusBadRequest, "limit: "+err.Error())
		return
	}
	res, err := s.idx.List(lq)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, res)
}

func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a non-negative integer, got %q", v)
	}
	return n, nil
}

// rolloutID validates the {id} path value.
func rolloutID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := rollout.Validate(id); err != nil {
		apiError(w, http.StatusBadRequest, "rollout id: "+err.Error())
		return "", false
	}
	return id, true
}

// callPath validates the {id} and {index} path values of a call's routes.
func callPath(w http.ResponseWriter, r *http.Request) (id string, n int, ok bool) {
	if id, ok = rolloutID(w, r); !ok {
		return "", 0, false
	}
	n, err := intParam(r.PathValue("index"), 0)
	if err != nil {
		apiError(w, http.StatusBadRequest, "call index: "+err.Error())
		return "", 0, false
	}
	return id, n, true
}

func loadError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNoRollout), errors.Is(err, ErrNoCall):
		apiError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrTooLarge):
		apiError(w, http.StatusRequestEntityTooLarge, err.Error())
	default:
		apiError(w, http.StatusInternalServerError, err.Error())
	}
}

// writeLoaded answers v as JSON, or the error of loading it (404 for an unknown rollout or call).
func writeLoaded(w http.ResponseWriter, v any, err error) {
	if err != nil {
		loadError(w, err)
		return
	}
	writeJSON(w, v)
}

func (s *Server) rollout(w http.ResponseWriter, r *http.Request) {
	if id, ok := rolloutID(w, r); ok {
		d, err := s.idx.Rollout(id)
		writeLoaded(w, d, err)
	}
}

func (s *Server) call(w http.ResponseWriter, r *http.Request) {
	if id, n, ok := callPath(w, r); ok {
		d, err := s.idx.Call(id, n)
		if err != nil {
			loadError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		writeCallDetail(w, d)
	}
}

func (s *Server) lineage(w http.ResponseWriter, r *http.Request) {
	if id, ok := rolloutID(w, r); ok {
		d, err := s.idx.Lineage(id)
		writeLoaded(w, d, err)
	}
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request) {
	id, ok := rolloutID(w, r)
	if !ok {
		return
	}
	if _, err := s.idx.refresh(id); err != nil {
		loadError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	s.idx.WriteTranscript(w, id)
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), 100)
	if err != nil {
		apiError(w, http.StatusBadRequest, "limit: "+err.Error())
		return
	}
	if strings.TrimSpace(q.Get("q")) == "" {
		apiError(w, http.StatusBadRequest, "q: want the text to search for")
		return
	}
	res, err := s.idx.Search(r.Context(), q.Get("q"), limit)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, res)
}

// writeCallDetail writes d as CallDetail's JSON a piece at a time (each message on its own), so
// that a call of large messages is not encoded whole into memory before the first byte goes out.
// A write error (the client left) ends it.
func writeCallDetail(w io.Writer, d *CallDetail) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	var err error
	raw := func(s string) {
		if err == nil {
			_, err = bw.WriteString(s)
		}
	}
	val := func(v any) {
		if err == nil {
			err = encodeJSON(bw, v) // ends in a newline: whitespace between tokens
		}
	}
	list := func(msgs []Message) {
		raw("[")
		for i := range msgs {
			if i > 0 {
				raw(",")
			}
			val(&msgs[i])
		}
		raw("]")
	}
	c := &d.Conversation
	raw(`{"version":`)
	val(d.Version)
	raw(`,"rollout_id":`)
	val(d.RolloutID)
	raw(`,"line":`)
	val(d.Line)
	raw(`,"record":`)
	val(d.Record)
	raw(`,"conversation":{"input":`)
	list(c.Input)
	raw(`,"tools":`)
	val(c.Tools)
	raw(`,"output":`)
	list(c.Output)
	if c.Error != "" {
		raw(`,"error":`)
		val(c.Error)
	}
	raw(`},"units":`)
	val(d.Units)
	raw(`,"raw":`)
	val(d.Raw)
	if d.Tokens != nil {
		raw(`,"tokens":`)
		val(d.Tokens)
	}
	raw(`,"prev":`)
	val(d.Prev)
	raw(`,"next":`)
	val(d.Next)
	raw("}\n")
	if err != nil {
		return err
	}
	return bw.Flush()
}

// raw serves a stored payload as text/plain (never as HTML): ?part=request|response (JSON,
// indented with ?indent=1) or request_raw|response_raw (the stored text).
func (s *Server) raw(w http.ResponseWriter, r *http.Request) {
	id, n, ok := callPath(w, r)
	if !ok {
		return
	}
	part := r.URL.Query().Get("part")
	switch part {
	case "request", "response", "request_raw", "response_raw":
	default:
		apiError(w, http.StatusBadRequest, "part: want request, response, request_raw or response_raw")
		return
	}
	data, isJSON, found, err := s.idx.Raw(id, n, part)
	if err != nil {
		loadError(w, err)
		return
	}
	if !found {
		apiError(w, http.StatusNotFound, "call has no "+part)
		return
	}
	if isJSON && r.URL.Query().Get("indent") == "1" {
		var b bytes.Buffer
		if json.Indent(&b, data, "", "  ") == nil {
			data = b.Bytes()
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// changes is the live-update long poll: it answers {"version": V} as soon as the index's version
// differs from ?since (at once when it already does), or after ?timeout seconds (default 25, at
// most 60) with the unchanged version.
func (s *Server) changes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := strconv.ParseUint(cmpOr(q.Get("since"), "0"), 10, 64)
	if err != nil {
		apiError(w, http.StatusBadRequest, "since: want the version of an earlier answer")
		return
	}
	timeout, err := intParam(q.Get("timeout"), 25)
	if err != nil {
		apiError(w, http.StatusBadRequest, "timeout: "+err.Error())
		return
	}
	t := time.NewTimer(time.Duration(min(timeout, 60)) * time.Second)
	defer t.Stop()
	for {
		v, ch := s.idx.Version()
		if v != since {
			writeJSON(w, map[string]any{"version": v})
			return
		}
		select {
		case <-ch:
		case <-t.C:
			writeJSON(w, map[string]any{"version": v})
			return
		case <-r.Context().Done():
			return
		}
	}
}

func cmpOr(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return v
}
