package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/tokens"
	"github.com/modelcalls/modelcalls/tokens/tokenexport"
)

// Token rows: what token-faithful capture costs. Row 9 (`-only tokexport`) is `modelcalls export
// tokens` over a capture whose every call carries vLLM's ids and logprobs, against the raw read of
// the same bytes; row 10 (`-only tokens`) is the gateway with `--tokens vllm` against the same
// gateway whose client asks for the ids itself, both answered with the same token-carrying body.

// The vLLM Chat answer of the token rows: the prompt as many ids as its request has bytes / 4 (about
// what a BPE tokenizer gives English and JSON), tokGenTokens generated tokens.
const (
	tokGenTokens = 200
	hdrChatJSON  = "X-Bench-Chat-Json" // a Chat call answered with JSON (tokenBodies), not the SSE stream
)

// tokenBodies are the token rows' Chat request and answers.
type tokenBodies struct {
	request []byte // the client's non-streaming Chat request (the pi request with stream false)
	asking  []byte // the same, asking vLLM for ids and logprobs itself (what --tokens vllm appends)
	plain   []byte // vLLM's answer without token data
	withIDs []byte // vLLM's answer to a request with return_token_ids and logprobs: prompt_token_ids, token_ids, logprobs.content
	added   []byte // token_capture.added of a --tokens vllm call
	promptN int
}

// tokenWords are the generated tokens' texts, cycled (the ids are drawn at random).
var tokenWords = []string{"The", " file", " reads", " the", " config", " and", " returns", " a", " list", " of", " paths", ".", "\n", " I", "'ll", " run", " `", "ls", "`", " next"}

func newTokenBodies(sseRequest []byte) (*tokenBodies, error) {
	req := bytes.Replace(sseRequest, []byte(`"stream":true`), []byte(`"stream":false`), 1)
	if bytes.Equal(req, sseRequest) {
		return nil, fmt.Errorf("token rows: the chat request has no \"stream\":true: %w", errUnexpected)
	}
	added := []byte(`{"return_token_ids":true,"logprobs":true}`)
	t := &tokenBodies{request: req, added: added, promptN: len(req) / 4}
	t.asking = append(append(bytes.Clone(req[:len(req)-1]), ','), added[1:]...)
	var err error
	if t.plain, err = vllmAnswer(0, t.promptN, false); err != nil {
		return nil, err
	}
	if t.withIDs, err = vllmAnswer(0, t.promptN, true); err != nil {
		return nil, err
	}
	// The answer must read as complete token data with no finding, or the rows measure an error path.
	got := tokens.Read(tokens.Call{Dialect: "chat", Request: t.request, Response: t.withIDs})
	if !got.Complete() || len(got.Findings) != 0 || len(got.PromptTokenIDs) != t.promptN || len(got.GenerationTokenIDs()) != tokGenTokens {
		return nil, fmt.Errorf("token rows: the vLLM answer reads as %+v: %w", got, errUnexpected)
	}
	return t, nil
}

