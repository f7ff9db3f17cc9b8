#!/usr/bin/env bash
# Runs the end-to-end matrix (test/e2e/, build tag e2e): installs what is missing (cached under
# ~/.cache/modelcalls-e2e: the pinned harnesses from npm, llama-server built from source),
# then drives every harness through `modelcalls proxy` against the scripted upstream and
# llama-server, merges, and checks. Prints a summary table at the end.
#
#   scripts/e2e.sh                                   # everything (make e2e)
#   MODELCALLS_E2E_HARNESSES=pi MODELCALLS_E2E_UPSTREAMS=scripted scripts/e2e.sh   # make e2e-ci
#
# Other knobs: MODELCALLS_E2E_CACHE (cache dir), MODELCALLS_E2E_WORKDIR (keep all files there),
# MODELCALLS_E2E_REPORT (write the summary table to this file). Needs go, node and npm; the
# llama upstream also needs a C++ compiler and cmake (apt-get installed when missing, as root).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in go node npm; do
	command -v "${tool}" >/dev/null 2>&1 || { echo "e2e: ${tool} is missing" >&2; exit 1; }
done
start=$(date +%s)
status=0
go test -tags e2e -count=1 -timeout 90m -run 'TestE2E' -v ./test/e2e/ || status=$?
echo "e2e: finished in $(( $(date +%s) - start ))s (exit ${status})" >&2
exit "${status}"
