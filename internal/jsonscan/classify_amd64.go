//go:build amd64 && !purego

package jsonscan

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2 form of classify64 (two 32-byte compares per mask instead of four of 16
// bytes) on processors that have it; the SSE2 form, which every amd64 processor has, otherwise. A
// test switches it to check both forms.
var useAVX2 = cpu.X86.HasAVX2

// classify64 returns the masks of the 64 bytes at p (see classify_amd64.s); p must point at 64
// readable bytes.
//
//go:noescape
func classify64(p *byte) (quote, backslash, special uint64)

// stringBlocks is validStringRest's block loop in assembly, for processors with AVX2 (useAVX2): see
// classify_amd64.s. p must point at n readable bytes.
//
//go:noescape
func stringBlocks(p *byte, n int, carry uint64) (off, kind int, carryOut uint64)
