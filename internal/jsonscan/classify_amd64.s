//go:build amd64 && !purego

#include "textflag.h"

// SPLAT fills every byte of the YMM register y with the constant c (x is y's lower half). The move
// into x is the VEX form (VMOVQ): the legacy SSE form, run while an earlier SPLAT has left the upper
// halves of the YMM registers in use, costs an SSE/AVX state transition. On some processors (an
// Emerald Rapids Xeon under a hypervisor, measured) that is hundreds of nanoseconds per call, which
// made the AVX2 form five times slower than the SSE2 one. Nothing between the first VEX
// instruction and the closing VZEROUPPER may be a legacy SSE instruction.
#define SPLAT(c, x, y) \
	MOVQ c, AX \
	VMOVQ AX, x \
	VPBROADCASTB x, y

// func classify64(p *byte) (quote, backslash, special uint64)
//
// Bit k of each mask describes p[k], k < 64: quote is '"', backslash is '\\', special is a byte
// below 0x20 or at or above 0x80 (PCMPGTB compares signed: 0x20 > b holds for both). With useAVX2
// the block is read as two 32-byte halves (AVX2); else as four 16-byte quarters (SSE2, which every
// amd64 processor has).
TEXT ·classify64(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	CMPB ·useAVX2(SB), $0
	JNE  avx2
	MOVQ $0x2222222222222222, AX
	MOVQ AX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x5C5C5C5C5C5C5C5C, AX
	MOVQ AX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x2020202020202020, AX
	MOVQ AX, X3
	PUNPCKLQDQ X3, X3

	XORQ R8, R8
	XORQ R9, R9
	XORQ R10, R10

#define BLOCK(off, shift) \
	MOVOU off(SI), X4 \
	MOVO X4, X5 \
	PCMPEQB X1, X5 \
	PMOVMSKB X5, AX \
	MOVO X4, X6 \
	PCMPEQB X2, X6 \
	PMOVMSKB X6, BX \
	MOVO X3, X7 \
	PCMPGTB X4, X7 \
	PMOVMSKB X7, CX \
	SHLQ $shift, AX \
	SHLQ $shift, BX \
	SHLQ $shift, CX \
	ORQ AX, R8 \
	ORQ BX, R9 \
	ORQ CX, R10

	BLOCK(0, 0)
	BLOCK(16, 16)
	BLOCK(32, 32)
	BLOCK(48, 48)

	MOVQ R8, quote+8(FP)
	MOVQ R9, backslash+16(FP)
	MOVQ R10, special+24(FP)
	RET

avx2:
	SPLAT($0x22, X1, Y1) // '"'
	SPLAT($0x5C, X2, Y2) // '\\'
	SPLAT($0x20, X3, Y3) // the first byte that is not a control byte
	VMOVDQU 0(SI), Y4
	VMOVDQU 32(SI), Y5

	VPCMPEQB Y1, Y4, Y6
	VPMOVMSKB Y6, AX
	VPCMPEQB Y1, Y5, Y7
	VPMOVMSKB Y7, BX
	SHLQ $32, BX
	ORQ BX, AX
	MOVQ AX, quote+8(FP)

	VPCMPEQB Y2, Y4, Y6
	VPMOVMSKB Y6, AX
	VPCMPEQB Y2, Y5, Y7
	VPMOVMSKB Y7, BX
	SHLQ $32, BX
	ORQ BX, AX
	MOVQ AX, backslash+16(FP)

	VPCMPGTB Y4, Y3, Y6
	VPMOVMSKB Y6, AX
	VPCMPGTB Y5, Y3, Y7
	VPMOVMSKB Y7, BX
	SHLQ $32, BX
	ORQ BX, AX
	MOVQ AX, special+24(FP)
	VZEROUPPER
	RET

// func stringBlocks(p *byte, n int, carry uint64) (off, kind int, carryOut uint64)
//
// The block loop of validStringRest for the common case, with AVX2: it reads the string body at p
// (n bytes readable) 64 bytes at a time, as classify64 and escapedBits do, while every block holds
// only plain bytes and the escapes \" \\ \n before its closing quote. kind 1: the closing quote
// ends at p[off-1] (off is past it). kind 2: the block at off holds something else before its
// closing quote (a control byte, a byte of a UTF-8 sequence, another escape), which validStringRest
// reads itself. kind 0: fewer than 64 bytes are left at off. carryOut is the carry (escapedBits)
// into the block at off, or after the last block for kind 1.
//
// Registers: SI p, DI off, DX n, R8 carry, R9 quote, R10 backslash, R11 special, R12 'n'.
TEXT ·stringBlocks(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), DX
	MOVQ carry+16(FP), R8
	XORQ DI, DI
	SPLAT($0x22, X1, Y1) // '"'
	SPLAT($0x5C, X2, Y2) // '\\'
	SPLAT($0x20, X3, Y3) // the first byte that is not a control byte
	SPLAT($0x6E, X8, Y8) // 'n'

blocks:
	LEAQ 64(DI), AX
	CMPQ AX, DX
	JA   ranout
	VMOVDQU 0(SI)(DI*1), Y4
	VMOVDQU 32(SI)(DI*1), Y5

	VPCMPEQB Y1, Y4, Y6
	VPMOVMSKB Y6, R9
	VPCMPEQB Y1, Y5, Y7
	VPMOVMSKB Y7, AX
	SHLQ $32, AX
	ORQ AX, R9

	VPCMPEQB Y2, Y4, Y6
	VPMOVMSKB Y6, R10
	VPCMPEQB Y2, Y5, Y7
	VPMOVMSKB Y7, AX
	SHLQ $32, AX
	ORQ AX, R10

	VPCMPGTB Y4, Y3, Y6
	VPMOVMSKB Y6, R11
	VPCMPGTB Y5, Y3, Y7
	VPMOVMSKB Y7, AX
	SHLQ $32, AX
	ORQ AX, R11

	VPCMPEQB Y8, Y4, Y6
	VPMOVMSKB Y6, R12
	VPCMPEQB Y8, Y5, Y7
	VPMOVMSKB Y7, AX
	SHLQ $32, AX
	ORQ AX, R12

	// escapedBits: AX = backslash &^ carry, BX = follows, CX = odd starts, then even starts.
	MOVQ R8, AX
	NOTQ AX
	ANDQ R10, AX
	MOVQ AX, BX
	SHLQ $1, BX
	ORQ  R8, BX
	MOVQ $0xAAAAAAAAAAAAAAAA, CX
	ANDQ AX, CX
	MOVQ BX, R13
	NOTQ R13
	ANDQ R13, CX
	MOVL $0, R13
	ADDQ AX, CX
	SETCS R13B // the carry into the next block
	SHLQ $1, CX
	MOVQ $0x5555555555555555, AX
	XORQ AX, CX
	ANDQ BX, CX // CX = escaped bytes

	MOVQ CX, AX
	NOTQ AX
	ANDQ R9, AX // AX = closing quotes (end)
	MOVQ AX, BX
	NEGQ BX
	ANDQ AX, BX
	DECQ BX // BX = the bytes before the closing quote (live)

	ORQ  R9, R10
	ORQ  R12, R10
	NOTQ R10
	ANDQ CX, R10 // escapes other than \" \\ \n
	ORQ  R11, R10
	ANDQ BX, R10
	JNZ  other

	TESTQ AX, AX
	JNZ   quote
	MOVQ  R13, R8
	ADDQ  $64, DI
	JMP   blocks

quote:
	BSFQ AX, AX
	LEAQ 1(DI)(AX*1), AX
	MOVQ AX, off+24(FP)
	MOVQ $1, kind+32(FP)
	MOVQ R13, carryOut+40(FP)
	VZEROUPPER
	RET

other:
	MOVQ $2, BX
	JMP  stop

ranout:
	XORQ BX, BX

stop: // kind BX at the block at off, whose carry in is R8
	MOVQ DI, off+24(FP)
	MOVQ BX, kind+32(FP)
	MOVQ R8, carryOut+40(FP)
	VZEROUPPER
	RET
