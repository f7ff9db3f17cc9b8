//go:build amd64 && !purego

#include "textflag.h"

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
	MOVQ $0x22, AX
	MOVQ AX, X1
	VPBROADCASTB X1, Y1
	MOVQ $0x5C, AX
	MOVQ AX, X2
	VPBROADCASTB X2, Y2
	MOVQ $0x20, AX
	MOVQ AX, X3
	VPBROADCASTB X3, Y3
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