// vllmAnswer is vLLM's Chat JSON answer of promptN prompt ids and tokGenTokens generated tokens,
// members in vLLM's order; withIDs adds what return_token_ids and logprobs ask for
// (prompt_token_ids, choices[].token_ids, choices[].logprobs.content). seed draws the ids and
// logprobs, so answers of different seeds differ as different calls do.
func vllmAnswer(seed uint64, promptN int, withIDs bool) ([]byte, error) {
	rng := rand.New(rand.NewPCG(7, 11+seed))
	prompt := make([]int64, promptN)
	for i := range prompt {
		prompt[i] = int64(rng.IntN(151000))
	}
	gen := make([]int64, tokGenTokens)
	var content strings.Builder
	type entry struct {
		Token       string   `json:"token"`
		LogProb     float64  `json:"logprob"`
		Bytes       []int    `json:"bytes"`
		TopLogProbs []string `json:"top_logprobs"`
	}
	entries := make([]entry, tokGenTokens)
	for i := range gen {
		gen[i] = int64(rng.IntN(151000))
		w := tokenWords[i%len(tokenWords)]
		content.WriteString(w)
		bs := make([]int, len(w))
		for j := range len(w) {
			bs[j] = int(w[j])
		}
		entries[i] = entry{Token: w, LogProb: -rng.ExpFloat64() / 3, Bytes: bs, TopLogProbs: []string{}}
	}
	type usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	u := usage{promptN, tokGenTokens, promptN + tokGenTokens}
	msg := map[string]any{"role": "assistant", "content": content.String()}
	if !withIDs {
		return json.Marshal(struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			Model   string `json:"model"`
			Choices []any  `json:"choices"`
			Usage   usage  `json:"usage"`
		}{"chatcmpl-bench", "chat.completion", 1790000000, "Qwen/Qwen3-8B", []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": "stop"}}, u})
	}
	return json.Marshal(struct {
		ID             string  `json:"id"`
		Object         string  `json:"object"`
		Created        int64   `json:"created"`
		Model          string  `json:"model"`
		Choices        []any   `json:"choices"`
		Usage          usage   `json:"usage"`
		PromptTokenIDs []int64 `json:"prompt_token_ids"`
	}{"chatcmpl-bench", "chat.completion", 1790000000, "Qwen/Qwen3-8B", []any{struct {
		Index        int            `json:"index"`
		Message      map[string]any `json:"message"`
		Logprobs     any            `json:"logprobs"`
		FinishReason string         `json:"finish_reason"`
		TokenIDs     []int64        `json:"token_ids"`
	}{0, msg, map[string]any{"content": entries}, "stop", gen}}, u, prompt})
}

// serveChatJSON answers a Chat call with vLLM's JSON answer: with ids and logprobs when the request
// asks for them (return_token_ids), as vLLM does, else without.
func (u *upstream) serveChatJSON(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return
	}
	resp := u.fx.tok.plain
	if bytes.Contains(body, []byte(`"return_token_ids":true`)) {
		resp = u.fx.tok.withIDs
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(resp)))
	w.Write(resp)
}

// writeTokenData writes a capture directory of rollouts x calls lines, each the capture line of a
// `--tokens vllm` call (the client's request, a vLLM answer with ids and logprobs drawn for that
// line, token_capture), without fsync (it is the export that is measured).
func writeTokenData(dir string, fx *fixtures, rollouts, calls int) (*mergeData, error) {
	tc := append(append([]byte(`{"engine":"vllm","added":`), fx.tok.added...), '}')
	status := 200
	n := 0
	return writeDataSet(dir, "token data", rollouts, calls, func(r, c int) ([]byte, error) {
		n++
		resp, err := vllmAnswer(uint64(n), fx.tok.promptN, true)
		if err != nil {
			return nil, err
		}
		ex := &capture.Exchange{ModelCallID: fmt.Sprintf("%016x%016x", r, c), Dialect: "chat", StartedAt: 1790000000 + float64(c),
			CompletedAt: 1790000000.5 + float64(c), LatencyMS: 500, StatusCode: &status,
			Request: fx.tok.request, Response: resp, TokenCapture: tc}
		return capture.EncodeExchange(ex)
	})
}

