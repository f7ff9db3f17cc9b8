package cli

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

func TestViewExitCodes(t *testing.T) {
	dir := t.TempDir()
	checkExits(t, []exitCase{
		{"no capture dir", []string{"view"}, ExitUsage, ""},
		{"missing capture dir", []string{"view", "--capture-dir", filepath.Join(dir, "missing")}, ExitNotFound, ""},
		{"missing rollouts file", []string{"view", "--capture-dir", dir, "--rollouts", filepath.Join(dir, "r.jsonl")}, ExitNotFound, "--rollouts " + filepath.Join(dir, "r.jsonl") + " does not exist"},
		{"rollouts file is a dir", []string{"view", "--capture-dir", dir, "--rollouts", dir}, ExitNotFound, "--rollouts " + dir + " is a directory, not a file"},
		{"bad listen address", []string{"view", "--capture-dir", dir, "--listen", "127.0.0.1:99999"}, ExitUsage, "--listen 127.0.0.1:99999"},
		{"listen address in use", []string{"view", "--capture-dir", dir, "--listen", capturetest.Listen(t).Addr().String()}, ExitFailure, "address already in use"},
	})
}

// TestViewServes runs the command, reads the URL it prints and fetches the overview from it.
func TestViewServes(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := runView(ctx, &Streams{Out: pw, ErrOut: io.Discard}, &viewOptions{dirs: []string{t.TempDir()}, listen: "127.0.0.1:0"})
		pw.Close()
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("no URL in %q", line)
	}
	url := strings.Fields(line[i:])[0]
	if status, _ := capturetest.Get(t, url+"api/overview"); status != 200 {
		t.Fatalf("overview: status %d", status)
	}
	go io.Copy(io.Discard, pr)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("view: %v", err)
	}
}
