package cli

import (
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// progress draws a progress bar on stderr when stderr is a terminal and does nothing otherwise. With
// a known input size it counts bytes, else it spins and counts lines.
type progress struct {
	bar   *progressbar.ProgressBar
	bytes bool
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func newProgress(w io.Writer, size int64) *progress {
	if !isTerminal(w) {
		return &progress{}
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("merging"),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	}
	if size > 0 {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionSetPredictTime(true))
		return &progress{bar: progressbar.NewOptions64(size, opts...), bytes: true}
	}
	// The spinner turns on each line added, not on a timer: the library's timer goroutine reads the
	// bar's state without its lock while an add renders (a data race in progressbar v3.19.1).
	opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionSetItsString("lines"), progressbar.OptionShowIts(),
		progressbar.OptionSetSpinnerChangeInterval(0))
	return &progress{bar: progressbar.NewOptions64(-1, opts...)}
}

// add records one written line of n bytes.
func (p *progress) add(n int64) {
	switch {
	case p.bar == nil:
	case p.bytes:
		p.bar.Add64(n)
	default:
		p.bar.Add64(1)
	}
}

// clear takes the bar off the terminal so a message can be printed; the next add redraws it.
func (p *progress) clear() {
	if p.bar != nil {
		p.bar.Clear()
	}
}

// finish ends the bar (and the spinner's redraw goroutine) and clears it.
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
