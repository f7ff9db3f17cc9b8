package jsonscan

import "math/bits"

// classify64Go is classify64 in plain Go (the reference the assembly is tested against, and the
// implementation on other architectures).
func classify64Go(b *[64]byte) (quote, backslash, special uint64) {
	for k, c := range b {
		bit := uint64(1) << k
		switch {
		case c == '"':
			quote |= bit
		case c == '\\':
			backslash |= bit
		case c < 0x20 || c >= 0x80:
			special |= bit
		}
	}
	return quote, backslash, special
}

// escapedBits returns the mask of the bytes of a 64-byte block that an escape's backslash applies
// to, given the block's backslash mask and *carry, 1 when the block before ended inside a run of
// backslashes of odd length (its first byte is escaped); *carry is updated for the next block. In a
// run of backslashes every second one escapes the byte after it: runs are told apart by the
// parity of where they start, which one addition finds for all of them at once (the technique of
// simdjson's string scanner).
func escapedBits(backslash uint64, carry *uint64) uint64 {
	const even = 0x5555555555555555
	backslash &^= *carry // a backslash the previous block escapes starts nothing
	follows := backslash<<1 | *carry
	oddStarts := backslash &^ even &^ follows
	evenStarts, c := bits.Add64(oddStarts, backslash, 0)
	*carry = c
	return (even ^ evenStarts<<1) & follows
}
