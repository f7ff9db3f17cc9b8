package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// microPackages are the packages whose hot paths have go test benchmarks (run when they have any).
var microPackages = []string{".", "./record", "./sse", "./dialect", "./capture", "./gateway", "./internal/jsonscan", "./otelexport", "./test/bench"}

const microBenchtime = "300ms"

var microCommand = "go test -short -run '^$' -bench . -benchmem -benchtime " + microBenchtime + " <packages with benchmarks among " +
	strings.Join(microPackages, " ") + ">"

// runMicro runs the micro-benchmarks of every package in microPackages that has any, from the
// repository root (the working directory of `make bench`), and keeps the result lines.
func (r *runner) runMicro() error {
	var pkgs []string
	for _, p := range microPackages {
		files, _ := filepath.Glob(filepath.Join(p, "*_test.go"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && bytes.Contains(b, []byte("func Benchmark")) {
				pkgs = append(pkgs, p)
				break
			}
		}
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("no benchmarks found (run from the repository root)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go not found: %w", err)
	}
	// -short: benchmarks that build a whole run's data set (the root package's BenchmarkMerge) use
	// their small size; the merge row above measures the full size.
	args := append([]string{"test", "-short", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", microBenchtime}, pkgs...)
	cmd := exec.Command(goBin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "pkg:") || strings.HasPrefix(line, "FAIL") ||
			strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "cpu:") && len(r.micro) == 0 {
			r.micro = append(r.micro, line)
		}
	}
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(out.Bytes(), 3000))
	}
	return nil
}
