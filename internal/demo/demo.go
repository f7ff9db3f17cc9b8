package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/rollout"
)

// ModelServerName is the model_ref name the demo gateway records.
const ModelServerName = "demo_model"

// Options configure Run.
type Options struct {
	// Dir receives the capture dir and the rollout files. It must be empty or not exist yet (it is
	// then created): captures of an earlier run would be appended to and its rollout records
	// overwritten. "" creates a new temp dir.
	Dir string
	// Logger receives the gateway's log records; nil discards them.
	Logger *slog.Logger
}

// Rollout is one scripted rollout of the demo.
type Rollout struct {
	ID      string          // rollout id, e.g. "demo-chat-sse"
	Dialect dialect.Dialect // the wire API it speaks
	Stream  bool            // SSE (true) or JSON (false)
	Calls   int             // model calls the script made (0 for the rollout that never ran)
	Note    string          // what the rollout shows
	Merge   modelcalls.MergeResult
}

// Result says where the demo left its files and what it did.
type Result struct {
	Dir          string // the demo's directory
	TempDir      bool   // Dir was created by Run in the system's temp dir (Options.Dir was "")
	CaptureDir   string // capture store: <id>.capture.jsonl per rollout
	RolloutsPath string // the rollout records before merge (JSONL)
	MergedPath   string // the same records with ng_model_call_capture attached (JSONL)
	Rollouts     []Rollout
	Store        *capture.Store
}

// Run starts the replay upstream and the capture gateway on loopback, drives the scripted rollouts
// through the gateway (a two-turn tool loop per dialect, as JSON and as SSE, one rate-limited call,
// and one rollout that never ran), then merges the captures into the rollout records. Everything
// stays on 127.0.0.1 and in Options.Dir. It fails when a listener cannot be opened, a file cannot
// be written, or a scripted call does not get the answer the recording holds.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := capture.WriteSupported(); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	dir := opts.Dir
	temp := dir == ""
	if temp {
		d, err := os.MkdirTemp("", "modelcalls-demo-")
		if err != nil {
			return nil, fmt.Errorf("create demo dir: %w", err)
		}
		dir = d
	} else if err := emptyDir(dir); err != nil {
		return nil, err
	}
	res := &Result{
		Dir:          dir,
		TempDir:      temp,
		CaptureDir:   filepath.Join(dir, "capture"),
		RolloutsPath: filepath.Join(dir, "rollouts.jsonl"),
		MergedPath:   filepath.Join(dir, "merged.jsonl"),
	}
	store, err := capture.Open(res.CaptureDir)
	if err != nil {
		return nil, err
	}
	res.Store = store
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	upstreamURL, stopUpstream, err := serve(replayUpstream{})
	if err != nil {
		return nil, fmt.Errorf("start replay upstream: %w", err)
	}
	defer stopUpstream()
	u, _ := url.Parse(upstreamURL)
	gw := &gateway.Handler{Upstream: u, Store: store, ModelServerName: ModelServerName, Logger: logger}
	gatewayURL, stopGateway, err := serve(gw)
	if err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	defer stopGateway()

	client := &http.Client{Timeout: 30 * time.Second}
	for _, d := range recordedDialects {
		for _, stream := range []bool{false, true} {
			kind := "json"
			if stream {
				kind = "sse"
			}
			r := Rollout{ID: fmt.Sprintf("demo-%s-%s", d, kind), Dialect: d, Stream: stream,
				Note: "tool call, then the answer"}
			if err := toolLoop(ctx, client, gatewayURL, &r); err != nil {
				return nil, fmt.Errorf("rollout %s: %w", r.ID, err)
			}
			res.Rollouts = append(res.Rollouts, r)
		}
	}
	// The same first call as demo-messages-json, which the upstream refuses with its recorded 429
	// (the header asks it to; the header is not captured).
	limited := Rollout{ID: "demo-messages-rate-limited", Dialect: dialect.Messages, Note: "upstream answers 429"}
	if _, status, err := call(ctx, client, gatewayURL, &limited, firstRequest(dialect.Messages, false),
		http.Header{rateLimitHeader: {"1"}}); err != nil || status != http.StatusTooManyRequests {
		return nil, fmt.Errorf("rollout %s: status %d, %v", limited.ID, status, err)
	}
	res.Rollouts = append(res.Rollouts, limited)
	res.Rollouts = append(res.Rollouts, Rollout{ID: "demo-never-ran", Dialect: dialect.Chat, Note: "no call reached the gateway"})

	// Drain the gateway: every capture line is durable before the merge reads.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := gw.Shutdown(sctx); err != nil {
		return nil, fmt.Errorf("drain gateway: %w", err)
	}
	if err := writeRollouts(res); err != nil {
		return nil, err
	}
	if err := mergeRollouts(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

// serve starts h on a fresh 127.0.0.1 port and returns its base URL and a stop function.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// toolLoop makes the two calls of one rollout: the first is answered with a tool call, which the
// script runs (weatherTool); the second carries that call and its result and is answered with text.
func toolLoop(ctx context.Context, client *http.Client, base string, r *Rollout) error {
	first := firstRequest(r.Dialect, r.Stream)
	resp, status, err := call(ctx, client, base, r, first, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("first call: status %d", status)
	}
	tools, err := toolCalls(resp)
	if err != nil {
		return fmt.Errorf("first call: %w", err)
	}
	if len(tools) == 0 {
		return errors.New("first call: the replayed response holds no tool call")
	}
	second, err := secondRequest(r.Dialect, first, resp, tools[0])
	if err != nil {
		return fmt.Errorf("second call: %w", err)
	}
	resp, status, err = call(ctx, client, base, r, second, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("second call: status %d", status)
	}
	tools, err = toolCalls(resp)
	if err != nil {
		return fmt.Errorf("second call: %w", err)
	}
	if len(tools) != 0 {
		return errors.New("second call: expected a text answer, got another tool call")
	}
	return nil
}

// toolCalls are the client tool calls of a response object, as the record of a capture line holding
// it would list them (modelcalls.BuildRecord on {"response": resp}).
func toolCalls(resp json.RawMessage) ([]modelcalls.ToolCall, error) {
	if len(resp) == 0 {
		return nil, nil
	}
	line := make([]byte, 0, len(resp)+13)
	line = append(append(append(line, `{"response":`...), resp...), '}')
	rec, err := modelcalls.BuildRecord(line, 0)
	if err != nil {
		return nil, fmt.Errorf("read the response's tool calls: %w", err)
	}
	return rec.ToolCalls, nil
}

// call posts body to the rollout's prefixed path of its dialect, with the extra headers given, and
// returns the response object (reassembled from SSE when streamed) and the status.
func call(ctx context.Context, client *http.Client, base string, r *Rollout, body map[string]any, extra http.Header) (json.RawMessage, int, error) {
	r.Calls++
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	target := rollout.ApplyPrefix(base, r.ID) + r.Dialect.Path()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo-key-never-captured")
	req.Header.Set("X-Session-Id", r.ID+"-session")
	if r.Dialect == dialect.Messages {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Nemo-Gym-Model-Call-Id") == "" {
		return nil, resp.StatusCode, errors.New("the gateway did not add x-nemo-gym-model-call-id")
	}
	if body["stream"] == true {
		s := dialect.NewStream(r.Dialect)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			s.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, resp.StatusCode, fmt.Errorf("read stream: %w", err)
			}
		}
		s.End()
		return s.Response(), resp.StatusCode, nil
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("read response: %w", err)
	}
	return raw, resp.StatusCode, nil
}

