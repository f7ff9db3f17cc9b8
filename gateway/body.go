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
type teeBody struct {
	c  *call
	rc io.ReadCloser
}

func (b *teeBody) Read(p []byte) (int, error) {
	c := b.c
	c.settle() // the proxy asks for more only once it has written the previous chunk to the client
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
		c.finishHeld(outcome{eof: true})
	case err != nil:
		c.finishHeld(outcome{failure: c.classify(err)})
	case c.terminalHit:
		c.finishHeld(outcome{})
	case c.contentLength >= 0 && c.read >= c.contentLength:
		// The client has the whole body once this chunk is written: hold it like the terminal chunk.
		c.finishHeld(outcome{eof: true})
	}
	return n, err
}

// Close is called by ReverseProxy when the copy ends. If the capture is not finished, the copy
// stopped early because writing to the client failed: the client went away before the terminal
// event. The upstream request is cancelled first (nobody reads the tokens), then the call is
// captured as cancelled with what was observed.
func (b *teeBody) Close() error {
	c := b.c
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.finished {
		c.settle()
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
