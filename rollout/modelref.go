package rollout

// ModelServerRefType is the only model server reference type NeMo Gym has: the capture sits on a
// model server, so every model_ref is {"type": "responses_api_models", ...}.
const ModelServerRefType = "responses_api_models"

// ModelServerRef names the model server that observed a call, as NeMo Gym's ModelServerRef:
// {"type": "responses_api_models", "name": <server name>}. It is the model_ref of a capture line
// (capture.Exchange), of a ModelCallRecord and of an agent observation's model-call reference
// (ModelCallRef). Other keys are ignored when parsing (and so dropped on write-back).
type ModelServerRef struct {
	Type string `json:"type"`
	Name string `json:"name"`
}
