package lineage

// Audit is the token-prefix audit of one chained edge: whether the parent's prompt ids followed by
// its generated ids are an exact prefix of the child's prompt ids.
type Audit struct {
	OK                    bool `json:"ok"`
	ParentPromptTokens    int  `json:"parent_prompt_tokens"`
	ParentGeneratedTokens int  `json:"parent_generated_tokens"`
	ChildPromptTokens     int  `json:"child_prompt_tokens"`
	// Position is the first position (0-based, in the child's prompt) where the two differ, nil
	// when OK.
	Position *int `json:"position,omitempty"`
	// In says where Position falls on the parent's side: "parent_prompt" (the history was rendered
	// differently) or "parent_generation" (the generated tokens came back as other tokens: a
	// re-tokenized answer, a template that rewrites or drops the end of turn).
	In string `json:"in,omitempty"`
	// Expected is the parent's id at Position; Got the child's, nil when the child's prompt ended
	// there.
	Expected *int64 `json:"expected,omitempty"`
	Got      *int64 `json:"got,omitempty"`
}

// AuditPrefix audits one edge: parentPrompt followed by parentGenerated against childPrompt.
func AuditPrefix(parentPrompt, parentGenerated, childPrompt []int64) Audit {
	a := Audit{ParentPromptTokens: len(parentPrompt), ParentGeneratedTokens: len(parentGenerated), ChildPromptTokens: len(childPrompt), OK: true}
	n := len(parentPrompt) + len(parentGenerated)
	for i := 0; i < n; i++ {
		want := parentPrompt
		j := i
		a.In = "parent_prompt"
		if i >= len(parentPrompt) {
			want, j, a.In = parentGenerated, i-len(parentPrompt), "parent_generation"
		}
		if i >= len(childPrompt) || childPrompt[i] != want[j] {
			pos, exp := i, want[j]
			a.OK, a.Position, a.Expected = false, &pos, &exp
			if i < len(childPrompt) {
				got := childPrompt[i]
				a.Got = &got
			}
			return a
		}
	}
	a.In = ""
	return a
}
