package capture

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest/jsonmember"
	"github.com/modelcalls/modelcalls/internal/schema"
	"github.com/modelcalls/modelcalls/rollout"
)

// TestLineFollowsSchema: the line writer writes schema.Line's keys in its order: all of them when
// every value is known, only the Always ones when every optional value is unknown; and Exchange's
// json tags name the same keys in the same order, so a line decoded with encoding/json fills every
// field.
func TestLineFollowsSchema(t *testing.T) {
	ttft, code, cat := 1.5, 200, "timeout"
	src, up, reason, sess, msg, logical, parent := "local", 502, "upstream_timeout", "s1", "m1", "l1", strings.Repeat("c", 32)
	reqRaw, respRaw := "req text", "resp text"
	attempted := true
	pathModel := "gemini-2.5-flash"
	full := &Exchange{
		ModelCallID: strings.Repeat("a", 32), Dialect: "chat",
		ModelRef:  &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "policy"},
		StartedAt: 1, CompletedAt: 2, LatencyMS: 3, LatencyTTFTMS: &ttft, StatusCode: &code, ErrorCategory: &cat,
		Request: json.RawMessage(`{"a":1}`), Response: json.RawMessage(`{"b":2}`), RequestRaw: &reqRaw, ResponseRaw: &respRaw,
		ResponseSource: &src, UpstreamAttempted: &attempted, UpstreamStatusCode: &up, LocalResponseReason: &reason,
		ClientSessionID: &sess, ClientAssistantMessageID: &msg, ClientLogicalRequestID: &logical, ClientParentCallID: &parent,
		TokenCapture: json.RawMessage(`{"engine":"vllm","added":{}}`),
		PathModel:    &pathModel,
	}
	var all, always []string
	for _, k := range schema.Line {
		all = append(all, k.Key)
		if k.Present == schema.Always {
			always = append(always, k.Key)
		}
	}
	for _, c := range []struct {
		name string
		ex   *Exchange
		want []string
	}{
		{"every value known", full, all},
		{"optional values unknown", &Exchange{ModelCallID: strings.Repeat("b", 32), Dialect: "responses"}, always},
	} {
		line, err := EncodeExchange(c.ex)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonmember.Keys(jsonmember.Members(t, line)); !slices.Equal(got, c.want) {
			t.Errorf("%s: the writer wrote keys\n%v\nschema.Line has\n%v", c.name, got, c.want)
		}
	}

	var tags []string
	typ := reflect.TypeFor[Exchange]()
	for i := range typ.NumField() {
		if tag := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]; tag != "-" && tag != "" {
			tags = append(tags, tag)
		}
	}
	if !slices.Equal(tags, all) {
		t.Errorf("Exchange's json tags\n%v\nschema.Line\n%v", tags, all)
	}
}
