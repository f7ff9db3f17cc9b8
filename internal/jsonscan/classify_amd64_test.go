//go:build amd64 && !purego

package jsonscan

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// classifyForms are the forms of classify64 this processor runs, each with the switch that selects
// it: the tests run each one.
var classifyForms = func() []classifyForm {
	forms := []classifyForm{{"SSE2", func() { useAVX2 = false }}}
	if cpu.X86.HasAVX2 {
		forms = append(forms, classifyForm{"AVX2", func() { useAVX2 = true }})
	}
	return forms
}()

// restoreClassify selects the form the package picks by itself.
func restoreClassify() { useAVX2 = cpu.X86.HasAVX2 }

// TestAVX2FormsStayVEX assembles classify_amd64.s and checks, in the assembler's listing (macros
// expanded), that its AVX2 forms keep the file's rule: from the first instruction that writes a YMM
// register to the VZEROUPPER that closes the form, no instruction on an XMM register is a legacy
// SSE one (its mnemonic has no V prefix), and no RET comes before that VZEROUPPER. A legacy
// instruction there costs an SSE/AVX state transition on every call, which on some processors made
// the AVX2 form several times slower than the SSE2 one; the results stay right, so only this test
// sees it. Instructions are read in layout order, which is each form's order.
func TestAVX2FormsStayVEX(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to assemble with")
	}
	goroot, err := exec.Command(gotool, "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	asm := exec.Command(gotool, "tool", "asm", "-S", "-I", filepath.Join(strings.TrimSpace(string(goroot)), "pkg", "include"),
		"-p", "jsonscan", "-o", filepath.Join(t.TempDir(), "classify.o"), "classify_amd64.s")
	asm.Env = append(os.Environ(), "GOARCH=amd64")
	out, err := asm.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool asm: %v\n%s", err, out)
	}
	// A listing line: "\t0x0162 00354 (classify_amd64.s:69)\tVMOVQ\tAX, X1".
	inst := regexp.MustCompile(`^\t0x[0-9a-f]+ \d+ \(([^)]*)\)\t(\S+)\t?(.*)$`)
	var funcs []string
	upper := false // the upper halves of the YMM registers are in use
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, ok := strings.Cut(line, " STEXT "); ok {
			funcs = append(funcs, name)
			upper = false
			continue
		}
		m := inst.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, op, args := m[1], m[2], m[3]
		switch {
		case op == "VZEROUPPER":
			upper = false
		case op == "RET" && upper:
			t.Errorf("%s: returns with the upper YMM halves in use (no VZEROUPPER)", at)
		case upper && !strings.HasPrefix(op, "V") && hasXMM(args):
			t.Errorf("%s: legacy SSE %s %s inside an AVX2 form", at, op, args)
		case strings.HasPrefix(op, "V") && strings.Contains(args, "Y"):
			upper = true
		}
	}
	if want := []string{"jsonscan.classify64", "jsonscan.stringBlocks"}; !slices.Equal(funcs, want) {
		t.Fatalf("listed functions %q, want %q:\n%s", funcs, want, out)
	}
}

// hasXMM reports whether an operand list names an XMM register (X0 to X15).
func hasXMM(args string) bool {
	for _, a := range strings.Split(args, ",") {
		a = strings.TrimSpace(a)
		if len(a) >= 2 && a[0] == 'X' && a[1] >= '0' && a[1] <= '9' {
			return true
		}
	}
	return false
}
