# Sourced by the build scripts (build-llama-server.sh, build-otelcol.sh), which cache a binary
# outside the repo and print its path on stdout (last line). The caller defines log().
#
#   cached_build_begin BIN LOCK_DIR
#
# When BIN is already built, prints it and exits the calling script. Otherwise takes
# LOCK_DIR/.lock, so that one build runs at a time per cache dir: a second caller waits for it, then
# finds BIN, prints it and exits. Returns (holding the lock) only when the caller must build.
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
