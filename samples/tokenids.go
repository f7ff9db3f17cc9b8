package samples

import (
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/record"
	"github.com/modelcalls/modelcalls/tokens"
)

// TokenIDs reads one captured call's token ids with package tokens (every engine shape it knows,
// and the line's token_capture when line is given): the prompt ids, the first choice's generated
// ids and their log probabilities (nil unless there is one per id). nil when the call carries no
// ids at all. It is a lineage.TokenReader.
func TokenIDs(r *record.ModelCallRecord, line []byte) *lineage.TokenIDs {
	c := tokens.Call{Request: r.Request, Response: r.Response}
	if r.Dialect != nil {
		c.Dialect = *r.Dialect
	}
	if r.ResponseRaw != nil {
		c.ResponseRaw = []byte(r.ResponseRaw.Text())
	}
	if line != nil {
		if tc := jsonscan.Lookup(line, "token_capture"); jsonscan.IsObject(tc) {
			c.TokenCapture = tc
		}
	}
	t := tokens.Read(c)
	if t.PromptTokenIDs == nil && t.GenerationTokenIDs() == nil {
		return nil
	}
	return &lineage.TokenIDs{Prompt: t.PromptTokenIDs, Generated: t.GenerationTokenIDs(), LogProbs: t.GenerationLogProbs()}
}

var _ lineage.TokenReader = TokenIDs
