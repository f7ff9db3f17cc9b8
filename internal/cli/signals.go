package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// interruptContext returns a context cancelled by the first SIGINT or SIGTERM; its cause names the
// signal ("interrupted by signal terminated"). stop releases the signal handler.
func interruptContext(ctx context.Context) (context.Context, func()) {
	return signalContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// signalContext is interruptContext for the signals given.
func signalContext(ctx context.Context, signals ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, signals...)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("interrupted by signal %v", sig))
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(context.Canceled)
	}
}

// ctxReader makes reads from a pipe or terminal give up when ctx ends. Each Read runs the
// underlying Read on its own goroutine; once ctx is done Read returns context.Cause(ctx) at once,
// and the reader must not be used again (the abandoned read may still fill p). Regular files
// never block for long and are read directly.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
	res chan readResult
}

type readResult struct {
	n   int
	err error
}

func newCtxReader(ctx context.Context, r io.Reader) io.Reader {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return r
		}
	}
	return &ctxReader{ctx: ctx, r: r, res: make(chan readResult, 1)}
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	go func() {
		n, err := c.r.Read(p)
		c.res <- readResult{n, err}
	}()
	select {
	case r := <-c.res:
		return r.n, r.err
	case <-c.ctx.Done():
		return 0, context.Cause(c.ctx)
	}
}

// plural formats n with the singular or plural noun: "1 rollout", "2 rollouts", "0 rollouts".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
