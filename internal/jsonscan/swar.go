package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// Byte classes tested 8 bytes at a time in one uint64 ("SIMD within a register"). Each test sets
// the high bit of every byte lane that matches. Subtraction borrows only run from a matching lane
// upward, so a lane above the first match may be flagged spuriously but the lowest flagged lane is
// always exact: callers use only firstByte of a mask, then look at that byte themselves.

const (
	lanes1  = 0x0101010101010101 // 0x01 in every lane
	lanesHi = 0x8080808080808080 // the high bit of every lane
)

// load64 reads data[i:i+8] as a little-endian word: lane 0 is data[i].
func load64(data []byte, i int) uint64 { return binary.LittleEndian.Uint64(data[i : i+8]) }

// firstByte returns the index of the lowest flagged lane of a non-zero mask.
func firstByte(mask uint64) int { return bits.TrailingZeros64(mask) >> 3 }

// hasByte flags the lanes of x equal to c.
func hasByte(x uint64, c byte) uint64 {
	y := x ^ (lanes1 * uint64(c))
	return (y - lanes1) &^ y & lanesHi
}

// quoteOrBackslash flags the lanes of x that hold '"' or '\\'.
func quoteOrBackslash(x uint64) uint64 {
	q := x ^ (lanes1 * '"')
	b := x ^ (lanes1 * '\\')
	return ((q-lanes1)&^q | (b-lanes1)&^b) & lanesHi
}

// notPlain flags the lanes of x that a JSON string body cannot copy as they are: '"', '\\', a
// control byte (< 0x20) or a byte of a multi-byte UTF-8 sequence (>= 0x80). For a lane below 0x80
// the three subtractions borrow exactly when it is below 0x20, 0 after xor with '"', 0 after xor
// with '\\'; lanes at or above 0x80 are flagged by their own high bit.
func notPlain(x uint64) uint64 {
	q := x ^ (lanes1 * '"')
	b := x ^ (lanes1 * '\\')
	return ((x-lanes1*0x20)|(q-lanes1)|(b-lanes1))&^x&lanesHi | x&lanesHi
}

const lanes7F = 0x7F7F7F7F7F7F7F7F // 0x7F in every lane

// eqLanes flags exactly the lanes of x equal to c: the low seven bits of each lane are added to
// 0x7F without carrying out of the lane, so no flag depends on a neighbouring lane.
func eqLanes(x uint64, c byte) uint64 {
	y := x ^ (lanes1 * uint64(c))
	return ^(((y & lanes7F) + lanes7F) | y) & lanesHi
}

// ctlOrHigh flags exactly the lanes of x below 0x20 (control bytes) or at or above 0x80 (bytes of
// multi-byte UTF-8 sequences).
func ctlOrHigh(x uint64) uint64 {
	return (^((x & lanes7F) + lanes1*0x60) | x) & lanesHi
}

// lowerLanes returns the flags of every lane below the lowest flagged lane of m (all lanes when m
// is 0).
func lowerLanes(m uint64) uint64 { return (m & -m) - 1 }

// digitLanes returns how many of the lanes of x, from lane 0, are ASCII digits (0 to 8), by the
// test of digitsEnd.
func digitLanes(x uint64) int {
	y := x & lanes7F
	digit := (y + lanes1*(0x80-'0')) &^ (y + lanes1*(0x80-'9'-1)) &^ x & lanesHi
	return bits.TrailingZeros64(^digit&lanesHi) >> 3
}

// digitsEnd returns the first offset at or after i that is not an ASCII digit (skipDigits), 8
// bytes at a time: a lane is a digit when its low seven bits are in [0x30, 0x3A) and its high bit
// is clear; the additions stay inside their lanes.
func digitsEnd(data []byte, i int) int {
	for i+8 <= len(data) {
		x := load64(data, i)
		y := x & lanes7F
		digit := (y + lanes1*(0x80-'0')) &^ (y + lanes1*(0x80-'9'-1)) &^ x & lanesHi
		if nd := ^digit & lanesHi; nd != 0 {
			return i + firstByte(nd)
		}
		i += 8
	}
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
