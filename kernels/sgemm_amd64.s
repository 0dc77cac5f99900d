//go:build amd64 && !purego

#include "textflag.h"

// Register-blocked single-precision GEMM micro-kernels (see sgemm.go for the loops around them).
//
// Each kernel computes one tile of C:
//
//	C[r][j] = alpha·Σ_l Ã[l][r]·B̃[l][j] + beta·C[r][j]    (r < MR, j < NR, l < kc)
//
// where step l reads MR consecutive floats of Ã at a + l·lda and NR consecutive floats of B̃ at
// b + l·ldb. Packed panels have lda = MR and ldb = NR; an operand already laid out that way in
// memory (a transposed A, a plain B) is read in place with its own leading dimension. The sums
// stay in registers for the whole loop, as outer products: per step, NR/8 (or NR/16) vector
// loads of B̃, MR broadcasts of Ã and MR·NR/8 (or /16) fused multiply-adds. With beta == 0
// (+0 or -0) C is written without being read, so garbage (NaN) in C does not leak through.
//
// Registers common to both kernels:
//	CX  steps left (kc), BX  4-step blocks left
//	SI  Ã of the current step, R10 its step in bytes
//	DI  B̃ of the current step, R11 its step in bytes
//	DX  current row of C,      R8  C's row stride in bytes

// ---------------------------------------------------------------------------------------------
// AVX2 + FMA, 6×16 tile: twelve YMM accumulators (Y4..Y15, row r in Y(4+2r), Y(5+2r)), Y0/Y1 the
// two halves of B̃'s row, Y2/Y3 broadcasts of Ã alternating so that consecutive rows do not wait
// on each other. 12 FMAs per step keep both FMA pipes busy through their latency.

#define STEP6x16 \
	VMOVUPS      (DI), Y0; \
	VMOVUPS      32(DI), Y1; \
	VBROADCASTSS (SI), Y2; \
	VFMADD231PS  Y0, Y2, Y4; \
	VFMADD231PS  Y1, Y2, Y5; \
	VBROADCASTSS 4(SI), Y3; \
	VFMADD231PS  Y0, Y3, Y6; \
	VFMADD231PS  Y1, Y3, Y7; \
	VBROADCASTSS 8(SI), Y2; \
	VFMADD231PS  Y0, Y2, Y8; \
	VFMADD231PS  Y1, Y2, Y9; \
	VBROADCASTSS 12(SI), Y3; \
	VFMADD231PS  Y0, Y3, Y10; \
	VFMADD231PS  Y1, Y3, Y11; \
	VBROADCASTSS 16(SI), Y2; \
	VFMADD231PS  Y0, Y2, Y12; \
	VFMADD231PS  Y1, Y2, Y13; \
	VBROADCASTSS 20(SI), Y3; \
	VFMADD231PS  Y0, Y3, Y14; \
	VFMADD231PS  Y1, Y3, Y15; \
	ADDQ         R10, SI; \
	ADDQ         R11, DI

// C row = alpha·(lo, hi) + beta·C row, then next row. Y0 = alpha, Y1 = beta.
#define ROW16(lo, hi) \
	VMULPS      (DX), Y1, Y2; \
	VFMADD231PS lo, Y0, Y2; \
	VMOVUPS     Y2, (DX); \
	VMULPS      32(DX), Y1, Y3; \
	VFMADD231PS hi, Y0, Y3; \
	VMOVUPS     Y3, 32(DX); \
	ADDQ        R8, DX

// C row = alpha·(lo, hi), C not read.
#define ROW16B0(lo, hi) \
	VMULPS  lo, Y0, lo; \
	VMOVUPS lo, (DX); \
	VMULPS  hi, Y0, hi; \
	VMOVUPS hi, 32(DX); \
	ADDQ    R8, DX

// func sgemmKernel6x16(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)
TEXT ·sgemmKernel6x16(SB), NOSPLIT, $0-64
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R10
	SHLQ $2, R10
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R11
	SHLQ $2, R11
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8

	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

	// Main loop, four steps per iteration, then the kc mod 4 remaining steps one at a time.
	MOVQ CX, BX
	SHRQ $2, BX
	JZ   tail16

loop16:
	STEP6x16
	STEP6x16
	STEP6x16
	STEP6x16
	DECQ BX
	JNZ  loop16

tail16:
	ANDQ $3, CX
	JZ   store16

loop16tail:
	STEP6x16
	DECQ CX
	JNZ  loop16tail

