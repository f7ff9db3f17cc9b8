#!/bin/sh
# Records the llamaserver_* golden cases from a real llama-server: the answers it gives, with token
# data, to one Chat request and to the same prompt on /v1/completions, JSON and SSE, and its
# /apply-template and /tokenize answers for that request.
#
#   LLAMA_SERVER=/path/to/llama-server sh tokens/testdata/record-llama-server.sh
#
# run from the repository root. It starts llama-server on 127.0.0.1 (a free port) with the e2e
# suite's tiny-chatml.gguf, as the e2e suite starts it, records with curl and stops it. The bodies
# are stored as the server sent them, per-run members (id, created, timings) included.
# Needs curl, jq and python3 (for a free port). After recording, rewrite the want.json goldens: go test ./tokens -update
set -eu

: "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary}"
td=tokens/testdata
models=test/e2e/testdata/models
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
log=$(mktemp)

# -m with a bare file name, so the answers' model member does not carry a local path.
(cd "$models" && exec "$LLAMA_SERVER" -m tiny-chatml.gguf --host 127.0.0.1 --port "$port" \
	--jinja --offline --no-webui -c 4096) >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log"' EXIT
i=0
until curl -sf "$url/health" >/dev/null; do
	i=$((i + 1))
	if [ "$i" -gt 120 ] || ! kill -0 "$pid" 2>/dev/null; then
		cat "$log" >&2
		echo "llama-server did not become ready" >&2
		exit 1
	fi
	sleep 0.5
done

post() { # post PATH BODY-FILE OUT-FILE
	curl -sfN "$url$1" -H 'content-type: application/json' --data-binary "@$2" -o "$3"
}

# The client's Chat request, and what `--tokens llama-server` adds to it.
client='{"model":"tiny-chatml","messages":[{"role":"user","content":"Say hello."}]}'
added='{"logprobs":true,"top_logprobs":1}'

for mode in json sse; do
	d=$td/llamaserver_chat_$mode
	mkdir -p "$d"
	if [ $mode = sse ]; then
		req=$(echo "$client" | jq -c '. + {stream: true, stream_options: {include_usage: true}}')
	else
		req=$client
	fi
	echo "$req" >"$d/request.json"
	echo "$req" | jq -c --argjson a "$added" '. + $a' >"$d/sent.json"
	post /v1/chat/completions "$d/sent.json" "$d/response.$mode"
	# The render the gateway asks for beside the call: the template applied to the client's
	# request, then that prompt tokenized as the chat endpoint tokenizes it.
	post /apply-template "$d/request.json" "$d/apply_template.json"
	jq -c '{content: .prompt, add_special: true, parse_special: true}' "$d/apply_template.json" >"$d/tokenize_request.json"
	post /tokenize "$d/tokenize_request.json" "$d/tokenize.json"
	jq -c --argjson a "$added" '{engine: "llama-server", added: $a, prompt_token_ids: .tokens}' "$d/tokenize.json" >"$d/token_capture.json"
done

# /v1/completions on the same prompt: the template's render as text, and as the ids /tokenize gave.
prompt=$(jq -c .prompt "$td/llamaserver_chat_json/apply_template.json")
ids=$(jq -c .tokens "$td/llamaserver_chat_json/tokenize.json")
for mode in json sse ids_json; do
	d=$td/llamaserver_completions_$mode
	mkdir -p "$d"
	case $mode in
	json) jq -nc --argjson p "$prompt" '{model: "tiny-chatml", prompt: $p, logprobs: 1}' ;;
	sse) jq -nc --argjson p "$prompt" '{model: "tiny-chatml", prompt: $p, logprobs: 1, stream: true}' ;;
	ids_json) jq -nc --argjson p "$ids" '{model: "tiny-chatml", prompt: $p, logprobs: 1}' ;;
	esac >"$d/request.json"
	echo completions >"$d/dialect"
	out=response.json
	[ $mode = sse ] && out=response.sse
	post /v1/completions "$d/request.json" "$d/$out"
done
echo "recorded from $("$LLAMA_SERVER" --version 2>&1 | grep -m1 version || true)"
