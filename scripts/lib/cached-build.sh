# Sourced by the build scripts (build-llama-server.sh, build-otelcol.sh), which cache a binary
# outside the repo and print its path on stdout (last line). It sets CACHE, the e2e cache dir
# (MODELCALLS_E2E_CACHE, default ~/.cache/modelcalls-e2e), and defines log, which writes its
# arguments to stderr after the calling script's name.
#
#   cached_build_begin BIN LOCK_DIR
#
# When BIN is already built, prints it and exits the calling script. Otherwise takes
# LOCK_DIR/.lock, so that one build runs at a time per cache dir: a second caller waits for it, then
# finds BIN, prints it and exits. Returns (holding the lock) only when the caller must build.
CACHE="${MODELCALLS_E2E_CACHE:-${HOME}/.cache/modelcalls-e2e}"

log() { echo "$(basename "$0" .sh): $*" >&2; }

cached_build_begin() {
	local bin="$1" dir="$2"
	if [[ -x "${bin}" ]]; then
		log "cached: ${bin}"
		echo "${bin}"
		exit 0
	fi
	mkdir -p "${dir}"
	exec 9>"${dir}/.lock"
	flock 9
	if [[ -x "${bin}" ]]; then
		log "cached (built by a concurrent run): ${bin}"
		echo "${bin}"
		exit 0
	fi
}
