package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/tokens"
)

// showLowestLogprobs is how many of a call's least likely generated tokens show prints.
const showLowestLogprobs = 5

// printTokens writes the call's token summary: how many prompt and generated ids it carries and
// where they came from, the least likely generated tokens, and the findings (docs/tokens.md).
// tokenCapture is the line's token_capture object (it is not part of the record: the prompt ids a
// gateway rendered itself), nil when the line has none.
func printTokens(w io.Writer, r *modelcalls.ModelCallRecord, tokenCapture []byte) {
	c := tokens.Call{Dialect: str(r.Dialect), Request: r.Request, Response: r.Response, TokenCapture: tokenCapture}
	if r.ResponseRaw != nil {
		c.ResponseRaw = []byte(r.ResponseRaw.Text())
	}
	t := tokens.Read(c)
	if t.Source == tokens.SourceAbsent && len(t.Findings) == 0 && !hasLogprobs(t) {
		fmt.Fprintln(w, "none: the response carries no token ids or logprobs (modelcalls proxy --tokens ENGINE asks the engine for them)")
		return
	}
	for _, ch := range t.Choices {
		label := "generated"
		if len(t.Choices) > 1 {
			label = fmt.Sprintf("choice %d", ch.Index)
		}
		fmt.Fprintf(w, "%-10s %s (%s), %d logprobs\n", label, plural(len(ch.TokenIDs), "id", "ids"), ch.Source, len(ch.LogProbs))
	}
	fmt.Fprintf(w, "%-10s %s (%s)\n", "prompt", plural(len(t.PromptTokenIDs), "id", "ids"), t.PromptSource)
	if ch := t.Choices; len(ch) > 0 && len(ch[0].LogProbs) > 0 {
		lps := ch[0].LogProbs
		idx := make([]int, 0, len(lps))
		for i, lp := range lps {
			if lp.LogProb != nil {
				idx = append(idx, i)
			}
		}
		sort.SliceStable(idx, func(a, b int) bool { return *lps[idx[a]].LogProb < *lps[idx[b]].LogProb })
		if len(idx) > showLowestLogprobs {
			idx = idx[:showLowestLogprobs]
		}
		parts := make([]string, len(idx))
		for k, i := range idx {
			id := ""
			if lps[i].ID != nil {
				id = " id " + strconv.FormatInt(*lps[i].ID, 10)
			}
			parts[k] = fmt.Sprintf("#%d %q %.3f%s", i, lps[i].Token, *lps[i].LogProb, id)
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "lowest     %s\n", strings.Join(parts, ", "))
		}
	}
	for _, f := range t.Findings {
		fmt.Fprintf(w, "finding    %s: %s\n", f.Code, f.Detail)
	}
}

func hasLogprobs(t *tokens.Tokens) bool {
	for _, c := range t.Choices {
		if len(c.LogProbs) > 0 {
			return true
		}
	}
	return false
}
