package record

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/jsonmember"
	"github.com/modelcalls/modelcalls/internal/schema"
	"github.com/modelcalls/modelcalls/rollout"
)

// payloadKeys returns the keys of schema.Record's payload fields, in order.
func payloadKeys() []string {
	var keys []string
	for _, f := range schema.Record {
		if f.Payload {
			keys = append(keys, f.Key)
		}
	}
	return keys
}

// TestRecordFollowsSchema: the encoder writes schema.Record's keys in its order (the payload
// fields only with payloads; WriteJSON alike), a tool call schema.ToolCall's, and ModelCallRecord's
// fields are schema.Record's Go names in the same order.
func TestRecordFollowsSchema(t *testing.T) {
	rec, err := BuildRecord([]byte(`{"model_call_id":"a","response":{"output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	var all, lean, goNames []string
	for _, f := range schema.Record {
		all = append(all, f.Key)
		goNames = append(goNames, f.Go)
		if !f.Payload {
			lean = append(lean, f.Key)
		}
	}
	for _, c := range []struct {
		payloads bool
		want     []string
	}{{true, all}, {false, lean}} {
		out := rec.AppendJSON(nil, c.payloads)
		if got := jsonmember.Keys(jsonmember.Members(t, out)); !slices.Equal(got, c.want) {
			t.Errorf("payloads %v: the encoder wrote keys\n%v\nschema.Record has\n%v", c.payloads, got, c.want)
		}
		var w bytes.Buffer
		if err := rec.WriteJSON(&w, c.payloads); err != nil || !bytes.Equal(w.Bytes(), out) {
			t.Errorf("payloads %v: WriteJSON wrote %s (%v), AppendJSON %s", c.payloads, w.Bytes(), err, out)
		}
	}
	if len(rec.ToolCalls) != 1 {
		t.Fatalf("%d tool calls, want 1", len(rec.ToolCalls))
	}
	if got := jsonmember.Keys(jsonmember.Members(t, rec.ToolCalls[0].appendJSON(nil))); !slices.Equal(got, schema.ToolCall[:]) {
		t.Errorf("a tool call's keys %v, schema.ToolCall %v", got, schema.ToolCall)
	}
	var fields []string
	typ := reflect.TypeFor[ModelCallRecord]()
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	if !slices.Equal(fields, goNames) {
		t.Errorf("ModelCallRecord's fields\n%v\nschema.Record's Go names\n%v", fields, goNames)
	}
}

// lineSamples holds, for each line key a record field is copied from, a value of the type the
// decoder accepts, written as the record writes it back.
var lineSamples = map[string]string{
	schema.ModelCallID:              `"0123456789abcdef0123456789abcdef"`,
	schema.Dialect:                  `"chat"`,
	schema.ModelRef:                 `{"type":"responses_api_models","name":"policy"}`,
	schema.StartedAt:                `1795968571.513956`,
	schema.CompletedAt:              `1795968572.25`,
	schema.LatencyMS:                `736.29`,
	schema.LatencyTTFTMS:            `12.5`,
	schema.StatusCode:               `429`,
	schema.ErrorCategory:            `"rate_limit"`,
	schema.Request:                  `{"model":"m","x":[1,2]}`,
	schema.Response:                 `{"object":"chat.completion"}`,
	schema.RequestRaw:               `"request text"`,
	schema.ResponseRaw:              `"data: {}\n\n"`,
	schema.ResponseSource:           `"local"`,
	schema.UpstreamAttempted:        `false`,
	schema.UpstreamStatusCode:       `503`,
	schema.LocalResponseReason:      `"upstream_timeout"`,
	schema.ClientSessionID:          `"session-1"`,
	schema.ClientAssistantMessageID: `"message-1"`,
}

// TestDecoderFollowsSchema: for every record field copied from the line (schema.Record's From), a
// line holding only that key gives a record whose field holds the value, and a line without it a
// null field: the decoder reads each key the table names.
func TestDecoderFollowsSchema(t *testing.T) {
	for _, f := range schema.Record {
		if f.From == "" {
			continue
		}
		sample, ok := lineSamples[f.From]
		if !ok {
			t.Errorf("line key %s (record field %s) has no sample in lineSamples", f.From, f.Key)
			continue
		}
		line := []byte(`{"` + f.From + `":` + sample + `}`)
		rec, err := BuildRecord(line, 0)
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		out := rec.AppendJSON(nil, true)
		m, ok := jsonmember.Last(jsonmember.Members(t, out), f.Key)
		if got := string(out[m.ValueStart:m.ValueEnd]); !ok || got != sample {
			t.Errorf("line %s: record field %s = %s, want %s", line, f.Key, got, sample)
		}
		empty, err := BuildRecord([]byte(`{}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		out = empty.AppendJSON(nil, true)
		if m, _ := jsonmember.Last(jsonmember.Members(t, out), f.Key); string(out[m.ValueStart:m.ValueEnd]) != "null" {
			t.Errorf("record field %s = %s without %s in the line, want null", f.Key, out[m.ValueStart:m.ValueEnd], f.From)
		}
	}
}

// TestFromExchangeFollowsSchema: for an exchange with every line key set, FromExchange gives the
// record BuildRecord reads from the encoded line (response_raw aside, which FromExchange leaves
// null): a field the line carries is filled on both paths.
func TestFromExchangeFollowsSchema(t *testing.T) {
	ttft, code, cat := 1.5, 200, "timeout"
	src, up, reason, sess, msg, logical, parent := "local", 502, "upstream_timeout", "s1", "m1", "l1", strings.Repeat("c", 32)
	reqRaw, respRaw := "req text", "resp text"
	attempted := true
	pathModel := "gemini-2.5-flash"
	ex := &capture.Exchange{
		ModelCallID: strings.Repeat("a", 32), Dialect: "chat",
		ModelRef:  &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "policy"},
		StartedAt: 1795968571.513956, CompletedAt: 1795968572.25, LatencyMS: 736.29, LatencyTTFTMS: &ttft,
		StatusCode: &code, ErrorCategory: &cat,
		Request:    json.RawMessage(`{"messages":[]}`),
		Response:   json.RawMessage(`{"id":"r","model":"m","choices":[{"finish_reason":"stop","message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`),
		RequestRaw: &reqRaw, ResponseRaw: &respRaw,
		ResponseSource: &src, UpstreamAttempted: &attempted, UpstreamStatusCode: &up, LocalResponseReason: &reason,
		ClientSessionID: &sess, ClientAssistantMessageID: &msg, ClientLogicalRequestID: &logical, ClientParentCallID: &parent,
		TokenCapture: json.RawMessage(`{"engine":"vllm","added":{}}`),
		PathModel:    &pathModel,
	}
	// Every field of the line is set: a field added to the line must be set here too.
	v := reflect.ValueOf(ex).Elem()
	for i := range v.NumField() {
		if tag := v.Type().Field(i).Tag.Get("json"); tag != "-" && v.Field(i).IsZero() {
			t.Fatalf("the test's exchange leaves %s unset", v.Type().Field(i).Name)
		}
	}
	live, _, err := FromExchange(ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := capture.EncodeExchange(ex)
	if err != nil {
		t.Fatal(err)
	}
	read, err := BuildRecord(line, 0)
	if err != nil {
		t.Fatal(err)
	}
	read.ResponseRaw = nil
	if got, want := live.AppendJSON(nil, true), read.AppendJSON(nil, true); !bytes.Equal(got, want) {
		t.Errorf("FromExchange\n%s\nBuildRecord of the line\n%s", got, want)
	}
}
