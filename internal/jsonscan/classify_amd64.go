//go:build amd64 && !purego

package jsonscan

// classify64 returns the masks of the 64 bytes at p (see classify_amd64.s); p must point at 64
// readable bytes.
//
//go:noescape
func classify64(p *byte) (quote, backslash, special uint64)
