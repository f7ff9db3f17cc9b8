package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Request headers the bench clients send to steer the upstream. Every proxy under test forwards them
// unchanged (they are ordinary request headers).
const (
	hdrStreamID  = "X-Bench-Stream-Id"    // paced stream: key under which the upstream records send times
	hdrPaceUS    = "X-Bench-Pace-Us"      // paced stream: microseconds between events
	hdrBigBytes  = "X-Bench-Stream-Bytes" // big stream: total body bytes to send
	hdrBigShape  = "X-Bench-Stream-Shape" // big stream: "content" for text deltas, else the recorded deltas
	bigWriteSize = 32 << 10               // big stream: bytes per write
)

// upstream is the fast loopback model server: it answers instantly with recorded bodies, so that what
// a run measures is whatever sits between the client and it.
//
//	POST .../v1/responses          the recorded Responses JSON body (application/json, Content-Length)
//	POST .../v1/chat/completions   the 200-event Chat Completions SSE stream, in one write; paced (one
//	                               write+flush per event) with X-Bench-Pace-Us; or, with
//	                               X-Bench-Stream-Bytes, a stream of that many bytes in 32 KiB writes;
//	                               with X-Bench-Chat-Json, vLLM's JSON answer, with token ids and
//	                               logprobs when the request asks for them (tokens.go)
//
// The path may carry a /ng-rollout/<id> prefix (the bare proxy forwards it unchanged).
type upstream struct {
	*server // its loopback HTTP server: url, close
	fx      *fixtures

	mu    sync.Mutex
	sends map[string][]time.Time // paced streams: send time of every event, by stream id
}

func startUpstream(fx *fixtures) (*upstream, error) {
	u := &upstream{fx: fx, sends: map[string][]time.Time{}}
	s, err := serve(u)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	u.server = s
	return u, nil
}

// takeSends returns and forgets the send times recorded for a paced stream.
func (u *upstream) takeSends(id string) []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.sends[id]
	delete(u.sends, id)
	return s
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(hdrChatJSON) != "" && strings.HasSuffix(r.URL.Path, "/v1/chat/completions") {
		u.serveChatJSON(w, r)
		return
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/responses"):
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(u.fx.jsonResponse)))
		w.Write(u.fx.jsonResponse)
	case strings.HasSuffix(r.URL.Path, "/v1/chat/completions"):
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		if v := r.Header.Get(hdrBigBytes); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				http.Error(w, "bad "+hdrBigBytes, http.StatusBadRequest)
				return
			}
			middle := u.fx.sseMiddle
			if r.Header.Get(hdrBigShape) == shapeContent {
				middle = u.fx.contentMiddle
			}
			u.serveBig(w, n, middle)
			return
		}
		if v := r.Header.Get(hdrPaceUS); v != "" {
			us, err := strconv.Atoi(v)
			if err != nil {
				http.Error(w, "bad "+hdrPaceUS, http.StatusBadRequest)
				return
			}
			u.servePaced(w, r.Header.Get(hdrStreamID), time.Duration(us)*time.Microsecond)
			return
		}
		w.Write(u.fx.sseBody())
	default:
		http.NotFound(w, r)
	}
}

// servePaced writes one event per write and flush, sleeping pace between events (so successive
// writes are at least pace apart; timer granularity may stretch it), and records the instant just
// before each write.
func (u *upstream) servePaced(w http.ResponseWriter, id string, pace time.Duration) {
	fl := w.(http.Flusher)
	sends := make([]time.Time, 0, len(u.fx.sseEvents))
	for i, ev := range u.fx.sseEvents {
		if i > 0 {
			time.Sleep(pace)
		}
		sends = append(sends, time.Now())
		if _, err := w.Write(ev); err != nil {
			break
		}
		fl.Flush()
	}
	u.mu.Lock()
	u.sends[id] = sends
	u.mu.Unlock()
}

// serveBig writes a well-formed Chat Completions stream of about total bytes: the recorded header
// event, the middle events repeated (the recorded argument deltas, or the content deltas), then the
// recorded finish, usage and [DONE] events.
func (u *upstream) serveBig(w http.ResponseWriter, total int64, middle [][]byte) {
	fl := w.(http.Flusher)
	buf := make([]byte, 0, bigWriteSize+4096)
	var sent int64
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		n, err := w.Write(buf)
		sent += int64(n)
		buf = buf[:0]
		fl.Flush()
		return err
	}
	for _, ev := range u.fx.sseHead {
		buf = append(buf, ev...)
	}
	var tailLen int64
	for _, ev := range u.fx.sseTail {
		tailLen += int64(len(ev))
	}
	for i := 0; sent+int64(len(buf))+tailLen < total; i++ {
		buf = append(buf, middle[i%len(middle)]...)
		if len(buf) >= bigWriteSize {
			if err := flush(); err != nil {
				return
			}
		}
	}
	for _, ev := range u.fx.sseTail {
		buf = append(buf, ev...)
	}
	flush()
}

// Big-stream shapes (hdrBigShape).
const (
	shapeRecorded = "recorded" // the recording's tool-call argument deltas: little text per event
	shapeContent  = "content"  // text deltas: about half of every event is text the capture keeps
)

// errUnexpected reports a response the bench did not expect (wrong status or body).
var errUnexpected = errors.New("unexpected response")
