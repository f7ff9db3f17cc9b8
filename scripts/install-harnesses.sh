#!/usr/bin/env bash
# Installs the agent harnesses the e2e tests drive, at pinned versions, each into its own
# npm prefix under the cache dir, skipping those already installed. Prints one line per
# harness on stdout: "<name> <absolute path of its command>".
#
#   scripts/install-harnesses.sh                 # all harnesses
#   scripts/install-harnesses.sh pi codex        # just these
#   MODELCALLS_E2E_CACHE=/some/dir scripts/install-harnesses.sh pi
#
# Needs node and npm (the npm registry). Sizes on disk: pi ~21 MB; the others ship native
# binaries (claude-code, codex, opencode) or large bundles (qwen-code).
set -euo pipefail

CACHE="${MODELCALLS_E2E_CACHE:-${HOME}/.cache/modelcalls-e2e}"
NPM_CACHE_DIR="${CACHE}/npm"

# name | npm package@version | command name in node_modules/.bin
HARNESSES="
claude-code|@anthropic-ai/claude-code@2.1.332|claude
codex|@openai/codex@0.171.0|codex
gemini-cli|@google/gemini-cli@0.61.0|gemini
opencode|opencode-ai@1.18.33|opencode
pi|@mariozechner/pi-coding-agent@0.73.1|pi
qwen-code|@qwen-code/qwen-code@0.24.4|qwen
"

log() { echo "install-harnesses: $*" >&2; }

want=("$@")
if [[ ${#want[@]} -eq 0 ]]; then
	want=(claude-code codex gemini-cli opencode pi qwen-code)
fi

command -v npm >/dev/null 2>&1 || { log "npm is missing (Debian: apt-get install nodejs npm)"; exit 1; }
mkdir -p "${NPM_CACHE_DIR}/.locks"

for name in "${want[@]}"; do
	line="$(grep "^${name}|" <<<"${HARNESSES}" || true)"
	[[ -n "${line}" ]] || { log "unknown harness ${name}"; exit 1; }
	IFS='|' read -r _ spec bin <<<"${line}"
	# One prefix per pinned version: a version bump installs fresh, nothing is upgraded in place.
	prefix="${NPM_CACHE_DIR}/${spec//\//+}"
	exe="${prefix}/node_modules/.bin/${bin}"
	if [[ ! -x "${exe}" ]]; then
		log "installing ${spec}"
		start=$(date +%s)
		exec 9>"${NPM_CACHE_DIR}/.locks/${name}"
		flock 9
		if [[ ! -x "${exe}" ]]; then
			mkdir -p "${prefix}"
			# --prefix keeps it out of the global tree; HOME is left alone (npm's own cache).
			npm install --prefix "${prefix}" --no-audit --no-fund --loglevel=error "${spec}" >&2
		fi
		flock -u 9
		exec 9>&-
		[[ -x "${exe}" ]] || { log "${spec} installed but ${exe} is missing"; exit 1; }
		log "installed ${spec} in $(( $(date +%s) - start ))s ($(du -sh "${prefix}" | cut -f1))"
	fi
	echo "${name} ${exe}"
done
