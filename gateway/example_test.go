package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
)

// A Handler embedded in your own server: here it takes every path of a mux but /status, in front
// of a model server (an httptest upstream answering one Chat Completions call). A call under
// /ng-rollout/<id>/ is forwarded unchanged and captured as one line of <capture dir>/<id>.capture.jsonl;
// the line is durable before the client has read the whole response.
func ExampleHandler() {
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer upstream.Close()

	dir, err := os.MkdirTemp("", "gateway-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := capture.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	upstreamURL, err := url.Parse(upstream.URL)
	if err != nil {
		log.Fatal(err)
	}
	gw := &gateway.Handler{
		Upstream:        upstreamURL,
		Store:           store,
		ModelServerName: "policy_model",
		Logger:          slog.New(slog.DiscardHandler),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.Handle("/", gw)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The agent's base URL is <server>/ng-rollout/<rollout_id>/v1.
	resp, err := http.Post(srv.URL+"/ng-rollout/task-7/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, string(body) == answer, len(resp.Header.Get(gateway.HeaderModelCallID)))

	entries, err := store.Read("task-7")
	if err != nil {
		log.Fatal(err)
	}
	var line struct {
		ModelCallID   string          `json:"model_call_id"`
		Dialect       string          `json:"dialect"`
		ModelRef      json.RawMessage `json:"model_ref"`
		LatencyMS     *float64        `json:"latency_ms"`
		LatencyTTFTMS *float64        `json:"latency_ttft_ms"`
		StatusCode    *int            `json:"status_code"`
		ErrorCategory json.RawMessage `json:"error_category"`
		Request       json.RawMessage `json:"request"`
		Response      json.RawMessage `json:"response"`
		Source        string          `json:"response_source"`
		Attempted     bool            `json:"upstream_attempted"`
		UpstreamCode  int             `json:"upstream_status_code"`
	}
	d := json.NewDecoder(bytes.NewReader(entries[0].Data))
	if err := d.Decode(&line); err != nil {
		log.Fatal(err)
	}
	fmt.Println("lines:", len(entries))
	fmt.Println("model_call_id is the header's:", line.ModelCallID == resp.Header.Get(gateway.HeaderModelCallID))
	fmt.Println("dialect:", line.Dialect)
	fmt.Println("model_ref:", string(line.ModelRef))
	fmt.Println("timed:", line.LatencyMS != nil, line.LatencyTTFTMS != nil)
	fmt.Println("status_code:", *line.StatusCode, "error_category:", string(line.ErrorCategory))
	fmt.Println("request:", string(line.Request))
	fmt.Println("response is the body:", string(line.Response) == answer)
	fmt.Println("provenance:", line.Source, line.Attempted, line.UpstreamCode)

	// Your own routes stay yours; a call without the rollout prefix is forwarded but not captured.
	for _, path := range []string{"/status", "/v1/chat/completions"} {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			log.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, len(b))
	}
	ids, err := store.Rollouts()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rollouts:", ids)
	// Shutdown refuses new captured calls and waits for the captures in flight.
	if err := gw.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 200 true 32
	// lines: 1
	// model_call_id is the header's: true
	// dialect: chat
	// model_ref: {"type":"responses_api_models","name":"policy_model"}
	// timed: true true
	// status_code: 200 error_category: null
	// request: {"model":"m","messages":[{"role":"user","content":"hi"}]}
	// response is the body: true
	// provenance: upstream true 200
	// /status 200 2
	// /v1/chat/completions 200 223
	// rollouts: [task-7]
}