store16:
	VBROADCASTSS alpha+56(FP), Y0
	MOVL         beta+60(FP), AX
	TESTL        $0x7fffffff, AX // beta == ±0: overwrite C without reading it
	JZ           beta016
	VBROADCASTSS beta+60(FP), Y1
	ROW16(Y4, Y5)
	ROW16(Y6, Y7)
	ROW16(Y8, Y9)
	ROW16(Y10, Y11)
	ROW16(Y12, Y13)
	ROW16(Y14, Y15)
	VZEROUPPER
	RET

beta016:
	ROW16B0(Y4, Y5)
	ROW16B0(Y6, Y7)
	ROW16B0(Y8, Y9)
	ROW16B0(Y10, Y11)
	ROW16B0(Y12, Y13)
	ROW16B0(Y14, Y15)
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------------------------
// AVX-512F, 8×32 tile: sixteen ZMM accumulators (Z16..Z31, row r in Z(16+2r), Z(17+2r)), Z0/Z1
// the two halves of B̃'s row, Z2/Z3 alternating broadcasts of Ã. Eight rows match the channel
// counts of the networks (multiples of 8) better than six.

#define STEP8x32 \
	VMOVUPS      (DI), Z0; \
	VMOVUPS      64(DI), Z1; \
	VBROADCASTSS (SI), Z2; \
	VFMADD231PS  Z0, Z2, Z16; \
	VFMADD231PS  Z1, Z2, Z17; \
	VBROADCASTSS 4(SI), Z3; \
	VFMADD231PS  Z0, Z3, Z18; \
	VFMADD231PS  Z1, Z3, Z19; \
	VBROADCASTSS 8(SI), Z2; \
	VFMADD231PS  Z0, Z2, Z20; \
	VFMADD231PS  Z1, Z2, Z21; \
	VBROADCASTSS 12(SI), Z3; \
	VFMADD231PS  Z0, Z3, Z22; \
	VFMADD231PS  Z1, Z3, Z23; \
	VBROADCASTSS 16(SI), Z2; \
	VFMADD231PS  Z0, Z2, Z24; \
	VFMADD231PS  Z1, Z2, Z25; \
	VBROADCASTSS 20(SI), Z3; \
	VFMADD231PS  Z0, Z3, Z26; \
	VFMADD231PS  Z1, Z3, Z27; \
	VBROADCASTSS 24(SI), Z2; \
	VFMADD231PS  Z0, Z2, Z28; \
	VFMADD231PS  Z1, Z2, Z29; \
	VBROADCASTSS 28(SI), Z3; \
	VFMADD231PS  Z0, Z3, Z30; \
	VFMADD231PS  Z1, Z3, Z31; \
	ADDQ         R10, SI; \
	ADDQ         R11, DI

// C row = alpha·(lo, hi) + beta·C row, then next row. Z0 = alpha, Z1 = beta.
#define ROW32(lo, hi) \
	VMULPS      (DX), Z1, Z2; \
	VFMADD231PS lo, Z0, Z2; \
	VMOVUPS     Z2, (DX); \
	VMULPS      64(DX), Z1, Z3; \
	VFMADD231PS hi, Z0, Z3; \
	VMOVUPS     Z3, 64(DX); \
	ADDQ        R8, DX

// C row = alpha·(lo, hi), C not read.
#define ROW32B0(lo, hi) \
	VMULPS  lo, Z0, lo; \
	VMOVUPS lo, (DX); \
	VMULPS  hi, Z0, hi; \
	VMOVUPS hi, 64(DX); \
	ADDQ    R8, DX

// func sgemmKernel8x32(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)
TEXT ·sgemmKernel8x32(SB), NOSPLIT, $0-64
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R10
	SHLQ $2, R10
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R11
	SHLQ $2, R11
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8

	// VXORPS on ZMM needs AVX512DQ; VPXORD is in the foundation.
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   tail32

loop32:
	STEP8x32
	STEP8x32
	STEP8x32
	STEP8x32
	DECQ BX
	JNZ  loop32

tail32:
	ANDQ $3, CX
	JZ   store32

loop32tail:
	STEP8x32
	DECQ CX
	JNZ  loop32tail

store32:
	VBROADCASTSS alpha+56(FP), Z0
	MOVL         beta+60(FP), AX
	TESTL        $0x7fffffff, AX
	JZ           beta032
	VBROADCASTSS beta+60(FP), Z1
	ROW32(Z16, Z17)
	ROW32(Z18, Z19)
	ROW32(Z20, Z21)
	ROW32(Z22, Z23)
	ROW32(Z24, Z25)
	ROW32(Z26, Z27)
	ROW32(Z28, Z29)
	ROW32(Z30, Z31)
	VZEROUPPER
	RET

