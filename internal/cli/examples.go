package cli

// fallbackExamples are the Examples sections of commands whose files do not set one themselves
// (NewRootCommand fills them in), keyed by command name.
var fallbackExamples = map[string]string{
	"proxy": `  modelcalls proxy --upstream http://127.0.0.1:8000 --capture-dir ./captures
  modelcalls proxy --upstream https://api.openai.com --capture-dir ./captures --listen 127.0.0.1:8080 --name policy_model
  modelcalls proxy --upstream http://127.0.0.1:8000 --config gym.yaml ++model_call_capture_dir=/abs/captures
  # then point the agent at http://127.0.0.1:8080/ng-rollout/<rollout_id>/v1 (OpenAI) or .../ng-rollout/<rollout_id> (Anthropic)`,
	"view": `  modelcalls view --capture-dir ./captures                      # then open http://127.0.0.1:7580
  modelcalls view --capture-dir ./captures --rollouts rollouts.jsonl --listen 127.0.0.1:8090
  curl -s 'http://127.0.0.1:7580/api/rollouts?sort=errors&order=desc&limit=10'`,
	"replay": `  modelcalls replay --capture-dir ./captures --listen 127.0.0.1:8081
  # point the agent at http://127.0.0.1:8081/ng-rollout/<rollout_id>/v1 as it was at the gateway
  modelcalls replay --capture-dir ./captures --match sequence --timing fast
  modelcalls replay --capture-dir ./captures --on-miss forward --upstream http://127.0.0.1:8000 --capture-dir-out ./replayed`,
	"export": `  modelcalls export otlp --capture-dir ./captures --endpoint http://127.0.0.1:4318
  modelcalls export otlp --capture-dir ./captures --in rollouts.jsonl    # plus a root span per rollout (reward, totals)`,
}
