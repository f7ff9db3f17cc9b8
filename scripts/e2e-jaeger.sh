#!/usr/bin/env bash
# Runs the Jaeger end-to-end test (test/e2e/jaeger_test.go, build tag e2e): builds Jaeger v2
# (scripts/build-jaeger.sh, cached in ~/.cache/modelcalls-e2e), then sends it the spans of
# `modelcalls export otlp` (OTLP/HTTP and OTLP/gRPC) and of a live `modelcalls proxy`, and reads
# every rollout back through Jaeger's query APIs.
#
#   scripts/e2e-jaeger.sh        # make e2e-jaeger
#
# MODELCALLS_E2E_JAEGER=/path/to/jaeger skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null 2>&1 || { echo "e2e-jaeger: go is missing" >&2; exit 1; }
start=$(date +%s)
if [[ -z "${MODELCALLS_E2E_JAEGER:-}" ]]; then
	MODELCALLS_E2E_JAEGER="$(scripts/build-jaeger.sh | tail -n 1)"
	export MODELCALLS_E2E_JAEGER
fi
built=$(date +%s)
status=0
go test -tags e2e -count=1 -timeout 10m -run 'TestJaeger' -v ./test/e2e/ || status=$?
echo "e2e-jaeger: Jaeger ready in $(( built - start ))s, test in $(( $(date +%s) - built ))s (exit ${status})" >&2
exit "${status}"
