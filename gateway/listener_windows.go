package gateway

// fdLimit reports no limit: Windows has no per-process descriptor limit like RLIMIT_NOFILE.
func fdLimit() (uint64, bool) { return 0, false }