// The conversation every tool-loop rollout has: the user asks for the weather in a city, the model
// calls get_weather with that city, the script answers the call (weatherTool), and the model answers
// with the tool's figures. The recorded responses of the replay upstream (replay/*.json, *.sse) are
// this conversation's, one per dialect, transport and turn; TestConversationsCoherent checks that
// they fit these requests.
const (
	question  = "What is the weather in Tokyo? Use the tool."
	toolName  = "get_weather"
	toolDescr = "Get the current weather in a city."
)

// recordedDialects are the dialects the replay upstream has recordings of (replay/), in the order
// their rollouts run.
var recordedDialects = [...]dialect.Dialect{dialect.Responses, dialect.Chat, dialect.Messages}

// rolloutModels is the model each tool-loop rollout asks for: the model its recorded responses name
// (a dated model id, so the request and the response agree).
var rolloutModels = map[dialect.Dialect][2]string{ // [JSON, SSE]
	dialect.Responses: {"deepseek-v4-flash", "gpt-5-2025-08-07"},
	dialect.Chat:      {"deepseek-reasoner", "gpt-5-nano-2025-08-07"},
	dialect.Messages:  {"claude-sonnet-4-5-20250929", "claude-sonnet-4-20250514"},
}

func model(d dialect.Dialect, stream bool) string {
	if stream {
		return rolloutModels[d][1]
	}
	return rolloutModels[d][0]
}

// weatherData is what the demo's get_weather tool knows.
var weatherData = map[string]string{"Tokyo": "22 degrees Celsius, clear sky"}