// exportTokens is `modelcalls export tokens` over the data set without the command line around
// it (test/ may not import the CLI): every rollout read with capture.Store.ReadAvailable, each line
// made a row by tokenexport.FromLine, the rows written by the format's tokenexport.Writer to out
// through a 1 MiB buffer, the file fsynced at the end as the command's output is; timed.
func (d *mergeData) exportTokens(out, format string) (mergePass, error) {
	var p mergePass
	store, err := capture.OpenExisting(d.dir)
	if err != nil {
		return p, err
	}
	f, err := os.Create(out)
	if err != nil {
		return p, err
	}
	defer f.Close()
	complete := 0
	err = p.timed(func() error {
		bw := bufio.NewWriterSize(f, 1<<20)
		var w tokenexport.Writer
		if format == "parquet" {
			w = tokenexport.NewParquetWriter(bw)
		} else {
			w = tokenexport.NewJSONLWriter(bw)
		}
		for _, id := range d.ids {
			entries, damaged, err := store.ReadAvailable(id)
			if err != nil {
				return err
			}
			if len(damaged) != 0 {
				return fmt.Errorf("export tokens %s: %d damaged lines: %w", id, len(damaged), errUnexpected)
			}
			for _, e := range entries {
				row, err := tokenexport.FromLine(id, e.Index, e.Data)
				if err != nil {
					return err
				}
				if row.Complete() && len(row.Findings) == 0 {
					complete++
				}
				if err := w.Write(&row); err != nil {
					return err
				}
				p.records++
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return f.Sync()
	})
	if err != nil {
		return p, fmt.Errorf("export tokens --format %s: %w", format, err)
	}
	if complete != d.lines {
		return p, fmt.Errorf("export tokens --format %s: %d of %d rows complete without findings: %w", format, complete, d.lines, errUnexpected)
	}
	fi, err := f.Stat()
	if err != nil {
		return p, err
	}
	p.bytes, p.out = d.bytes, fi.Size()
	return p, nil
}

// tokExportResult is row 9: ABAB passes of the raw read and the two exports on one core.
type tokExportResult struct {
	data                          *mergeData
	raw, validate, jsonl, parquet []mergePass
}

func (r *runner) runTokExportRow() error {
	dir := filepath.Join(r.workDir, "tokens")
	var d *mergeData
	if err := r.timed("  write token data set", func() error {
		var err error
		d, err = writeTokenData(dir, r.fx, r.tRollouts, r.mCalls)
		return err
	}); err != nil {
		return err
	}
	r.logf("token data: %d rollouts, %d lines, %.1f MB", len(d.ids), d.lines, float64(d.bytes)/1e6)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	res := &tokExportResult{data: d}
	if _, err := d.readRaw(); err != nil { // warm the page cache
		return err
	}
	outJ, outP := filepath.Join(r.workDir, "tokens.jsonl"), filepath.Join(r.workDir, "tokens.parquet")
	passes := []struct {
		run  func() (mergePass, error)
		into *[]mergePass
	}{
		{d.readRaw, &res.raw},
		{d.readValidate, &res.validate},
		{func() (mergePass, error) { return d.exportTokens(outJ, "jsonl") }, &res.jsonl},
		{func() (mergePass, error) { return d.exportTokens(outP, "parquet") }, &res.parquet},
	}
	for round := range r.mRounds {
		for _, pass := range alternate(round, passes) {
			runtime.GC()
			p, err := pass.run()
			if err != nil {
				return err
			}
			if p.bytes != d.bytes || p.records != d.lines {
				return fmt.Errorf("token export pass saw %d bytes %d lines, wrote %d, %d: %w", p.bytes, p.records, d.bytes, d.lines, errUnexpected)
			}
			*pass.into = append(*pass.into, p)
		}
	}
	r.tokExport = res
	if !r.keep {
		os.RemoveAll(dir)
		os.Remove(outJ)
		os.Remove(outP)
	}
	return nil
}

// Row 10's subjects: three capture-on gateways, one client each, answered by serveChatJSON.
const (
	sTokOff    = "gateway, capture on"                       // the client's plain request: the answer without token data
	sTokOn     = "gateway --tokens vllm"                     // the gateway appends what vLLM needs: the answer with ids and logprobs
	sTokClient = "gateway, client asks for ids and logprobs" // the client appends the same members itself: the same answer, no --tokens work
)

// tokSeqBlock is how many one-client calls a subject of row 10 makes before the next takes over.
const tokSeqBlock = 50

// tokCaptureResult is row 10.
type tokCaptureResult struct {
	lat      map[string]durations
	blocks   map[string][]time.Duration // per block: its p50, in block order (the order is the same for every subject)
	plainLen int
	idsLen   int
	lineOn   int // the --tokens subject's last capture line, bytes
	lineOff  int
}

// pairs returns, per block index, a's block p50 minus b's (adjacent blocks of one sweep).
func (t *tokCaptureResult) pairs(a, b string) []time.Duration {
	n := min(len(t.blocks[a]), len(t.blocks[b]))
	out := make([]time.Duration, n)
	for i := range n {
		out[i] = t.blocks[a][i] - t.blocks[b][i]
	}
	return out
}

func (r *runner) runTokCaptureRow(ctx context.Context) error {
	tb := r.fx.tok
	type sub struct {
		name    string
		engine  tokens.Engine
		request []byte
		wantLen int
		s       *subject
		stop    func()
		srv     *server
		dir     string
	}
	subs := []*sub{
		{name: sTokOff, request: tb.request, wantLen: len(tb.plain)},
		{name: sTokOn, engine: tokens.EngineVLLM, request: tb.request, wantLen: len(tb.withIDs)},
		{name: sTokClient, request: tb.asking, wantLen: len(tb.withIDs)},
	}
	for i, x := range subs {
		x.dir = mustMkdir(filepath.Join(r.workDir, fmt.Sprintf("tokens-capture-%d", i)))
		h, stop, err := gatewayHandler(r.up.url, x.dir, true)
		if err != nil {
			return err
		}
		h.(*gateway.Handler).Tokens = x.engine
		x.stop = stop
		if x.srv, err = serve(h); err != nil {
			return err
		}
		x.s = newSubject(x.name, x.srv.url, true)
	}
	defer func() {
		for _, x := range subs {
			x.s.closeIdle()
			x.srv.close()
			x.stop()
			if !r.keep {
				os.RemoveAll(x.dir)
			}
		}
	}()
	res := &tokCaptureResult{lat: map[string]durations{}, blocks: map[string][]time.Duration{}, plainLen: len(tb.plain), idsLen: len(tb.withIDs)}
	buf := make([]byte, 64<<10)
	block := func(x *sub, n int) (durations, error) {
		lat := make(durations, 0, n)
		for range n {
			d, err := x.s.callChatJSON(ctx, "tokens-row", x.request, x.wantLen, buf)
			if err != nil {
				return nil, err
			}
			lat = append(lat, d)
		}
		return lat, nil
	}
	for _, x := range subs { // warm-up
		if _, err := block(x, tokSeqBlock); err != nil {
			return err
		}
	}
	perRound := max(tokSeqBlock, r.seqCalls/2/tokSeqBlock*tokSeqBlock)
	sweep := 0
	for range r.rounds {
		for range perRound / tokSeqBlock {
			for _, x := range alternate(sweep, subs) {
				lat, err := block(x, tokSeqBlock)
				if err != nil {
					return err
				}
				res.lat[x.name] = append(res.lat[x.name], lat...)
				res.blocks[x.name] = append(res.blocks[x.name], lat.pct(50))
			}
			sweep++
		}
	}
	// What the --tokens subject captured must be the token data, and the client's own request.
	for _, x := range []*sub{subs[1], subs[0]} {
		line, err := lastLine(filepath.Join(x.dir, "tokens-row"+capture.CaptureSuffix))
		if err != nil {
			return err
		}
		var l struct {
			Request      json.RawMessage `json:"request"`
			Response     json.RawMessage `json:"response"`
			TokenCapture json.RawMessage `json:"token_capture"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("token row capture line: %w", err)
		}
		got := tokens.Read(tokens.Call{Dialect: "chat", Request: l.Request, Response: l.Response, TokenCapture: l.TokenCapture})
		if x.engine != "" {
			if !got.Complete() || len(got.Findings) != 0 || bytes.Contains(l.Request, []byte("return_token_ids")) || l.TokenCapture == nil {
				return fmt.Errorf("--tokens vllm capture line: complete %v, findings %v, token_capture %s: %w", got.Complete(), got.Findings, l.TokenCapture, errUnexpected)
			}
			res.lineOn = len(line)
		} else {
			res.lineOff = len(line)
		}
	}
	r.tokCapture = res
	return nil
}

// lastLine returns the last line of a capture file.
func lastLine(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimRight(b, "\n")
	return b[bytes.LastIndexByte(b, '\n')+1:], nil
}

// callChatJSON makes one non-streaming Chat call with body and returns its latency (request sent to
// the last body byte); the answer must be 200 with wantLen bytes.
func (s *subject) callChatJSON(ctx context.Context, id string, body []byte, wantLen int, buf []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(id, "/v1/chat/completions"), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(hdrChatJSON, "1")
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.name, err)
	}
	n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: read body: %w", s.name, err)
	}
	if resp.StatusCode != http.StatusOK || n != int64(wantLen) {
		return 0, fmt.Errorf("%s: status %d, %d body bytes (want %d): %w", s.name, resp.StatusCode, n, wantLen, errUnexpected)
	}
	return d, nil
}

// Goals of the token rows.
const (
	goalTokensSlack = 50 * time.Microsecond // row 10: --tokens p50 at most the client-asked p50 + 0.05 ms
)

func (r *runner) tokenChecks() []check {
	var cs []check
	if t := r.tokExport; t != nil {
		raw, val := best(t.raw), best(t.validate)
		rawMB, valMB := mbps(raw.bytes, raw.elapsed), mbps(val.bytes, val.elapsed)
		for _, x := range []struct {
			name   string
			passes []mergePass
		}{{"JSONL", t.jsonl}, {"Parquet", t.parquet}} {
			p := best(x.passes)
			pc := bestCPU(x.passes)
			cs = append(cs, check{
				row: "9", figure: fmt.Sprintf("export tokens to %s: %d rollouts x %d calls (%.0f MB, every call vLLM Chat JSON with %d prompt ids, %d generated ids and logprobs), GOMAXPROCS=1",
					x.name, len(t.data.ids), r.mCalls, float64(t.data.bytes)/1e6, r.fx.tok.promptN, tokGenTokens),
				baseline: fmt.Sprintf("bufio line read of the same files: %.0f MB/s (adding one strict validating scan per line: %.0f MB/s)", rawMB, valMB),
				result: fmt.Sprintf("%.0f MB/s of capture, %.0f calls/s = %.1f%% of raw, %.1f%% of the validating read (CPU time: %.0f MB/s); output %.1f MB",
					mbps(p.bytes, p.elapsed), float64(p.records)/p.elapsed.Seconds(), 100*mbps(p.bytes, p.elapsed)/rawMB,
					100*mbps(p.bytes, p.elapsed)/valMB, mbps(pc.bytes, pc.cpu), float64(p.out)/1e6),
				goal: "reported",
			})
		}
	}
	if t := r.tokCapture; t != nil {
		off, on, cl := t.lat[sTokOff].pct(50), t.lat[sTokOn].pct(50), t.lat[sTokClient].pct(50)
		own := medianDuration(t.pairs(sTokOn, sTokClient))
		lo, hi := medianCI(t.pairs(sTokOn, sTokClient))
		bytesCost := medianDuration(t.pairs(sTokClient, sTokOff))
		cs = append(cs, check{
			row: "10", figure: fmt.Sprintf("capture on with --tokens vllm, 1 client, non-streaming Chat: added p50 per call (%d prompt ids, %d generated ids and logprobs)", r.fx.tok.promptN, tokGenTokens),
			baseline: fmt.Sprintf("the same gateway whose client asks for the ids itself, the same %d-byte answer: p50 %s ms; without token data (%d-byte answer) p50 %s ms, so the extra bytes cost %s ms (median of paired blocks)",
				t.idsLen, ms(cl), t.plainLen, ms(off), msSigned(bytesCost)),
			result: fmt.Sprintf("--tokens vllm p50 %s ms: %s ms over the client-asked calls (median of %d paired blocks, 95%% interval %s to %s), %s ms over the calls without token data; capture line %d B (without: %d B)",
				ms(on), msSigned(own), len(t.pairs(sTokOn, sTokClient)), msSigned(lo), msSigned(hi), msSigned(on-off), t.lineOn, t.lineOff),
			goal: "no more than the extra bytes cost: p50 over the client-asked calls <= 0.05 ms",
			ok:   boolp(own <= goalTokensSlack),
		})
	}
	return cs
}
