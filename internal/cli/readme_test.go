package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeCommandTableFlags: each row of README.md's command table names every flag the heading
// of its command in docs/cli.md names, so the table does not fall behind the reference.
func TestReadmeCommandTableFlags(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cliDoc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // command -> its first cell
	rowRE := regexp.MustCompile("(?m)^\\| `modelcalls ([a-z]+)([^`]*)` \\|")
	for _, m := range rowRE.FindAllStringSubmatch(string(readme), -1) {
		if _, ok := rows[m[1]]; !ok {
			rows[m[1]] = m[2]
		}
	}
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	headRE := regexp.MustCompile("(?m)^## `modelcalls ([a-z]+)([^`]*)`")
	checked := 0
	for _, m := range headRE.FindAllStringSubmatch(string(cliDoc), -1) {
		row, ok := rows[m[1]]
		if !ok {
			continue
		}
		checked++
		for _, flag := range flagRE.FindAllString(m[2], -1) {
			if !regexp.MustCompile(regexp.QuoteMeta(flag) + `\b`).MatchString(row) {
				t.Errorf("README.md's row of %s lacks %s (docs/cli.md: modelcalls %s%s)", m[1], flag, m[1], strings.TrimRight(m[2], " "))
			}
		}
	}
	if checked < 6 {
		t.Errorf("only %d commands compared", checked)
	}
}
