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
// for one call, counted from the call's start.
const renderTimeout = 10 * time.Second

// renderGrace is how long the capture line, and so the client's terminal event, waits for an
// unfinished render once the call's answer has ended. The render starts with the call and asks
// the same server for part of the work the call itself does, so it normally ends first; one that
// has not by then is given up and named on the line, and the client waits at most this long more
// than without --tokens.
const renderGrace = 100 * time.Millisecond

// Bounds on what the gateway reads of a render answer, proportional to what it sent. A chat
// template renders the request's messages and tools, at most four times the request's JSON bytes
// with the answer's escapes, plus its own text (at most renderSlack bytes, more than any shipped
// template); a tokenizer gives at most one id per byte of text plus the special tokens
// (tokenizeSpecial), each id at most maxIDJSONBytes of JSON ("4294967295,").
const (
	renderSlack     = 1 << 20
	maxIDJSONBytes  = 12
	tokenizeSpecial = 64
)

// renderResult is what a prompt render gives: the prompt ids or why there are none.
type renderResult struct {
	ids []int64
	err error
}

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
// beside the call. A body that is not a JSON object is forwarded as sent and gets no
// token_capture (the engine refuses it). A call the engine would refuse when asked, and a body
// with a Content-Encoding, are forwarded as sent and their token_capture says why (not_asked).
func (c *call) askTokens(r *http.Request, body []byte, codings []string) []byte {
	e := c.h.Tokens
	if e == "" {
		return body
	}
	if len(codings) > 0 {
		// A compressed body is forwarded as sent; the line says the call was not asked, so that
		// its missing ids read as a decision, not a loss.
		if len(e.RequestFields(string(c.dialect))) > 0 {
			c.tokens = &tokenCapture{Engine: e, Added: json.RawMessage("{}"), NotAsked: tokens.NotAskedRequestEncoded}
		}
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
	// The render goroutine only sends its result: c.tokens is the capture's, filled in by
	// tokenCaptureJSON, which may give up on the render.
	done := make(chan renderResult, 1)
	c.render = done
	hdr := renderHeaders(r.Header)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), renderTimeout)
	c.renderCancel = cancel
	go func() {
		ids, err := render(ctx, hdr)
		done <- renderResult{ids, err}
	}()
	return out
}

// tokenCaptureJSON returns the line's token_capture object, nil when the call has none. A prompt
// render still running gets renderGrace more, then is cancelled and named as not finished.
func (c *call) tokenCaptureJSON() json.RawMessage {
	if c.tokens == nil {
		return nil
	}
	if c.render != nil {
		grace := time.NewTimer(renderGrace)
		select {
		case res := <-c.render:
			if res.err != nil {
				c.tokens.PromptTokenError = res.err.Error()
			} else {
				c.tokens.PromptTokenIDs = res.ids
			}
		case <-grace.C:
			c.tokens.PromptTokenError = fmt.Sprintf("the server's render did not finish within %v of the call's answer: given up", renderGrace)
		}
		grace.Stop()
		c.renderCancel()
		c.render = nil
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
	if err := h.renderCall(ctx, hdr, "/apply-template", request, int64(len(request))*4+renderSlack, &tmpl); err != nil {
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
	if err := h.renderCall(ctx, hdr, "/tokenize", req, int64(len(prompt)+tokenizeSpecial)*maxIDJSONBytes, &tok); err != nil {
		return nil, err
	}
	if len(tok.Tokens) == 0 {
		return nil, errors.New("/tokenize: answer has no tokens")
	}
	if len(tok.Tokens) > len(prompt)+tokenizeSpecial {
		return nil, fmt.Errorf("/tokenize: answer has %d ids for a prompt of %d bytes", len(tok.Tokens), len(prompt))
	}
	return tok.Tokens, nil
}

// renderCall posts body to path on the upstream and decodes its answer into into; an answer
// other than 200, or longer than limit bytes, is an error.
func (h *Handler) renderCall(ctx context.Context, hdr http.Header, path string, body []byte, limit int64, into any) error {
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
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", path, res.StatusCode)
	}
	if res.ContentLength > limit {
		return fmt.Errorf("%s: answer is longer than %d bytes (%d)", path, limit, res.ContentLength)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", path, err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("%s: answer is longer than %d bytes", path, limit)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: answer is not the expected JSON: %w", path, err)
	}
	return nil
}
