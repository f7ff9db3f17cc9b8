package jsonscan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkFastPath runs the fast path (fastValidate) and the reference path (validateRef) on data the
// three ways validate is called (Validate, ValidateMembers, a Scanner mapping nested) and reports
// where they part: the fast path must accept exactly what the reference accepts, with the same
// members, nested map and index, except that it may give up on text nested deeper than fastDepth
// or whose index outgrew maxTreeNodes.
func checkFastPath(data []byte, nested string) error {
	deep := DeeperThan(data, fastDepth)
	for _, mode := range []string{"validate", "members", "scanner"} {
		collect := mode != "validate"
		var fsc, rsc *Scanner
		if mode == "scanner" {
			fsc, rsc = &Scanner{Nested: nested, NestedStart: -1}, &Scanner{Nested: nested, NestedStart: -1}
		}
		fm, ok := fastValidate(data, nil, collect, fsc)
		rm, err := validateRef(data, nil, collect, rsc)
		switch {
		case err != nil && ok:
			return fmt.Errorf("%s: fast path accepts what the reference refuses (%v)", mode, err)
		case err == nil && !ok:
			if deep || (rsc != nil && rsc.Tree.full) {
				continue
			}
			return fmt.Errorf("%s: fast path gives up on what the reference accepts", mode)
		case err != nil:
			continue
		}
		if !slices.Equal(fm, rm) {
			return fmt.Errorf("%s: members %v, reference %v", mode, fm, rm)
		}
		if fsc == nil {
			continue
		}
		if fsc.NestedStart != rsc.NestedStart || !slices.Equal(fsc.NestedMembers, rsc.NestedMembers) {
			return fmt.Errorf("nested map at %d %v, reference at %d %v", fsc.NestedStart, fsc.NestedMembers, rsc.NestedStart, rsc.NestedMembers)
		}
		if !slices.Equal(fsc.Tree.nodes, rsc.Tree.nodes) || fsc.Tree.full != rsc.Tree.full || !sameSlice(fsc.Tree.text, rsc.Tree.text) {
			return fmt.Errorf("index %v, reference %v", fsc.Tree.nodes, rsc.Tree.nodes)
		}
	}
	return nil
}

// TestFastPath compares the fast path with the reference on every case of the package's tables,
// on the capture fixture's lines (mapping response, as the record reader does) and on texts at the
// edges of what the fast path follows (nesting, block boundaries, whitespace).
func TestFastPath(t *testing.T) {
	defer restoreClassify()
	var texts []string
	for _, c := range walkCases {
		texts = append(texts, c.in)
	}
	texts = append(texts,
		`{"n":{"a":1,"b":[2,{"c":"d"}]},"x":0,"n":{"c":"d"},"n":null}`, `{"n":{}}`, `{"n":[]}`, `{"n":{"a":{}}}`,
		` { "n" : { "a" : [ 1 , "x" , { } , [ ] ] , "b" : null } , "z" : true } `, "\t{\"n\"\r:\n{\"a\"\t:1}}\n",
		`[{"n":{"a":1}}]`, `{"a":{"n":{"b":2}}}`, `{"n":{"a":1}`, `{"n":{"a":1}}}`, `{"n":{"a":1},}`, `{"n":{"a":1]}`,
		`{"n":{"a":[1}}`, `{"n":{"a" 1}}`, `{"n":{"a":1 "b":2}}`, `{"n":{"a":tru}}`, `{"n":{"a":nul}}`, `{"n":{"a":fals}}`,
		`{"n":{"a":01}}`, `{"n":{"a":1.}}`, `{"n":{"a":-}}`, `{"n":{"a":1e400}}`, `{"n":{"a":"\ud800"}}`, `{"n":{"\q":1}}`,
		`123`, `-0.5`, `1e5`, `true`, `false`, `null`, `"x"`, ` [ ] `, `{}`, `{"a":1}x`, `[1]]`, `{"a":[}`, `{"a":]}`,
		`{"n":{"a":1},"n":{"b":[true,false,null]}}`, `{"n":1,"n":{"z":{}}}`, `{"n":{"a":1},"n":2}`,
		strings.Repeat(`[`, fastDepth)+strings.Repeat(`]`, fastDepth), strings.Repeat(`[`, fastDepth+1)+strings.Repeat(`]`, fastDepth+1),
		`{"n":`+strings.Repeat(`{"a":`, fastDepth)+`1`+strings.Repeat(`}`, fastDepth)+`}`,
		"1"+strings.Repeat("0", 308), "1"+strings.Repeat("0", 309), strings.Repeat("9", 308)+".5",
		strings.Repeat("9", 309)+".5", "-"+strings.Repeat("9", 309), "0."+strings.Repeat("0", 400)+"1",
	)
	// Numbers of every length, each way one can be written or miswritten, alone and in containers.
	for _, num := range []string{"0", "-0", "7", "-7", "0.02", "-0.5", "1795968571.513956", "12345678901234567.5",
		"1.", "-.5", ".5", "01", "-01", "01.5", "1.5e3", "0e5", "1E-2", "1e", "1.2.3", "1-", "--1", "-", "1x", "0x1"} {
		for pad := range 18 {
			p := strings.Repeat("5", pad)
			for _, s := range []string{num + p, p + num, "-" + p + num} {
				texts = append(texts, s, `[`+s+`]`, `{"n":{"a":`+s+`,"b":[`+s+`,1]}}`, `[`+s+` ,`+s+`]`)
			}
		}
	}
	// Strings that start at every offset of a block and end at every offset after it.
	for pad := range 70 {
		for _, body := range []string{"", "a", strings.Repeat("b", 62), strings.Repeat("c", 63), strings.Repeat("d", 64),
			strings.Repeat("e", 130), `x\"y`, "é", "\x01", `\u00e9`} {
			texts = append(texts, `{"`+strings.Repeat("k", pad)+`":"`+body+`","n":{"`+body+`":"`+body+`"}}`)
			texts = append(texts, `["`+strings.Repeat("k", pad)+`","`+body+`"]`)
		}
	}
	files, _ := filepath.Glob("../../testdata/gym-capture/capture/*.capture.jsonl")
	var lines [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, bytes.Split(data, []byte("\n"))...)
	}
	if len(lines) == 0 {
		t.Fatal("no capture fixture")
	}
	for _, form := range classifyForms {
		form.use()
		for _, s := range texts {
			for _, nested := range []string{"n", "a"} {
				if err := checkFastPath([]byte(s), nested); err != nil {
					t.Errorf("%s: %.80q: %v", form.name, s, err)
				}
			}
		}
		for _, l := range lines {
			if err := checkFastPath(l, "response"); err != nil {
				t.Errorf("%s: capture line %.80q: %v", form.name, l, err)
			}
		}
	}
}
