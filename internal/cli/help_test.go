package cli

import (
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

func TestEveryCommandHasExamples(t *testing.T) {
	root := NewRootCommand(&Streams{})
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		out, _, code := runCLI(t, "", c.Name(), "--help")
		if code != ExitOK || !strings.Contains(out, "\nExamples:\n  ") {
			t.Errorf("%s --help has no Examples section (exit %d):\n%s", c.Name(), code, out)
		}
	}
}

func TestPortInUseIsARuntimeError(t *testing.T) {
	ln := capturetest.Listen(t)
	_, errOut, code := runCLI(t, "", "proxy", "--upstream", "http://127.0.0.1:9", "--capture-dir", t.TempDir(), "--listen", ln.Addr().String())
	if code != ExitFailure || !strings.Contains(errOut, "address already in use") {
		t.Errorf("exit %d, stderr %q; want 1 (a runtime error, not usage) and the cause", code, errOut)
	}
}
