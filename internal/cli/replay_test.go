package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

func TestReplayUsageErrors(t *testing.T) {
	dir := t.TempDir()
	checkExits(t, []exitCase{
		{"no capture dir", []string{"replay"}, ExitUsage, "--capture-dir is required"},
		{"missing capture dir", []string{"replay", "--capture-dir", filepath.Join(dir, "nope")}, ExitNotFound, "does not exist"},
		{"bad match", []string{"replay", "--capture-dir", dir, "--match", "fuzzy"}, ExitUsage, "--match \"fuzzy\""},
		{"bad timing", []string{"replay", "--capture-dir", dir, "--timing", "x0"}, ExitUsage, "--timing"},
		{"forward without upstream", []string{"replay", "--capture-dir", dir, "--on-miss", "forward"}, ExitUsage, "needs --upstream"},
		{"upstream without forward", []string{"replay", "--capture-dir", dir, "--upstream", "http://h"}, ExitUsage, "only used with --on-miss forward"},
		{"bad upstream", []string{"replay", "--capture-dir", dir, "--on-miss", "forward", "--upstream", "h:1"}, ExitUsage, "--upstream"},
		{"bad on-miss", []string{"replay", "--capture-dir", dir, "--on-miss", "shrug"}, ExitUsage, "--on-miss"},
		{"same dir out", []string{"replay", "--capture-dir", dir, "--capture-dir-out", dir}, ExitUsage, "must differ"},
		{"name without out", []string{"replay", "--capture-dir", dir, "--name", "m"}, ExitUsage, "--name is only used"},
		{"stray argument", []string{"replay", "--capture-dir", dir, "extra"}, ExitUsage, "unknown command"},
		{"bad ignore pattern", []string{"replay", "--capture-dir", dir, "--ignore", "input.output~("}, ExitUsage, "--ignore: ignore \"input.output~(\": error parsing regexp"},
	})
}

// TestMissingCaptureDirMessage: replay reports a missing capture dir, or a file given as one, in
// the words and with the exit code every reading command uses (checkDir).
func TestMissingCaptureDirMessage(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	base := t.TempDir()
	file := filepath.Join(base, "file")
	capturetest.WriteFile(t, file, nil, 0o644)
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(base, "nope"), "modelcalls: capture dir " + filepath.Join(base, "nope") + " does not exist\n"},
		{file, "modelcalls: capture dir " + file + " is not a directory\n"},
	} {
		for _, args := range [][]string{
			{"replay", "--capture-dir", tc.dir},
			{"calls", "--capture-dir", tc.dir, "r1"},
			{"stats", "--capture-dir", tc.dir},
			{"show", "--capture-dir", tc.dir, "r1"},
			{"merge", "--capture-dir", tc.dir},
			{"export", "otlp", "--capture-dir", tc.dir, "--endpoint", "http://127.0.0.1:1"},
		} {
			_, errOut, code := runCLI(t, "", args...)
			if code != ExitNotFound || errOut != tc.want {
				t.Errorf("%q: exit %d, stderr %q; want %d and %q", args, code, errOut, ExitNotFound, tc.want)
			}
		}
	}
}

// TestReplayCommand runs the command: one recorded call answered, one miss, the admin /metrics,
// and the summary on stdout when its context ends.
func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	store, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ex := &capture.Exchange{ModelCallID: capture.NewModelCallID(), Dialect: "chat", StatusCode: new(int),
		Request: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), Response: []byte(`{"object":"chat.completion"}`)}
	*ex.StatusCode = 200
	if err := store.AppendExchange("r1", ex); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var out capturetest.Buffer
	root := NewRootCommand(&Streams{In: strings.NewReader(""), Out: &out, ErrOut: pw})
	root.SetArgs([]string{"replay", "--capture-dir", dir, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--timing", "fast", "--capture-dir-out", filepath.Join(t.TempDir(), "out")})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	addrs := make(chan [2]string, 1)
	go func() {
		var admin string
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := regexp.MustCompile(`admin_addr=(\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				admin = m[1]
			}
			if m := regexp.MustCompile(`replay listening" addr=(\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				addrs <- [2]string{m[1], admin}
			}
		}
	}()
	var a [2]string
	select {
	case a = <-addrs:
	case err := <-done:
		t.Fatalf("replay exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no listening line")
	}
	base := "http://" + a[0] + "/ng-rollout/r1/v1/chat/completions"
	for _, c := range []struct {
		body   string
		status int
	}{{`{"messages":[{"content":"hi","role":"user"}],"model":"m"}`, 200}, {`{"model":"m","messages":[]}`, 400}} {
		if status, b := capturetest.Post(t, base, "application/json", strings.NewReader(c.body)); status != c.status {
			t.Errorf("%s: %d %s", c.body, status, b)
		}
	}
	_, m := capturetest.Get(t, "http://"+a[1]+"/metrics")
	for _, want := range []string{"modelcalls_replay_served_total 1", "modelcalls_replay_misses_total 1", `modelcalls_gateway_calls_total{`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("replay: %v", err)
	}
	want := "replay: served 1, misses 1, exhausted 0, forwarded 0, not model calls 0, recorded answers not asked for 0\n"
	if out.String() != want {
		t.Errorf("summary %q, want %q", out.String(), want)
	}
}

// TestReplayIgnoreKeysFlag: the default list, a replacement, and --ignore-keys= for none.
func TestReplayIgnoreKeysFlag(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "[metadata user stream_options prompt_cache_key client_metadata input.id]"},
		{[]string{"--ignore-keys", "user,metadata.user_id"}, "[user metadata.user_id]"},
		{[]string{"--ignore-keys="}, "[]"},
		{[]string{"--ignore", "input.output~(Chunk ID|Wall time): [^\\n]*", "--ignore", "a.b,c"},
			"[metadata user stream_options prompt_cache_key client_metadata input.id input.output~(Chunk ID|Wall time): [^\\n]* a.b,c]"},
	} {
		cmd := newReplayCmd(&Streams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
		if err := cmd.Flags().Parse(append([]string{"--capture-dir", dir}, c.args...)); err != nil {
			t.Fatal(err)
		}
		v, _ := cmd.Flags().GetStringSlice("ignore-keys")
		extra, _ := cmd.Flags().GetStringArray("ignore")
		o := &replayOptions{captureDir: dir, match: "strict", timing: "fast", onMiss: "error", ignoreKeys: v, ignore: extra}
		s, err := resolveReplay(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(s.IgnoreKeys); got != c.want || s.IgnoreKeys == nil {
			t.Errorf("%q: ignore keys %s, want %s", c.args, got, c.want)
		}
	}
}
