package schema

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestTable: no key twice in Line, Record or ToolCall, every Record field copied from the line
// names a Line key, and every Line key reaches the record unless it is marked LineOnly.
func TestTable(t *testing.T) {
	line := map[string]bool{}
	for _, k := range Line {
		if line[k.Key] {
			t.Errorf("Line lists %s twice", k.Key)
		}
		line[k.Key] = true
	}
	record, goNames, from := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, f := range Record {
		if record[f.Key] || goNames[f.Go] {
			t.Errorf("Record lists %s (%s) twice", f.Key, f.Go)
		}
		record[f.Key], goNames[f.Go] = true, true
		if f.From != "" {
			if !line[f.From] {
				t.Errorf("Record field %s is copied from %s, which is not a Line key", f.Key, f.From)
			}
			from[f.From] = true
		}
	}
	for _, k := range Line {
		switch {
		case !from[k.Key] && !k.LineOnly:
			t.Errorf("Line key %s reaches no Record field: name it in a field's From, or mark it LineOnly", k.Key)
		case from[k.Key] && k.LineOnly:
			t.Errorf("Line key %s is marked LineOnly but Record copies it", k.Key)
		}
	}
	if len(ToolCall) != len(slices.Compact(slices.Clone(ToolCall[:]))) {
		t.Errorf("ToolCall repeats a key: %v", ToolCall)
	}
}

// formatSections reads docs/format.md: the lines of section 3 (the capture line) up to its first
// subsection, and of section 7.2 (the record's fields) up to the next heading.
func formatSections(t *testing.T) (line, record []string) {
	t.Helper()
	f, err := os.Open("../../docs/format.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cur *[]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			switch {
			case strings.HasPrefix(l, "## 3. "):
				cur = &line
			case strings.HasPrefix(l, "### 7.2 "):
				cur = &record
			default:
				cur = nil
			}
			continue
		}
		if cur != nil {
			*cur = append(*cur, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(line) == 0 || len(record) == 0 {
		t.Fatal("docs/format.md has no section 3 or 7.2")
	}
	return line, record
}

var backticked = regexp.MustCompile("`([a-z_]+)`")

// TestFormatDoc: docs/format.md lists the same keys in the same order as the table: section 3's
// table (number, key, presence) is Line, section 7.2's table (a row may name several fields) and
// its JSON form paragraph are Record.
func TestFormatDoc(t *testing.T) {
	lineDoc, recordDoc := formatSections(t)

	var keys, want []string
	n := 0
	for _, l := range lineDoc {
		cells := strings.Split(l, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`") {
			continue
		}
		n++
		if num := strings.TrimSpace(cells[1]); num != strconv.Itoa(n) {
			t.Errorf("format.md section 3: row %d is numbered %s", n, num)
		}
		key := strings.Trim(strings.TrimSpace(cells[2]), "`")
		keys = append(keys, key)
		if i := n - 1; i < len(Line) && Line[i].Key == key {
			always := strings.TrimSpace(cells[4]) == "always"
			if always != (Line[i].Present == Always) {
				t.Errorf("format.md section 3: %s is present %q, the table says always=%v", key, strings.TrimSpace(cells[4]), Line[i].Present == Always)
			}
		}
	}
	for _, k := range Line {
		want = append(want, k.Key)
	}
	if !slices.Equal(keys, want) {
		t.Errorf("format.md section 3 lists the line keys\n%v\nschema.Line\n%v", keys, want)
	}

	want = want[:0]
	for _, f := range Record {
		want = append(want, f.Key)
	}
	keys = nil
	var form strings.Builder
	inForm := false
	for _, l := range recordDoc {
		cells := strings.Split(l, "|")
		if len(cells) >= 4 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
				keys = append(keys, m[1])
			}
			continue
		}
		if strings.Contains(l, "**JSON form.**") {
			inForm = true
		}
		if inForm {
			form.WriteString(l + " ")
			if strings.Contains(l, "Without payloads") {
				inForm = false
			}
		}
	}
	if !slices.Equal(keys, want) {
		t.Errorf("format.md section 7.2's table lists the record fields\n%v\nschema.Record\n%v", keys, want)
	}
	text := form.String()
	if i := strings.Index(text, "Without payloads"); i >= 0 {
		text = text[:i]
	}
	keys = nil
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		keys = append(keys, m[1])
	}
	if !slices.Equal(keys, want) {
		t.Errorf("format.md section 7.2's JSON form lists\n%v\nschema.Record\n%v", keys, want)
	}
}
