#!/usr/bin/env bash
# Runs the OpenTelemetry end-to-end test (test/e2e/otel_test.go, build tag e2e): builds the e2e Collector
# (scripts/build-otelcol.sh, cached in ~/.cache/modelcalls-e2e), then drives real `modelcalls proxy`
# processes against it over OTLP/HTTP and OTLP/gRPC, `modelcalls export otlp`, and a dead Collector.
#
#   scripts/e2e-otel.sh          # make e2e-otel
#
# MODELCALLS_E2E_OTELCOL=/path/to/otelcol-e2e skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null 2>&1 || { echo "e2e-otel: go is missing" >&2; exit 1; }
start=$(date +%s)
if [[ -z "${MODELCALLS_E2E_OTELCOL:-}" ]]; then
	MODELCALLS_E2E_OTELCOL="$(scripts/build-otelcol.sh | tail -n 1)"
	export MODELCALLS_E2E_OTELCOL
fi
status=0
go test -tags e2e -count=1 -timeout 20m -run 'TestOTelCollector' -v ./test/e2e/ || status=$?
echo "e2e-otel: finished in $(( $(date +%s) - start ))s (exit ${status})" >&2
exit "${status}"
