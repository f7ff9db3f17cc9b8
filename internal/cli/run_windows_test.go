package cli

// childJobState reports no foreground group and no group of its own: Windows has neither.
func childJobState() (foreground, ownGroup bool) { return false, false }
