package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/record"
)

// logCall writes the access log line of one captured call, at info, once its capture is finished:
//
//	msg="model call" rollout_id=r1 model_call_id=… dialect=chat model=gpt-x status=200
//	tokens_in=12 tokens_out=30 latency_ms=812.4 ttft_ms=95.1 outcome=ok capture=ok
//
// model is the model the response names (dialect.ResponseModelUsage), else the request's, else the
// one the path names (as the call records take it); tokens_in and tokens_out are the record's
// normalised counts from the response's usage in its dialect's members (the Anthropic cache fold
// included), absent when the upstream reported none; ttft_ms is absent when no body byte
// arrived; outcome is the line's error_category, "ok" when null; capture is ok, failed (incomplete
// marker written) or lost. Request and response bodies and headers are never logged.
func (h *Handler) logCall(c *call, ex *capture.Exchange, category, result string) {
	if !h.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("rollout_id", c.rolloutID),
		slog.String("model_call_id", c.modelCallID),
		slog.String("dialect", string(c.dialect)))
	// One walk of the response for its model and usage, in any dialect's members.
	model, usage := dialect.ResponseModelUsage(ex.Response)
	if model == "" {
		model = stringMember(ex.Request, "model")
	}
	if model == "" && c.pathModel != nil {
		model = *c.pathModel
	}
	if model != "" {
		if len(model) > 200 {
			model = model[:200] + "..."
		}
		attrs = append(attrs, slog.String("model", model))
	}
	attrs = append(attrs, slog.Int("status", c.status))
	if usage != nil {
		st := record.ExtractTokenStats(usage)
		if st.TokensIn != nil {
			attrs = append(attrs, slog.Int64("tokens_in", *st.TokensIn))
		}
		if st.TokensOut != nil {
			attrs = append(attrs, slog.Int64("tokens_out", *st.TokensOut))
		}
	}
	attrs = append(attrs, slog.Float64("latency_ms", ex.LatencyMS))
	if ex.LatencyTTFTMS != nil {
		attrs = append(attrs, slog.Float64("ttft_ms", *ex.LatencyTTFTMS))
	}
	outcome := category
	if outcome == "none" {
		outcome = "ok"
	}
	attrs = append(attrs, slog.String("outcome", outcome), slog.String("capture", result))
	h.log.LogAttrs(context.Background(), slog.LevelInfo, "model call", attrs...)
}

// logUncaptured writes the access log line of a model call forwarded without capture, at info,
// once its response is done:
//
//	msg="uncaptured model call" method=POST path=/v1/chat/completions reason=unprefixed status=200 latency_ms=812.4
//
// reason is unprefixed (no /ng-rollout/<id> prefix), prefix_not_leading (the prefix after other
// segments), not_model_path (prefixed, but the path after the prefix is not one of the observed
// ones) or no_store (the Handler has no Store); rollout_id is there when the request had a prefix.
// status is 0 when no response was written (the client went away first). Bodies and headers are
// never logged.
func (h *Handler) logUncaptured(r *http.Request, id, reason string, status int, took time.Duration) {
	if !h.log.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.EscapedPath())}
	if id != "" {
		attrs = append(attrs, slog.String("rollout_id", id))
	}
	attrs = append(attrs, slog.String("reason", reason), slog.Int("status", status),
		slog.Float64("latency_ms", float64(took.Microseconds())/1000))
	h.log.LogAttrs(context.Background(), slog.LevelInfo, "uncaptured model call", attrs...)
}

// stringMember is the last top-level member name of the JSON object obj decoded as a string; ""
// when absent or not a string.
func stringMember(obj []byte, name string) string {
	s, _ := jsonscan.String(jsonscan.Lookup(obj, name))
	return s
}
