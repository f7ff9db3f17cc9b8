#!/usr/bin/env bash
# Builds Jaeger v2 (github.com/jaegertracing/jaeger/cmd/jaeger, the all-in-one backend: OTLP
# receiver, memory storage, query API and UI) for the Jaeger end-to-end test, from the version
# pinned as a tool in test/e2e/jaeger/go.mod (its own Go module, so the product's go.mod does not
# carry Jaeger's dependency tree), and caches the binary outside the repo keyed by that module's
# go.mod and go.sum, so later runs reuse it. Prints the binary's path on stdout (last line).
#
#   scripts/build-jaeger.sh                   # build if missing, print path
#   MODELCALLS_E2E_CACHE=/some/dir scripts/build-jaeger.sh
#
# Needs go and the Go module proxy. Jaeger's command links every storage backend it supports
# (Cassandra, Elasticsearch, OpenSearch, ClickHouse, Badger, Kafka, ...) and offers no build tags
# to leave them out, so this is the largest build of the e2e tests; the time it took is logged.
set -euo pipefail
# shellcheck source=lib/cached-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-build.sh"
cd "$(dirname "$0")/.."
MOD=test/e2e/jaeger
VERSION="$(awk '$1 == "github.com/jaegertracing/jaeger" { print $2 }' "${MOD}/go.mod")"
[[ -n "${VERSION}" ]] || { log "no github.com/jaegertracing/jaeger requirement in ${MOD}/go.mod" >&2; exit 1; }
KEY="$(cat "${MOD}/go.mod" "${MOD}/go.sum" | sha256sum | cut -c1-16)"
OUT="${CACHE}/jaeger/${VERSION}-${KEY}"
BIN="${OUT}/jaeger"

cached_build_begin "${BIN}" "${CACHE}/jaeger"
start=$(date +%s)
log "building Jaeger ${VERSION} into ${OUT} (tens of minutes on a cold module and build cache)"
mkdir -p "${OUT}"
(cd "${MOD}" && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -o "${BIN}.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
mv "${BIN}.tmp" "${BIN}"
log "built in $(( $(date +%s) - start ))s: ${BIN}"
echo "${BIN}"
