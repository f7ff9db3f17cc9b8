package gateway

import (
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// teeBody wraps a captured call's upstream response body. ReverseProxy reads it chunk by chunk and
// writes (and flushes) each chunk to the client after Read returns, so Read is where the hold lives:
// when a chunk completes the first terminal SSE event, reaches the announced Content-Length, or the
// body ends (or fails), the capture line is written before Read returns that chunk (NeMo Gym's hold).
// Bytes after that pass straight through.
//
// The chunk that ends the body, or completes the terminal event, is returned but for the last byte
// of the body (of the terminal event) and whatever follows it, while the line is written: the
// client receives the headers and all the rest during the sync, and the byte without which it has
// neither the whole body nor the terminal event once the line is durable (the next Read, or Close,
// waits for it).
type teeBody struct {
	c  *call
	rc io.ReadCloser

	held     []byte        // bytes held back until captured closes: returned by the next Reads
	heldErr  error         // what the upstream read that ended the body returned with them (nil or io.EOF)
	holding  bool          // a capture is being written in a goroutine; held is still to be returned
	captured chan struct{} // closed when the capture line is written (or marked): finish returned
}

func (b *teeBody) Read(p []byte) (int, error) {
	c := b.c
	if b.holding {
		<-b.captured
		if len(p) == 0 {
			return 0, nil
		}
		n := copy(p, b.held)
		b.held = b.held[n:]
		if len(b.held) > 0 {
			return n, nil
		}
		b.holding = false
		return n, b.heldErr
	}
	c.armIdle()
	n, err := b.rc.Read(p)
	c.disarmIdle()
	if n > 0 {
		c.h.metrics.respBytes.Add(float64(n))
	}
	if c.finished {
		return n, err
	}
	if n > 0 {
		c.observe(p[:n])
	}
	switch {
	case err == io.EOF:
		if c.stream == nil {
			return b.finishHolding(p, n, n, err, outcome{eof: true})
		}
		c.finish(outcome{eof: true})
	case err != nil:
		c.finish(outcome{failure: c.classify(err)})
	case c.terminalHit:
		if c.inflate == nil && c.termRest >= 0 && c.termRest < n {
			// The chunk as read is the chunk the SSE decoder was fed: the event ends at n-termRest.
			return b.finishHolding(p, n, n-c.termRest, err, outcome{})
		}
		c.finish(outcome{})
	case c.contentLength >= 0 && c.read >= c.contentLength:
		// The client has the whole body once this chunk is written: hold it like the terminal chunk.
		if c.stream == nil {
			return b.finishHolding(p, n, n, err, outcome{eof: true})
		}
		c.finish(outcome{eof: true})
	}
	return n, err
}

// finishHolding captures the call (outcome o) for the chunk p[:n] read with err (nil or io.EOF),
// in which what the client must not have before the line is durable ends at byte end. With end >= 2
// the capture is written in a goroutine while p[:end-1] goes to the client, and p[end-1:n] is held
// for the next Reads; otherwise the capture is written before the chunk is returned.
func (b *teeBody) finishHolding(p []byte, n, end int, err error, o outcome) (int, error) {
	c := b.c
	if end < 2 {
		c.finish(o)
		return n, err
	}
	b.held = append([]byte(nil), p[end-1:n]...)
	b.heldErr, b.holding = err, true
	b.captured = make(chan struct{})
	go func() {
		defer close(b.captured)
		c.finish(o)
	}()
	return end - 1, nil
}

// Close is called by ReverseProxy when the copy ends. If the capture is not finished, the copy
// stopped early because writing to the client failed: the client went away before the terminal
// event. The upstream request is cancelled first (nobody reads the tokens), then the call is
// captured as cancelled with what was observed. A capture still being written for a held last
// byte is waited for: the whole body had arrived, so the line records it whole.
func (b *teeBody) Close() error {
	c := b.c
	if b.holding {
		<-b.captured
		b.holding = false
	}
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.finished {
		return b.rc.Close()
	}
	c.cancel(errClientGone)
	err := b.rc.Close()
	c.finish(outcome{failure: failCancelled})
	return err
}

// armIdle starts the per-read idle timeout; disarmIdle stops it.
func (c *call) armIdle() {
	d := c.h.idleTimeout()
	if d <= 0 {
		return
	}
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(d, func() { c.cancel(errIdleTimeout) })
		return
	}
	c.idleTimer.Reset(d)
}

func (c *call) disarmIdle() {
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
}

// countingBody counts the bytes of an uncaptured response.
type countingBody struct {
	rc io.ReadCloser
	n  prometheus.Counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.n.Add(float64(n))
	}
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }
