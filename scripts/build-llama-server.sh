#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the source that ships inside the npm package
# node-llama-cpp (package/llama/gitRelease.bundle, a git bundle), and caches the binary
# outside the repo so later runs reuse it. Prints the binary's path on stdout (last line).
#
#   scripts/build-llama-server.sh            # build if missing, print path
#   MODELCALLS_E2E_CACHE=/some/dir scripts/build-llama-server.sh
#
# Needs: node/npm (to fetch the package from the npm registry), git, a C++ compiler, cmake
# (installed with apt-get when missing and we are root). About 11 minutes on 2 cores.
# The build is CPU-only, static (no shared libs), with no tests, examples, web UI or TLS.
set -euo pipefail
# shellcheck source=lib/cached-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-build.sh"

NODE_LLAMA_CPP_VERSION="${NODE_LLAMA_CPP_VERSION:-3.21.1}"
OUT="${CACHE}/llama-server/node-llama-cpp-${NODE_LLAMA_CPP_VERSION}"
BIN="${OUT}/bin/llama-server"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

cached_build_begin "${BIN}" "${CACHE}/llama-server"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need cmake; then
	if [[ "$(id -u)" == 0 ]] && need apt-get; then
		log "installing cmake with apt-get"
		(apt-get install -y -qq cmake >&2) || (apt-get update -qq >&2 && apt-get install -y -qq cmake >&2)
	else
		log "cmake is missing: install it (Debian: apt-get install cmake)"
		exit 1
	fi
fi
for tool in npm git tar c++; do
	need "${tool}" || { log "${tool} is missing"; exit 1; }
done

WORK="$(mktemp -d "${CACHE}/llama-server/work.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT

log "fetching node-llama-cpp@${NODE_LLAMA_CPP_VERSION} from the npm registry"
(cd "${WORK}" && npm pack --silent "node-llama-cpp@${NODE_LLAMA_CPP_VERSION}" >/dev/null)
tar -xzf "${WORK}/node-llama-cpp-${NODE_LLAMA_CPP_VERSION}.tgz" -C "${WORK}" \
	package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json
git clone --quiet "${WORK}/package/llama/gitRelease.bundle" "${WORK}/src" 2>/dev/null
COMMIT="$(git -C "${WORK}/src" rev-parse HEAD)"
log "llama.cpp source commit ${COMMIT}"

log "configuring (cmake $(cmake --version | head -1 | awk '{print $3}'))"
cmake -S "${WORK}/src" -B "${WORK}/build" \
	-DCMAKE_BUILD_TYPE=Release \
	-DBUILD_SHARED_LIBS=OFF \
	-DLLAMA_BUILD_TESTS=OFF \
	-DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_UI=OFF \
	-DLLAMA_USE_PREBUILT_UI=OFF \
	-DLLAMA_OPENSSL=OFF \
	-DLLAMA_BUILD_SERVER=ON \
	>"${WORK}/configure.log" 2>&1 || { cat "${WORK}/configure.log" >&2; exit 1; }

log "building llama-server with ${JOBS} jobs (about 11 minutes on 2 cores)"
start=$(date +%s)
cmake --build "${WORK}/build" --config Release --target llama-server -j "${JOBS}" \
	>"${WORK}/build.log" 2>&1 || { tail -50 "${WORK}/build.log" >&2; exit 1; }
log "built in $(( $(date +%s) - start ))s"

mkdir -p "${OUT}.tmp/bin"
cp "${WORK}/build/bin/llama-server" "${OUT}.tmp/bin/llama-server"
printf '{"node_llama_cpp":"%s","llama_cpp_commit":"%s"}\n' "${NODE_LLAMA_CPP_VERSION}" "${COMMIT}" >"${OUT}.tmp/SOURCE.json"
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
"${BIN}" --version >&2 2>&1 || true
echo "${BIN}"
