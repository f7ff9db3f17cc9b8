package capturetest

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers: a process's stderr, a slog handler the
// code under test writes from several goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Logger returns a text logger at debug level writing into w.
func Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// QuietLogger discards everything.
func QuietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
