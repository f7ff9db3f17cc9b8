package cli

import (
	"net"
	"strings"
	"testing"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, errOut, code := runCLI(t, "", "proxy", "--upstream", "http://127.0.0.1:9", "--capture-dir", t.TempDir(), "--listen", ln.Addr().String())
	if code != ExitFailure || !strings.Contains(errOut, "address already in use") {
		t.Errorf("exit %d, stderr %q; want 1 (a runtime error, not usage) and the cause", code, errOut)
	}
}
