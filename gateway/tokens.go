package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/tokens"
)

// renderTimeout bounds the gateway's own calls to llama-server's /apply-template and /tokenize
// for one call, counted from the call's start; the capture line waits for them at most this long.
const renderTimeout = 10 * time.Second

// maxRenderBody bounds what the gateway reads of an /apply-template or /tokenize answer.
const maxRenderBody = 64 << 20

// tokenCapture is the capture line's token_capture object: what the gateway did to ask the
// engine for token ids (docs/format.md).
type tokenCapture struct {
	Engine           tokens.Engine   `json:"engine"`
	Added            json.RawMessage `json:"added"`
	NotAsked         tokens.NotAsked `json:"not_asked,omitempty"`
	PromptTokenIDs   []int64         `json:"prompt_token_ids,omitempty"`
	PromptTokenError string          `json:"prompt_token_error,omitempty"`
}

// askTokens prepares a captured call for Handler.Tokens: it returns the body to forward (the
// client's, with the members the engine needs appended when the client did not set them) and,
// for llama-server, starts fetching the prompt ids from the server's own template and tokenizer
// beside the call. A body with a Content-Encoding, or that is not a JSON object, is forwarded as
// sent and gets no token_capture. A call the engine would refuse when asked is forwarded as sent
// and its token_capture says why (not_asked).
func (c *call) askTokens(r *http.Request, body []byte, codings []string) []byte {
	e := c.h.Tokens
	if e == "" || len(codings) > 0 {
		return body
	}
	out, added, not := tokens.AddRequestFields(e, string(c.dialect), body)
	if added == nil {
		return body
	}
	c.tokens = &tokenCapture{Engine: e, Added: added, NotAsked: not}
	if e != tokens.EngineLlamaServer {
		return out
	}
	var render func(context.Context, http.Header) ([]int64, error)
	switch c.dialect {
	case dialect.Chat:
		render = func(ctx context.Context, hdr http.Header) ([]int64, error) { return c.h.renderPrompt(ctx, hdr, body) }
	case dialect.Completions:
		switch p, kind := dialect.CompletionsPrompt(body); kind {
		case dialect.PromptText:
			render = func(ctx context.Context, hdr http.Header) ([]int64, error) { return c.h.tokenize(ctx, hdr, p) }
		case dialect.PromptIDs:
			// The prompt is ids already: the reader takes them from the request.
		case dialect.PromptBatch:
			c.tokens.PromptTokenError = "the prompt is a batch of several prompts: not rendered"
		default:
			c.tokens.PromptTokenError = "the request has no prompt of a documented shape: not rendered"
		}
	}
	if render == nil {
		return out
	}
	done := make(chan struct{})
	c.render = done
	hdr := renderHeaders(r.Header)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), renderTimeout)
	go func() {
		defer close(done)
		defer cancel()
		ids, err := render(ctx, hdr)
		if err != nil {
			c.tokens.PromptTokenError = err.Error()
			return
		}
		c.tokens.PromptTokenIDs = ids
	}()
	return out
}

// tokenCaptureJSON waits for the prompt render, if one runs, and returns the line's token_capture
// object, nil when the call has none.
func (c *call) tokenCaptureJSON() json.RawMessage {
	if c.tokens == nil {
		return nil
	}
	if c.render != nil {
		<-c.render
	}
	b, err := json.Marshal(c.tokens)
	if err != nil {
		return nil
	}
	return b
}

// renderHeaders are the client's headers the render calls carry: its credentials, so a server
// run with an API key answers them as it answers the call.
func renderHeaders(in http.Header) http.Header {
	out := http.Header{"Content-Type": {"application/json"}}
	for _, k := range []string{"Authorization", "X-Api-Key"} {
		if v := in.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// renderPrompt asks llama-server for the prompt ids of a Chat request the way it renders one:
// POST /apply-template with the request (its chat template applied to the messages and tools,
// giving {"prompt": text}), then tokenize with that text, special tokens added and parsed as its
// chat endpoint does.
func (h *Handler) renderPrompt(ctx context.Context, hdr http.Header, request []byte) ([]int64, error) {
	var tmpl struct {
		Prompt *string `json:"prompt"`
	}
	if err := h.renderCall(ctx, hdr, "/apply-template", request, &tmpl); err != nil {
		return nil, err
	}
	if tmpl.Prompt == nil {
		return nil, errors.New("/apply-template: answer has no prompt")
	}
	p, err := json.Marshal(*tmpl.Prompt)
	if err != nil {
		return nil, err
	}
	return h.tokenize(ctx, hdr, p)
}

// tokenize asks llama-server for the ids of a prompt the way its completion endpoints tokenize
// one: POST /tokenize with {"content": prompt, "add_special": true, "parse_special": true}
// (giving {"tokens": [ids]}). prompt is a JSON string, or a list mixing ids and strings, which
// the server tokenizes in place as its /v1/completions does.
func (h *Handler) tokenize(ctx context.Context, hdr http.Header, prompt json.RawMessage) ([]int64, error) {
	req, err := json.Marshal(struct {
		Content      json.RawMessage `json:"content"`
		AddSpecial   bool            `json:"add_special"`
		ParseSpecial bool            `json:"parse_special"`
	}{prompt, true, true})
	if err != nil {
		return nil, err
	}
	var tok struct {
		Tokens []int64 `json:"tokens"`
	}
	if err := h.renderCall(ctx, hdr, "/tokenize", req, &tok); err != nil {
		return nil, err
	}
	if tok.Tokens == nil {
		return nil, errors.New("/tokenize: answer has no tokens")
	}
	return tok.Tokens, nil
}

func (h *Handler) renderCall(ctx context.Context, hdr http.Header, path string, body []byte, into any) error {
	u := *h.Upstream
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	req.Header = hdr.Clone()
	res, err := h.proxy.Transport.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxRenderBody))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", path, res.StatusCode)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: answer is not the expected JSON: %w", path, err)
	}
	return nil
}
