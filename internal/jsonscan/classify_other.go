//go:build !amd64 || purego

package jsonscan

import "unsafe"

// classify64 (without the assembly: another architecture, or the purego build tag) returns three
// masks of the 64 bytes at p: bit k of quote is set when p[k] is '"', of backslash when it is '\\',
// of special when it is below 0x20 or at or above 0x80. p must point at 64 readable bytes.
func classify64(p *byte) (quote, backslash, special uint64) {
	return classify64Go((*[64]byte)(unsafe.Pointer(p)))
}

// useAVX2 is false without the assembly: stringBlocks is never called.
const useAVX2 = false

// stringBlocks stands in for the assembly loop of amd64; it reads nothing (kind 0).
func stringBlocks(_ *byte, _ int, carry uint64) (off, kind int, carryOut uint64) {
	return 0, blocksLeft, carry
}
