#include "textflag.h"

// the bytes broadcast into Y2..Y12 (a legacy SSE MOVQ into X registers between AVX
// instructions costs a state transition on some CPUs)
DATA classifyBytes<>+0(SB)/8, $0x3a2c7d7b201f5c22
DATA classifyBytes<>+8(SB)/4, $0x000d0a09
GLOBL classifyBytes<>(SB), RODATA|NOPTR, $16

// func classifyAVX2(b []byte, m []blockMasks)
//
// For each block of 64 bytes, two 32-byte halves: byte comparisons give 0xff per matching byte,
// VPMOVMSKB gathers them into 32 bits, and the two halves make the 64-bit masks of blockMasks
// (quote, backslash, control, structural, space, comma, colon: 56 bytes).
TEXT ·classifyAVX2(SB), NOSPLIT, $0-48
	MOVQ b_base+0(FP), SI
	MOVQ m_base+24(FP), DI
	MOVQ m_len+32(FP), CX

	// Y2 '"', Y3 '\\', Y4 0x1f, Y5 ' ', Y6 '{', Y7 '}', Y8 ',', Y9 ':', Y10 '\t', Y11 '\n', Y12 '\r'
	VPBROADCASTB classifyBytes<>+0(SB), Y2
	VPBROADCASTB classifyBytes<>+1(SB), Y3
	VPBROADCASTB classifyBytes<>+2(SB), Y4
	VPBROADCASTB classifyBytes<>+3(SB), Y5
	VPBROADCASTB classifyBytes<>+4(SB), Y6
	VPBROADCASTB classifyBytes<>+5(SB), Y7
	VPBROADCASTB classifyBytes<>+6(SB), Y8
	VPBROADCASTB classifyBytes<>+7(SB), Y9
	VPBROADCASTB classifyBytes<>+8(SB), Y10
	VPBROADCASTB classifyBytes<>+9(SB), Y11
	VPBROADCASTB classifyBytes<>+10(SB), Y12

loop:
	TESTQ CX, CX
	JZ    done
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1

	// quote
	VPCMPEQB  Y2, Y0, Y13
	VPCMPEQB  Y2, Y1, Y14
	VPMOVMSKB Y13, AX
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVQ      AX, 0(DI)

	// backslash
	VPCMPEQB  Y3, Y0, Y13
	VPCMPEQB  Y3, Y1, Y14
	VPMOVMSKB Y13, AX
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVQ      AX, 8(DI)

	// control: min(x, 0x1f) == x
	VPMINUB   Y4, Y0, Y13
	VPCMPEQB  Y13, Y0, Y13
	VPMINUB   Y4, Y1, Y14
	VPCMPEQB  Y14, Y1, Y14
	VPMOVMSKB Y13, AX
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVQ      AX, 16(DI)

	// structural: x|0x20 is '{' or '}' (for '[' and ']' as well), or x is ',' or ':'
	VPOR      Y5, Y0, Y15
	VPCMPEQB  Y6, Y15, Y13
	VPCMPEQB  Y7, Y15, Y15
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y8, Y0, Y15
	VPMOVMSKB Y15, R8
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y9, Y0, Y15
	VPMOVMSKB Y15, R9
	VPOR      Y15, Y13, Y13
	VPMOVMSKB Y13, AX
	VPOR      Y5, Y1, Y15
	VPCMPEQB  Y6, Y15, Y14
	VPCMPEQB  Y7, Y15, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y8, Y1, Y15
	VPMOVMSKB Y15, R10
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y9, Y1, Y15
	VPMOVMSKB Y15, R11
	VPOR      Y15, Y14, Y14
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVQ      AX, 24(DI)
	SHLQ      $32, R10
	ORQ       R10, R8
	MOVQ      R8, 40(DI)
	SHLQ      $32, R11
	ORQ       R11, R9
	MOVQ      R9, 48(DI)

	// space
	VPCMPEQB  Y5, Y0, Y13
	VPCMPEQB  Y10, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y11, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y12, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPMOVMSKB Y13, AX
	VPCMPEQB  Y5, Y1, Y14
	VPCMPEQB  Y10, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y11, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y12, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVQ      AX, 32(DI)

	ADDQ $64, SI
	ADDQ $56, DI
	DECQ CX
	JMP  loop

done:
	VZEROUPPER
	RET
