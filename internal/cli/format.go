package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/modelcalls/modelcalls/rollout"
	"golang.org/x/term"
)

// Output formats of calls and stats (--format).
const (
	formatTable = "table" // box-drawn table for people, fitted to the terminal's width
	formatTSV   = "tsv"   // tab-separated values with a header line, for scripts
	formatJSON  = "json"  // JSON (calls: one record per line; stats: one object)
)

// resolveFormat picks the output format: --format when given (--json is --format json), else a
// table when out is a terminal and TSV when it is not (a pipe or file).
func resolveFormat(format string, asJSON bool, out io.Writer) (string, error) {
	switch format {
	case "":
		if asJSON {
			return formatJSON, nil
		}
		if isTerminal(out) {
			return formatTable, nil
		}
		return formatTSV, nil
	case formatTable, formatTSV, formatJSON:
		if asJSON && format != formatJSON {
			return "", usageErrorf("--json and --format %s disagree: give one", format)
		}
		return format, nil
	}
	return "", usageErrorf("--format %q: want table, tsv or json", format)
}

// outputWidth is the width tables are fitted to: the terminal's columns when out is a terminal,
// else $COLUMNS when it is a positive number, else 0 (no limit).
func outputWidth(out io.Writer) int {
	if f, ok := out.(*os.File); ok && isTerminal(f) {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}

// minFitWidth is the narrowest a shrinkable column gets when a table is fitted.
const minFitWidth = 6

// fitColumns cuts cells (with "…") until the table, as newTable draws it (one space of padding
// each side of a cell and a border between columns), is at most width columns wide. First the
// values of the shrinkable columns are cut, the widest first, down to their header's width (at
// least minFitWidth), so that headers stay whole; then headers wider than their column's values
// are cut down to the values' width (at least minHeaderWidth); then the shrinkable values again,
// never below minFitWidth. If the table still does not fit, it is left wider. width <= 0 leaves
// the rows as they are.
func fitColumns(header []string, rows [][]string, width int, shrinkable []int) {
	if width <= 0 || len(header) == 0 {
		return
	}
	widths := make([]int, len(header))
	data := make([]int, len(header)) // widest value per column
	for _, r := range rows {
		for i, c := range r {
			data[i] = max(data[i], runewidth.StringWidth(c))
		}
	}
	total := 3*len(header) + 1
	for i, h := range header {
		widths[i] = max(data[i], runewidth.StringWidth(h))
		total += widths[i]
	}
	// shrink takes one column from the widest column that may still give one, given its floor.
	shrink := func(cols []int, floor func(i int) int) bool {
		widest := -1
		for _, i := range cols {
			if widths[i] > floor(i) && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			return false
		}
		widths[widest]--
		total--
		return true
	}
	all := make([]int, len(header))
	for i := range all {
		all[i] = i
	}
	hdr := func(i int) int { return runewidth.StringWidth(header[i]) }
	for total > width && shrink(shrinkable, func(i int) int { return max(minFitWidth, hdr(i)) }) {
	}
	for total > width && shrink(all, func(i int) int { return max(data[i], minHeaderWidth) }) {
	}
	for total > width && shrink(shrinkable, func(int) int { return minFitWidth }) {
	}
	cut := func(s string, w int) string {
		if runewidth.StringWidth(s) <= w {
			return s
		}
		return runewidth.Truncate(s, w, "…")
	}
	for i := range header {
		header[i] = cut(header[i], widths[i])
		for _, r := range rows {
			r[i] = cut(r[i], widths[i])
		}
	}
}

// tableWidth is how many columns a table of header and rows takes with no cell cut: each column
// its widest cell with a space each side and a border, and the first border.
func tableWidth(header []string, rows [][]string) int {
	total := 3*len(header) + 1
	for i, h := range header {
		w := runewidth.StringWidth(h)
		for _, r := range rows {
			w = max(w, runewidth.StringWidth(r[i]))
		}
		total += w
	}
	return total
}

// minHeaderWidth is the narrowest a header is cut to ("la…").
const minHeaderWidth = 3

// renderTable draws header and rows as a table fitted to width (see fitColumns).
func renderTable(w io.Writer, header []string, right []bool, rows [][]string, width int, shrinkable []int) error {
	fitColumns(header, rows, width, shrinkable)
	t := newTable(w, header, right)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return fmt.Errorf("table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return nil
}

// wrapParts joins parts with sep into lines at most width columns wide (0: one line), breaking
// only between parts; a part wider than width has a line of its own.
func wrapParts(parts []string, sep string, width int) []string {
	var lines []string
	cur := ""
	for _, p := range parts {
		switch {
		case cur == "":
			cur = p
		case width > 0 && runewidth.StringWidth(cur+sep+p) > width:
			lines = append(lines, cur)
			cur = p
		default:
			cur += sep + p
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// tsvCell makes a value safe for one TSV field: tabs, newlines and carriage returns become spaces.
var tsvCell = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace

// writeTSV writes a header line and one line per row, fields separated by tabs.
func writeTSV(w io.Writer, header []string, rows [][]string) {
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				io.WriteString(w, "\t")
			}
			io.WriteString(w, tsvCell(c))
		}
		io.WriteString(w, "\n")
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
}

// TSV fields: unknown (null) is the empty field.
func tsvStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func tsvInt(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func tsvInt64(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

func tsvFloat(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'f', 2, 64)
}

// captureDirArgs resolves the capture dirs of a command that takes them as --capture-dir (which may
// be repeated) or, the older form, one as its first argument; want names the other arguments, in
// order. Errors are usage errors that name what is missing ("calls: missing ROLLOUT_ID").
func captureDirArgs(cmd string, flagDirs []string, args []string, want ...string) ([]string, []string, error) {
	if len(flagDirs) > 0 {
		if len(args) < len(want) {
			return nil, nil, usageErrorf("%s: missing %s", cmd, strings.Join(want[len(args):], " and "))
		}
		if len(args) > len(want) {
			return nil, nil, usageErrorf("%s: unexpected argument %q (the capture dir is already given by --capture-dir)", cmd, args[len(want)])
		}
		return flagDirs, args, nil
	}
	switch {
	case len(args) == len(want)+1:
		return args[:1], args[1:], nil
	case len(args) > len(want)+1:
		return nil, nil, usageErrorf("%s: unexpected argument %q", cmd, args[len(want)+1])
	case len(args) == 0 && len(want) > 0:
		return nil, nil, usageErrorf("%s: missing --capture-dir DIR and %s", cmd, strings.Join(want, " and "))
	case len(args) > 0 && isDir(args[0]):
		return nil, nil, usageErrorf("%s: missing %s after the capture dir %s", cmd, strings.Join(want[len(args)-1:], " and "), args[0])
	case len(args) > 0 && rollout.Validate(args[0]) != nil:
		// Not a rollout id (a path: ./captures, /data/run1): meant as the capture dir, which is
		// not there.
		return nil, nil, checkDir(args[0])
	case len(args) > 0:
		return nil, nil, usageErrorf("%s: missing --capture-dir DIR (or the capture dir as the first argument: there is no directory %s here%s)",
			cmd, args[0], strings.Replace(didYouMean(similarPaths(args[0], true)), ";", ",", 1))
	default:
		return nil, nil, usageErrorf("%s: missing --capture-dir DIR (or the capture dir as the first argument)", cmd)
	}
}
