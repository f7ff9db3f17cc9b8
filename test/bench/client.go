package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// subject is one way of reaching the upstream: directly, or through a proxy under test.
type subject struct {
	name   string
	base   string // scheme://host:port of what the client talks to
	prefix bool   // whether paths carry /ng-rollout/<id> (capture key)
	client *http.Client
}

// newClient returns a client with its own keep-alive pool big enough for every concurrent worker, so
// that no subject pays for new connections in the steady state.
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 1024
	tr.IdleConnTimeout = 5 * time.Minute
	return &http.Client{Transport: tr}
}

func newSubject(name, base string, prefix bool) *subject {
	return &subject{name: name, base: base, prefix: prefix, client: newClient()}
}

func (s *subject) url(id, path string) string {
	if s.prefix && id != "" {
		return s.base + "/ng-rollout/" + id + path
	}
	return s.base + path
}

func (s *subject) closeIdle() { s.client.CloseIdleConnections() }

// call makes one non-streaming call and returns its latency: from just before the request is sent
// to the last byte of the body. The body must be the recorded one (length checked) with status 200.
func (s *subject) call(ctx context.Context, id string, fx *fixtures, buf []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(id, "/v1/responses"), bytes.NewReader(fx.jsonRequest))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.name, err)
	}
	n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: read body: %w", s.name, err)
	}
	if resp.StatusCode != http.StatusOK || n != int64(len(fx.jsonResponse)) {
		return 0, fmt.Errorf("%s: status %d, %d body bytes: %w", s.name, resp.StatusCode, n, errUnexpected)
	}
	return d, nil
}

// loadResult is what a batch of calls produced.
type loadResult struct {
	lat     durations
	calls   int
	elapsed time.Duration
}

// sequential makes n calls one after another into rollout id.
func (s *subject) sequential(ctx context.Context, fx *fixtures, id string, n int) (loadResult, error) {
	buf := make([]byte, 32<<10)
	res := loadResult{lat: make(durations, 0, n)}
	start := time.Now()
	for range n {
		d, err := s.call(ctx, id, fx, buf)
		if err != nil {
			return res, err
		}
		res.lat = append(res.lat, d)
	}
	res.elapsed = time.Since(start)
	res.calls = n
	return res, nil
}

// concurrent runs workers closed-loop clients for about dur; worker w calls into rollout idOf(w).
// calls/s = calls / elapsed, elapsed running until the last worker's last call ended.
func (s *subject) concurrent(ctx context.Context, fx *fixtures, workers int, dur time.Duration, idOf func(int) string) (loadResult, error) {
	return closedLoop(workers, dur, func(w int) func() (time.Duration, error) {
		buf := make([]byte, 32<<10)
		id := idOf(w)
		return func() (time.Duration, error) { return s.call(ctx, id, fx, buf) }
	})
}

// closedLoop runs workers goroutines for about dur, each making the calls of worker(w) back to back
// (a closed loop: the next call starts when the previous one ended) until the deadline or the first
// error of any worker, which it returns. calls/s = calls / elapsed, elapsed running until the last
// worker's last call ended.
func closedLoop(workers int, dur time.Duration, worker func(w int) func() (time.Duration, error)) (loadResult, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		res      loadResult
		firstErr atomic.Pointer[error]
	)
	start := time.Now()
	deadline := start.Add(dur)
	for w := range workers {
		call := worker(w)
		wg.Go(func() {
			lat := make(durations, 0, 1024)
			for time.Now().Before(deadline) && firstErr.Load() == nil {
				d, err := call()
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					break
				}
				lat = append(lat, d)
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.calls = len(res.lat)
	if p := firstErr.Load(); p != nil {
		return res, *p
	}
	return res, nil
}

// streamResult is one paced SSE stream as the client saw it.
type streamResult struct {
	ttft     time.Duration // request sent -> first complete event read
	delivery durations     // per event: read by the client - written by the upstream (terminal last)
	gaps     durations     // between successive reads that returned bytes
	chunks   int
	held     int       // non-terminal events read only after the upstream had written the next one
	sendGaps durations // between successive upstream writes (the effective pace)
}

var streamSeq atomic.Int64

// stream makes one paced streaming call into rollout id and times every event.
func (s *subject) stream(ctx context.Context, up *upstream, fx *fixtures, id string, pace time.Duration) (streamResult, error) {
	sid := strconv.FormatInt(streamSeq.Add(1), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(id, "/v1/chat/completions"), bytes.NewReader(fx.sseRequest))
	if err != nil {
		return streamResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(hdrStreamID, sid)
	req.Header.Set(hdrPaceUS, strconv.Itoa(int(pace/time.Microsecond)))
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return streamResult{}, fmt.Errorf("%s: %w", s.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return streamResult{}, fmt.Errorf("%s: stream status %d: %w", s.name, resp.StatusCode, errUnexpected)
	}
	var (
		arrivals = make([]time.Time, 0, len(fx.sseEvents))
		reads    []time.Time
		buf      = make([]byte, 64<<10)
		prevNL   bool
	)
	for {
		n, err := resp.Body.Read(buf)
		now := time.Now()
		if n > 0 {
			reads = append(reads, now)
			for _, c := range buf[:n] {
				if c == '\n' {
					if prevNL {
						arrivals = append(arrivals, now)
					}
					prevNL = !prevNL
				} else {
					prevNL = false
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return streamResult{}, fmt.Errorf("%s: read stream: %w", s.name, err)
		}
	}
	var sends []time.Time
	for range 100 { // the upstream stores send times as its handler returns, before the body ends
		if sends = up.takeSends(sid); sends != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(arrivals) != len(fx.sseEvents) || len(sends) != len(arrivals) {
		return streamResult{}, fmt.Errorf("%s: stream: %d events read, %d sent, want %d: %w",
			s.name, len(arrivals), len(sends), len(fx.sseEvents), errUnexpected)
	}
	r := streamResult{ttft: arrivals[0].Sub(start), chunks: len(reads)}
	for i := range arrivals {
		r.delivery = append(r.delivery, arrivals[i].Sub(sends[i]))
		if i+1 < len(arrivals) {
			r.sendGaps = append(r.sendGaps, sends[i+1].Sub(sends[i]))
			if arrivals[i].After(sends[i+1]) {
				r.held++
			}
		}
	}
	for i := 1; i < len(reads); i++ {
		r.gaps = append(r.gaps, reads[i].Sub(reads[i-1]))
	}
	return r, nil
}

// bigStream makes one call whose SSE body is total bytes of the given shape (shapeRecorded or
// shapeContent) and reads it to the end; it returns the bytes read and the time taken.
func (s *subject) bigStream(ctx context.Context, fx *fixtures, id string, total int64, shape string) (int64, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(id, "/v1/chat/completions"), bytes.NewReader(fx.sseRequest))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(hdrBigBytes, strconv.FormatInt(total, 10))
	req.Header.Set(hdrBigShape, shape)
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", s.name, err)
	}
	defer resp.Body.Close()
	n, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 256<<10))
	if err != nil {
		return n, 0, fmt.Errorf("%s: read big stream: %w", s.name, err)
	}
	if resp.StatusCode != http.StatusOK || n < total-int64(bigWriteSize) {
		return n, 0, fmt.Errorf("%s: big stream status %d, %d bytes: %w", s.name, resp.StatusCode, n, errUnexpected)
	}
	return n, time.Since(start), nil
}