// weatherTool runs a get_weather call: its JSON arguments name the city; the result names the city
// and its weather, or says that the tool has no data for it.
func weatherTool(args json.RawMessage) string {
	var a struct {
		City string `json:"city"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.City == "" {
		return `error: get_weather needs {"city": NAME}`
	}
	if w, ok := weatherData[a.City]; ok {
		return a.City + ": " + w
	}
	return "no weather data for " + a.City
}

func userMessage(d dialect.Dialect) map[string]any {
	return map[string]any{"role": "user", "content": question}
}

var weatherSchema = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"city": map[string]any{"type": "string", "description": "City name, e.g. Tokyo"}},
	"required":             []string{"city"},
	"additionalProperties": false,
}

// firstRequest is the first call of a tool-loop rollout: the question and the get_weather tool, in
// the dialect's shape. The SSE Responses rollout asks gpt-5 for reasoning summaries and, since it
// does not store responses, for the encrypted reasoning; the Messages rollouts enable extended
// thinking, as the recordings' reasoning items and thinking blocks require.
func firstRequest(d dialect.Dialect, stream bool) map[string]any {
	m := model(d, stream)
	switch d {
	case dialect.Responses:
		req := map[string]any{"model": m, "stream": stream,
			"input": []any{userMessage(d)},
			"tools": []any{map[string]any{"type": "function", "name": toolName, "description": toolDescr,
				"parameters": weatherSchema, "strict": true}}}
		if stream {
			req["reasoning"] = map[string]any{"effort": "medium", "summary": "auto"}
			req["store"] = false
			req["include"] = []string{"reasoning.encrypted_content"}
		}
		return req
	case dialect.Chat:
		req := map[string]any{"model": m, "stream": stream,
			"messages": []any{userMessage(d)},
			"tools": []any{map[string]any{"type": "function",
				"function": map[string]any{"name": toolName, "description": toolDescr, "parameters": weatherSchema}}}}
		if stream {
			req["stream_options"] = map[string]any{"include_usage": true}
		}
		return req
	default:
		return map[string]any{"model": m, "stream": stream, "max_tokens": 2048,
			"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024},
			"messages": []any{userMessage(d)},
			"tools":    []any{map[string]any{"name": toolName, "description": toolDescr, "input_schema": weatherSchema}}}
	}
}

// secondRequest repeats the first request with the model's tool call and its result (weatherTool)
// appended, in the dialect's own shape. A Messages client sends the assistant turn back as it came
// (thinking blocks with their signatures, text, tool_use), as extended thinking with tools requires;
// Responses and Chat Completions get the call itself (reasoning_content is not sent back, as
// DeepSeek asks).
func secondRequest(d dialect.Dialect, first map[string]any, resp json.RawMessage, tc modelcalls.ToolCall) (map[string]any, error) {
	req := map[string]any{}
	for k, v := range first {
		req[k] = v
	}
	id, name := deref(tc.CallID), deref(tc.Name)
	args := string(tc.Arguments)
	result := weatherTool(tc.Arguments)
	switch d {
	case dialect.Responses:
		req["input"] = []any{userMessage(d),
			map[string]any{"type": "function_call", "call_id": id, "name": name, "arguments": args},
			map[string]any{"type": "function_call_output", "call_id": id, "output": result}}
	case dialect.Chat:
		req["messages"] = []any{userMessage(d),
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": result}}
	default:
		var answer struct {
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(resp, &answer); err != nil || len(answer.Content) == 0 {
			return nil, fmt.Errorf("the first response has no content to send back: %v", err)
		}
		req["messages"] = []any{userMessage(d),
			map[string]any{"role": "assistant", "content": answer.Content},
			map[string]any{"role": "user", "content": []any{map[string]any{
				"type": "tool_result", "tool_use_id": id, "content": result}}}}
	}
	return req, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// writeRollouts writes one rollout record per scripted rollout, as a collector would.
func writeRollouts(res *Result) error {
	var b bytes.Buffer
	for i, r := range res.Rollouts {
		line, err := json.Marshal(map[string]any{
			"_ng_rollout_id": r.ID, "_ng_task_index": i, "_ng_rollout_index": 0,
			"dialect": r.Dialect, "stream": r.Stream, "reward": 1.0,
		})
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(res.RolloutsPath, b.Bytes(), 0o640); err != nil {
		return fmt.Errorf("write rollouts: %w", err)
	}
	return nil
}

// mergeRollouts attaches ng_model_call_capture to every rollout record, as `modelcalls merge` does.
func mergeRollouts(ctx context.Context, res *Result) error {
	m, err := modelcalls.NewMerger([]string{res.CaptureDir}, modelcalls.MergeOptions{DrainTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	in, err := os.ReadFile(res.RolloutsPath)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	for i, line := range bytes.Split(bytes.TrimSuffix(in, []byte("\n")), []byte("\n")) {
		merged, mr, err := m.Merge(ctx, line)
		if err != nil {
			return fmt.Errorf("merge rollout %d: %w", i, err)
		}
		res.Rollouts[i].Merge = mr
		out.Write(merged)
		out.WriteByte('\n')
	}
	if err := os.WriteFile(res.MergedPath, out.Bytes(), 0o640); err != nil {
		return fmt.Errorf("write merged rollouts: %w", err)
	}
	return nil
}

// ErrDirNotEmpty is returned by Run when Options.Dir holds files already.
var ErrDirNotEmpty = errors.New("directory is not empty")

// ErrNotDir is returned by Run when Options.Dir names something that is not a directory.
var ErrNotDir = errors.New("not a directory")

// emptyDir makes sure dir is an empty directory, creating it (and its parents) when it does not
// exist.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create demo dir: %w", err)
		}
		return nil
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("demo dir %s: %w; give an empty or new directory", dir, ErrNotDir)
	case err != nil:
		return fmt.Errorf("demo dir: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("demo dir %s: %w (%d entries, e.g. %s): the demo would append to earlier captures and overwrite rollouts.jsonl; give an empty or new directory",
			dir, ErrDirNotEmpty, len(entries), entries[0].Name())
	}
	return nil
}