beta032:
	ROW32B0(Z16, Z17)
	ROW32B0(Z18, Z19)
	ROW32B0(Z20, Z21)
	ROW32B0(Z22, Z23)
	ROW32B0(Z24, Z25)
	ROW32B0(Z26, Z27)
	ROW32B0(Z28, Z29)
	ROW32B0(Z30, Z31)
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------------------------
// func transpose8x8(dst *float32, ldd int, src *float32, lds int, blocks int)
//
// Packing transposes: for c < 8 and l < 8·blocks, dst[l·ldd + c] = src[c·lds + l]. Eight rows of
// src (a transposed B's columns, or a plain A's rows) become eight-float pieces of consecutive
// steps of a panel. Each iteration transposes one 8×8 block in registers (AVX):
//	Y0..Y7   the eight rows, eight steps each
//	Y8..Y15  pairs interleaved (unpack), then Y0..Y7 quadruples (shufps: steps l|l+4 of rows
//	         0-3 or 4-7), then Y8..Y15 the eight steps (vperm2f128 joins the 128-bit halves)
//	SI  src of the block, BX = SI + 4·lds; R8 = lds, R9 = 3·lds (bytes)
//	DI  dst of the block, DX = DI + 4·ldd; R11 = ldd, R12 = 3·ldd (bytes)
TEXT ·transpose8x8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R11
	SHLQ $2, R11
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R8
	SHLQ $2, R8
	MOVQ blocks+32(FP), CX
	TESTQ CX, CX
	JZ    tdone
	LEAQ (R8)(R8*2), R9
	LEAQ (R11)(R11*2), R12

tloop:
	LEAQ      (SI)(R8*4), BX
	VMOVUPS   (SI), Y0
	VMOVUPS   (SI)(R8*1), Y1
	VMOVUPS   (SI)(R8*2), Y2
	VMOVUPS   (SI)(R9*1), Y3
	VMOVUPS   (BX), Y4
	VMOVUPS   (BX)(R8*1), Y5
	VMOVUPS   (BX)(R8*2), Y6
	VMOVUPS   (BX)(R9*1), Y7
	VUNPCKLPS Y1, Y0, Y8  // r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5]
	VUNPCKHPS Y1, Y0, Y9  // r0[2] r1[2] r0[3] r1[3] | r0[6] r1[6] r0[7] r1[7]
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS   $0x44, Y10, Y8, Y0 // r0..r3 [0] | [4]
	VSHUFPS   $0xEE, Y10, Y8, Y1 // r0..r3 [1] | [5]
	VSHUFPS   $0x44, Y11, Y9, Y2 // r0..r3 [2] | [6]
	VSHUFPS   $0xEE, Y11, Y9, Y3 // r0..r3 [3] | [7]
	VSHUFPS   $0x44, Y14, Y12, Y4 // r4..r7 [0] | [4]
	VSHUFPS   $0xEE, Y14, Y12, Y5
	VSHUFPS   $0x44, Y15, Y13, Y6
	VSHUFPS   $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8  // step 0: r0..r7
	VPERM2F128 $0x20, Y5, Y1, Y9  // step 1
	VPERM2F128 $0x20, Y6, Y2, Y10 // step 2
	VPERM2F128 $0x20, Y7, Y3, Y11 // step 3
	VPERM2F128 $0x31, Y4, Y0, Y12 // step 4
	VPERM2F128 $0x31, Y5, Y1, Y13 // step 5
	VPERM2F128 $0x31, Y6, Y2, Y14 // step 6
	VPERM2F128 $0x31, Y7, Y3, Y15 // step 7
	LEAQ      (DI)(R11*4), DX
	VMOVUPS   Y8, (DI)
	VMOVUPS   Y9, (DI)(R11*1)
	VMOVUPS   Y10, (DI)(R11*2)
	VMOVUPS   Y11, (DI)(R12*1)
	VMOVUPS   Y12, (DX)
	VMOVUPS   Y13, (DX)(R11*1)
	VMOVUPS   Y14, (DX)(R11*2)
	VMOVUPS   Y15, (DX)(R12*1)
	ADDQ      $32, SI
	LEAQ      (DI)(R11*8), DI
	DECQ      CX
	JNZ       tloop

tdone:
	VZEROUPPER
	RET
