package jsonscan

import "math/bits"

// classify64Go is classify64 in plain Go (the implementation on other architectures): the exact
// lane masks of each 8-byte word, gathered into one bit per byte.
func classify64Go(b *[64]byte) (quote, backslash, special uint64) {
	for w := 0; w < 8; w++ {
		x := load64(b[:], 8*w)
		quote |= laneBits(eqLanes(x, '"')) << (8 * w)
		backslash |= laneBits(eqLanes(x, '\\')) << (8 * w)
		special |= laneBits(ctlOrHigh(x)) << (8 * w)
	}
	return quote, backslash, special
}

// laneBits gathers the flags of a lane mask (bit 7 of each lane) into the low 8 bits, lane k to
// bit k: the multiplication moves bit 8k to bit 56+k without carries into the top byte.
func laneBits(m uint64) uint64 { return (m >> 7) * 0x0102040810204080 >> 56 }

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
