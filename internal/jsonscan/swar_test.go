package jsonscan

import (
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLaneMasksExact checks that eqLanes and ctlOrHigh flag exactly the lanes they name, on random
// words rich in the bytes next to the ones they look for.
func TestLaneMasksExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'"', '\\', 'n', 0, 0x1f, 0x20, 0x7f, 0x80, 0xff, '!', '#', ']', 'm', 'o', 0x21, 0x5b, 0x5d}
	for range 200000 {
		var b [8]byte
		for k := range b {
			if r.IntN(2) == 0 {
				b[k] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[k] = byte(r.IntN(256))
			}
		}
		x := load64(b[:], 0)
		for _, c := range []byte{'"', '\\', 'n'} {
			m := eqLanes(x, c)
			for k := range 8 {
				if (m>>(8*k+7)&1 == 1) != (b[k] == c) {
					t.Fatalf("eqLanes(%q, %q) lane %d", b, c, k)
				}
			}
		}
		m := ctlOrHigh(x)
		for k := range 8 {
			if (m>>(8*k+7)&1 == 1) != (b[k] < 0x20 || b[k] >= 0x80) {
				t.Fatalf("ctlOrHigh(%q) lane %d", b, k)
			}
		}
	}
}

// classifyBytes is classify64 byte by byte: the reference both implementations are tested against.
func classifyBytes(b *[64]byte) (quote, backslash, special uint64) {
	for k, c := range b {
		bit := uint64(1) << k
		switch {
		case c == '"':
			quote |= bit
		case c == '\\':
			backslash |= bit
		case c < 0x20 || c >= 0x80:
			special |= bit
		}
	}
	return quote, backslash, special
}

// TestClassify64 compares the block classifier (and its plain Go form) with a byte-by-byte reference, and escapedBits with
// a byte-by-byte reading of backslash runs, on random blocks rich in the bytes they look for.
func TestClassify64(t *testing.T) {
	defer restoreClassify()
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []byte{'"', '\\', '\\', 'n', 0, 0x1f, 0x20, 0x7f, 0x80, 0xff, 'a', 0x5b, 0x21, 0xc3}
	for range 100000 {
		var b [64 + 8]byte
		for k := range b {
			if r.IntN(3) > 0 {
				b[k] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[k] = byte(r.IntN(256))
			}
		}
		off := r.IntN(8) // unaligned starts
		blk := (*[64]byte)(b[off : off+64])
		wq, wbs, wsp := classifyBytes(blk)
		for _, form := range classifyForms {
			form.use()
			q, bs, sp := classify64(&blk[0])
			if q != wq || bs != wbs || sp != wsp {
				t.Fatalf("classify64 (%s) (%q) = %x %x %x, want %x %x %x", form.name, blk, q, bs, sp, wq, wbs, wsp)
			}
		}
		bs := wbs
		if gq, gbs, gsp := classify64Go(blk); gq != wq || gbs != wbs || gsp != wsp {
			t.Fatalf("classify64Go(%q) = %x %x %x, want %x %x %x", blk, gq, gbs, gsp, wq, wbs, wsp)
		}
		carry := uint64(r.IntN(2))
		c := carry
		got := escapedBits(bs, &c)
		var want uint64
		escaping := carry == 1
		for k := range 64 {
			if escaping {
				want |= 1 << k
				escaping = false
			} else if blk[k] == '\\' {
				escaping = true
			}
		}
		if wantCarry := map[bool]uint64{false: 0, true: 1}[escaping]; got != want || c != wantCarry {
			t.Fatalf("escapedBits(%q, carry %d) = %x carry %d, want %x carry %d", blk, carry, got, c, want, wantCarry)
		}
	}
}

// TestDigitsEnd: digitsEnd (and digitLanes, on one word) agrees with skipDigits for every byte at
// every position of a word, and for runs longer than a word.
func TestDigitsEnd(t *testing.T) {
	for c := range 256 {
		for pos := range 20 {
			b := []byte(strings.Repeat("7", 20))
			b[pos] = byte(c)
			for start := range 4 {
				if got, want := digitsEnd(b, start), skipDigits(b, start); got != want {
					t.Fatalf("digitsEnd(%q, %d) = %d, skipDigits %d", b, start, got, want)
				}
				if got, want := digitLanes(load64(b, start)), min(skipDigits(b, start)-start, 8); got != want {
					t.Fatalf("digitLanes(%q at %d) = %d, skipDigits %d", b, start, got, want)
				}
			}
		}
	}
}

// classifyForm is one implementation of classify64 and the switch that selects it.
type classifyForm struct {
	name string
	use  func()
}

// classifySink keeps BenchmarkClassify64's results alive.
var classifySink uint64

// BenchmarkClassify64 is one call of each form of classify64 this processor runs, on a block of
// plain ASCII: the fixed cost every string the fast path starts in a new block pays. On amd64 the
// AVX2 form should be the cheaper one; when it is not, look for a legacy SSE instruction inside it
// (TestAVX2FormsStayVEX).
func BenchmarkClassify64(b *testing.B) {
	var blk [64]byte
	for i := range blk {
		blk[i] = byte('a' + i%26)
	}
	for _, form := range classifyForms {
		b.Run(form.name, func(b *testing.B) {
			form.use()
			defer restoreClassify()
			for b.Loop() {
				q, bs, sp := classify64(&blk[0])
				classifySink += q | bs | sp
			}
		})
	}
}

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
	asm.Env = append(asm.Environ(), "GOARCH=amd64")
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
	if got, want := strings.Join(funcs, " "), "jsonscan.classify64 jsonscan.stringBlocks"; got != want {
		t.Fatalf("listed functions %q, want %q:\n%s", got, want, out)
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
