package cli

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	modelcalls "github.com/modelcalls/modelcalls"
)

// callFilter selects calls by --model, --status and --error. Each flag may be repeated or hold a
// comma-separated list; a call matches when it matches one value of every flag given (any of the
// values, all of the flags). No flag: every call matches.
type callFilter struct {
	models   []string // exact model names (the record's "model")
	statuses []string // "200", a class "4xx", or "none" (no HTTP status: the client left before the headers)
	errors   []string // an error_category, "any" (any error) or "none" (no error)
}

// reportOptions are the flags calls and stats share: the capture dirs (--capture-dir may be
// repeated; one dir may also be given as an argument), the output format and the call filters.
type reportOptions struct {
	captureDirs []string
	json        bool
	format      string
	filter      callFilter
}

// addFlags registers the shared flags; dirHelp and jsonHelp are the command's own help texts.
func (r *reportOptions) addFlags(fs *pflag.FlagSet, dirHelp, jsonHelp string) {
	fs.StringArrayVar(&r.captureDirs, "capture-dir", nil, dirHelp)
	fs.StringVar(&r.format, "format", "", "table, tsv or json (default: table on a terminal, tsv otherwise)")
	fs.BoolVar(&r.json, "json", false, jsonHelp)
	r.filter.addFlags(fs)
}

func (f *callFilter) addFlags(fs *pflag.FlagSet) {
	fs.Var((*filterValues)(&f.models), "model", "only calls of this model (repeat or comma-separate for several; not empty)")
	fs.Var((*filterValues)(&f.statuses), "status", "only calls with this HTTP status: 200, a class like 4xx, or none")
	fs.Var((*filterValues)(&f.errors), "error", "only calls with this error_category (e.g. rate_limit), any error (any), or none")
}

// filterValues is the value of a filter flag: every use appends its comma-separated values (read
// as CSV, like pflag's string slices, so a value may hold a comma in quotes). An empty or blank
// value, the whole of it (--model "") or one of the list (--model a,), is an error: an unset shell
// variable must not turn the filter off without a word. pflag reports it as an invalid argument of
// the flag, which Main turns into exit 2.
type filterValues []string

var errEmptyFilterValue = errors.New("empty value (an unset shell variable?): give a value or leave the flag out")

func (v *filterValues) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errEmptyFilterValue
	}
	vals, err := csv.NewReader(strings.NewReader(s)).Read()
	if err != nil {
		return err
	}
	for _, x := range vals {
		if strings.TrimSpace(x) == "" {
			return errEmptyFilterValue
		}
	}
	*v = append(*v, vals...)
	return nil
}

func (v *filterValues) Type() string { return "strings" }

func (v *filterValues) String() string {
	if len(*v) == 0 {
		return ""
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(*v)
	w.Flush()
	return "[" + strings.TrimSuffix(b.String(), "\n") + "]"
}

// check validates the --status values.
func (f *callFilter) check() error {
	for _, s := range f.statuses {
		if s == "none" {
			continue
		}
		if len(s) == 3 && s[0] >= '1' && s[0] <= '5' && (strings.EqualFold(s[1:], "xx") || isDigits(s[1:])) {
			continue
		}
		return usageErrorf("--status %q: want a status code (200), a class (1xx to 5xx) or none", s)
	}
	return nil
}

func isDigits(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil && !strings.ContainsAny(s, "+-")
}

func (f *callFilter) active() bool { return len(f.models)+len(f.statuses)+len(f.errors) > 0 }

func (f *callFilter) match(r *modelcalls.ModelCallRecord) bool {
	if len(f.models) > 0 && !anyOf(f.models, func(m string) bool { return r.Model != nil && *r.Model == m }) {
		return false
	}
	if len(f.statuses) > 0 && !anyOf(f.statuses, func(s string) bool { return statusMatches(s, r.StatusCode) }) {
		return false
	}
	if len(f.errors) > 0 && !anyOf(f.errors, func(e string) bool {
		switch e {
		case "any":
			return r.ErrorCategory != nil
		case "none":
			return r.ErrorCategory == nil
		}
		return r.ErrorCategory != nil && *r.ErrorCategory == e
	}) {
		return false
	}
	return true
}

func statusMatches(spec string, status *int) bool {
	if spec == "none" {
		return status == nil
	}
	if status == nil {
		return false
	}
	code := strconv.Itoa(*status)
	if strings.EqualFold(spec[1:], "xx") {
		return len(code) == 3 && code[0] == spec[0]
	}
	return code == spec
}

func anyOf(values []string, ok func(string) bool) bool {
	for _, v := range values {
		if ok(v) {
			return true
		}
	}
	return false
}

// apply returns the records that match, in order (records itself when no flag is given).
func (f *callFilter) apply(records []modelcalls.ModelCallRecord) []modelcalls.ModelCallRecord {
	if !f.active() {
		return records
	}
	out := make([]modelcalls.ModelCallRecord, 0, len(records))
	for i := range records {
		if f.match(&records[i]) {
			out = append(out, records[i])
		}
	}
	return out
}

// noteModels adds the model of every record to seen (calls with an unknown model add nothing).
func noteModels(seen map[string]bool, records []modelcalls.ModelCallRecord) {
	for i := range records {
		if m := records[i].Model; m != nil {
			seen[*m] = true
		}
	}
}

// maxListedModels is how many model names the note lists before it says "and N more".
const maxListedModels = 20

// unmatchedModelsNote returns the stderr note for the --model values no call has ("" when every
// value matched some call): model names are free-form, so a typo is not an error, but an empty
// result must not pass for "this model made no calls". subject names the calls looked at ("of
// rollout r1", "in ./captures") and theirs their models in the note ("its models", "the models in
// ./captures"); seen holds those models. A model that contains a missing value (case aside), as
// gpt-5-nano-2025-08-07 contains gpt-5-nano, is offered as "did you mean".
func (f *callFilter) unmatchedModelsNote(subject, theirs string, seen map[string]bool) string {
	var missing []string
	for _, m := range f.models {
		if !seen[m] && !slices.Contains(missing, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	quoted := make([]string, len(missing))
	for i, m := range missing {
		quoted[i] = strconv.Quote(m)
	}
	note := fmt.Sprintf("no call %s has model %s", subject, strings.Join(quoted, " or "))
	if len(seen) == 0 {
		return note + "; no call there has a known model"
	}
	models := make([]string, 0, len(seen))
	for m := range seen {
		models = append(models, m)
	}
	slices.Sort(models)
	var like []string
	for _, m := range models {
		for _, v := range missing {
			if strings.Contains(strings.ToLower(m), strings.ToLower(v)) {
				like = append(like, m)
				break
			}
		}
	}
	list := models
	more := ""
	if len(list) > maxListedModels {
		list, more = list[:maxListedModels], fmt.Sprintf(" and %d more", len(models)-maxListedModels)
	}
	note += fmt.Sprintf("; %s: %s%s", theirs, strings.Join(list, ", "), more)
	if len(like) > 0 {
		note += "; did you mean " + strings.Join(like, " or ") + "?"
	}
	return note
}
