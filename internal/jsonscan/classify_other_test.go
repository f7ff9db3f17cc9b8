//go:build !amd64 || purego

package jsonscan

// classifyForms is the one form of classify64 without the assembly.
var classifyForms = []classifyForm{{"Go", func() {}}}

func restoreClassify() {}
