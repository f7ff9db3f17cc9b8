#!/usr/bin/env bash
# Builds the OpenTelemetry Collector the OTLP end-to-end test runs (test/e2e/otelcol: the official core
# otelcol, the OTLP receiver and the contrib file exporter, pinned in test/e2e/otelcol/go.mod, its own Go
# module) and caches the binary outside the repo, keyed by the module's go.mod, go.sum and main.go,
# so later runs reuse it. Prints the binary's path on stdout (last line).
#
#   scripts/build-otelcol.sh                  # build if missing, print path
#   MODELCALLS_E2E_CACHE=/some/dir scripts/build-otelcol.sh
#
# Needs go and the Go module proxy. About 9 minutes on 2 cores with an empty module cache (most of
# it downloading the Collector's dependencies), about 2 minutes with a warm one.
set -euo pipefail
# shellcheck source=lib/cached-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-build.sh"
cd "$(dirname "$0")/.."
KEY="$(cat test/e2e/otelcol/go.mod test/e2e/otelcol/go.sum test/e2e/otelcol/main.go | sha256sum | cut -c1-16)"
OUT="${CACHE}/otelcol/${KEY}"
BIN="${OUT}/otelcol-e2e"

cached_build_begin "${BIN}" "${CACHE}/otelcol"
start=$(date +%s)
log "building test/e2e/otelcol into ${OUT} (several minutes on a cold module cache)"
mkdir -p "${OUT}"
(cd test/e2e/otelcol && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -o "${BIN}.tmp" .)
mv "${BIN}.tmp" "${BIN}"
log "built in $(( $(date +%s) - start ))s: ${BIN}"
echo "${BIN}"
