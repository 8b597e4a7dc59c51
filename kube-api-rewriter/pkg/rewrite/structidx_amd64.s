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
// (quote, backslash, control, structural, space: 40 bytes).
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
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y9, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPMOVMSKB Y13, AX
	VPOR      Y5, Y1, Y15
	VPCMPEQB  Y6, Y15, Y14
	VPCMPEQB  Y7, Y15, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y8, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y9, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVQ      AX, 24(DI)

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
	ADDQ $40, DI
	DECQ CX
	JMP  loop

done:
	VZEROUPPER
	RET

// func tokensAVX2(b []byte, tok []uint64, c *carries) int
//
// classifyAVX2 and blockTokens in one: for each block, the masks are kept in registers (AX
// quote, BX backslash, R8 control, R9 structural, R10 space), the in-string mask is the prefix
// xor of the quotes (a carry-less multiplication by all ones), and the token bitmap is written.
// It stops before a block with a backslash or a control character inside a string.
TEXT ·tokensAVX2(SB), NOSPLIT, $0-64
	MOVQ b_base+0(FP), SI
	MOVQ tok_base+24(FP), DI
	MOVQ tok_len+32(FP), CX
	MOVQ c+48(FP), DX
	MOVQ 0(DX), R12 // inString
	MOVQ 8(DX), R13 // scCarry

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

tloop:
	TESTQ CX, CX
	JZ    tdone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1

	// backslash: leave the block to Go
	VPCMPEQB  Y3, Y0, Y13
	VPCMPEQB  Y3, Y1, Y14
	VPOR      Y14, Y13, Y13
	VPTEST    Y13, Y13
	JNZ       tdone

	// quote -> AX
	VPCMPEQB  Y2, Y0, Y13
	VPCMPEQB  Y2, Y1, Y14
	VPMOVMSKB Y13, AX
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, AX

	// control -> R8
	VPMINUB   Y4, Y0, Y13
	VPCMPEQB  Y13, Y0, Y13
	VPMINUB   Y4, Y1, Y14
	VPCMPEQB  Y14, Y1, Y14
	VPMOVMSKB Y13, R8
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, R8

	// structural -> R9
	VPOR      Y5, Y0, Y15
	VPCMPEQB  Y6, Y15, Y13
	VPCMPEQB  Y7, Y15, Y15
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y8, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y9, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPMOVMSKB Y13, R9
	VPOR      Y5, Y1, Y15
	VPCMPEQB  Y6, Y15, Y14
	VPCMPEQB  Y7, Y15, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y8, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y9, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, R9

	// space -> R10
	VPCMPEQB  Y5, Y0, Y13
	VPCMPEQB  Y10, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y11, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPCMPEQB  Y12, Y0, Y15
	VPOR      Y15, Y13, Y13
	VPMOVMSKB Y13, R10
	VPCMPEQB  Y5, Y1, Y14
	VPCMPEQB  Y10, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y11, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPCMPEQB  Y12, Y1, Y15
	VPOR      Y15, Y14, Y14
	VPMOVMSKB Y14, BX
	SHLQ      $32, BX
	ORQ       BX, R10

	// inside = prefix xor of the quotes ^ inString -> R11
	VMOVQ      AX, X13
	VPCMPEQB   X14, X14, X14
	VPCLMULQDQ $0, X14, X13, X13
	VMOVQ      X13, R11
	XORQ       R12, R11

	// a control character inside a string: leave the block to Go
	MOVQ  R8, BX
	ANDQ  R11, BX
	JNZ   tdone

	// outside = ^(inside | quote) -> DX; structural outside -> R9
	MOVQ  R11, DX
	ORQ   AX, DX
	NOTQ  DX
	ANDQ  DX, R9
	// other = outside &^ (structural | space | quote) -> R10 (outside, structural is R9)
	ORQ   AX, R10
	ORQ   R9, R10
	NOTQ  R10
	ANDQ  DX, R10
	// scalars = other &^ (other<<1 | scCarry) -> R8
	MOVQ  R10, R8
	SHLQ  $1, R8
	ORQ   R13, R8
	NOTQ  R8
	ANDQ  R10, R8
	// carries
	MOVQ  R10, R13
	SHRQ  $63, R13
	MOVQ  R11, R12
	SARQ  $63, R12
	// tokens = structural outside | opening quotes | scalars
	ANDQ  R11, AX
	ORQ   R9, AX
	ORQ   R8, AX
	MOVQ  AX, 0(DI)

	ADDQ $64, SI
	ADDQ $8, DI
	DECQ CX
	JMP  tloop

tdone:
	MOVQ c+48(FP), DX
	MOVQ R12, 0(DX)
	MOVQ R13, 8(DX)
	MOVQ tok_base+24(FP), AX
	SUBQ AX, DI
	SHRQ $3, DI
	MOVQ DI, ret+56(FP)
	VZEROUPPER
	RET
