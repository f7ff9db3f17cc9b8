//go:build amd64 && !purego

package jsonscan

import "golang.org/x/sys/cpu"

// classifyForms are the forms of classify64 this processor runs, each with the switch that selects
// it: the tests run each one.
var classifyForms = func() []classifyForm {
	forms := []classifyForm{{"SSE2", func() { useAVX2 = false }}}
	if cpu.X86.HasAVX2 {
		forms = append(forms, classifyForm{"AVX2", func() { useAVX2 = true }})
	}
	return forms
}()

// restoreClassify selects the form the package picks by itself.
func restoreClassify() { useAVX2 = cpu.X86.HasAVX2 }
