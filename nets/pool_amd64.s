//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 rows of the 2×2, stride-2 max pool (see op_pool.go), 16 windows at a time, one per
// lane: the two input rows are split into their even and odd columns (or merged back) with
// two-table permutes, as in winograd_amd64.s.

DATA poolEven<>+0(SB)/4, $0
DATA poolEven<>+4(SB)/4, $2
DATA poolEven<>+8(SB)/4, $4
DATA poolEven<>+12(SB)/4, $6
DATA poolEven<>+16(SB)/4, $8
DATA poolEven<>+20(SB)/4, $10
DATA poolEven<>+24(SB)/4, $12
DATA poolEven<>+28(SB)/4, $14
DATA poolEven<>+32(SB)/4, $16
DATA poolEven<>+36(SB)/4, $18
DATA poolEven<>+40(SB)/4, $20
DATA poolEven<>+44(SB)/4, $22
DATA poolEven<>+48(SB)/4, $24
DATA poolEven<>+52(SB)/4, $26
DATA poolEven<>+56(SB)/4, $28
DATA poolEven<>+60(SB)/4, $30
GLOBL poolEven<>(SB), RODATA|NOPTR, $64

DATA poolOdd<>+0(SB)/4, $1
DATA poolOdd<>+4(SB)/4, $3
DATA poolOdd<>+8(SB)/4, $5
DATA poolOdd<>+12(SB)/4, $7
DATA poolOdd<>+16(SB)/4, $9
DATA poolOdd<>+20(SB)/4, $11
DATA poolOdd<>+24(SB)/4, $13
DATA poolOdd<>+28(SB)/4, $15
DATA poolOdd<>+32(SB)/4, $17
DATA poolOdd<>+36(SB)/4, $19
DATA poolOdd<>+40(SB)/4, $21
DATA poolOdd<>+44(SB)/4, $23
DATA poolOdd<>+48(SB)/4, $25
DATA poolOdd<>+52(SB)/4, $27
DATA poolOdd<>+56(SB)/4, $29
DATA poolOdd<>+60(SB)/4, $31
GLOBL poolOdd<>(SB), RODATA|NOPTR, $64

DATA poolInterLo<>+0(SB)/4, $0
DATA poolInterLo<>+4(SB)/4, $16
DATA poolInterLo<>+8(SB)/4, $1
DATA poolInterLo<>+12(SB)/4, $17
DATA poolInterLo<>+16(SB)/4, $2
DATA poolInterLo<>+20(SB)/4, $18
DATA poolInterLo<>+24(SB)/4, $3
DATA poolInterLo<>+28(SB)/4, $19
DATA poolInterLo<>+32(SB)/4, $4
DATA poolInterLo<>+36(SB)/4, $20
DATA poolInterLo<>+40(SB)/4, $5
DATA poolInterLo<>+44(SB)/4, $21
DATA poolInterLo<>+48(SB)/4, $6
DATA poolInterLo<>+52(SB)/4, $22
DATA poolInterLo<>+56(SB)/4, $7
DATA poolInterLo<>+60(SB)/4, $23
GLOBL poolInterLo<>(SB), RODATA|NOPTR, $64

DATA poolInterHi<>+0(SB)/4, $8
DATA poolInterHi<>+4(SB)/4, $24
DATA poolInterHi<>+8(SB)/4, $9
DATA poolInterHi<>+12(SB)/4, $25
DATA poolInterHi<>+16(SB)/4, $10
DATA poolInterHi<>+20(SB)/4, $26
DATA poolInterHi<>+24(SB)/4, $11
DATA poolInterHi<>+28(SB)/4, $27
DATA poolInterHi<>+32(SB)/4, $12
DATA poolInterHi<>+36(SB)/4, $28
DATA poolInterHi<>+40(SB)/4, $13
DATA poolInterHi<>+44(SB)/4, $29
DATA poolInterHi<>+48(SB)/4, $14
DATA poolInterHi<>+52(SB)/4, $30
DATA poolInterHi<>+56(SB)/4, $15
DATA poolInterHi<>+60(SB)/4, $31
GLOBL poolInterHi<>(SB), RODATA|NOPTR, $64

// MASKS sets K1 to the low n bits and K2, K3 to the low 2n bits, split into two halves of 16;
// n in CX.
#define MASKS \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVW AX, K1; \
	ADDQ  CX, CX; \
	MOVQ  $1, AX; \
	SHLQ  CX, AX; \
	DECQ  AX; \
	KMOVW AX, K2; \
	SHRQ  $16, AX; \
	KMOVW AX, K3

// CONSTS sets Z6, Z7 and Z8 to 1, 2 and 3 in every lane, and Z9 to 0.
#define CONSTS \
	MOVL         $1, AX; \
	VPBROADCASTD AX, Z6; \
	MOVL         $2, AX; \
	VPBROADCASTD AX, Z7; \
	MOVL         $3, AX; \
	VPBROADCASTD AX, Z8; \
	VPXORD       Z9, Z9, Z9

// func maxPoolRow16(y *float32, arg *uint8, r0, r1 *float32, n int)
//
// The maxima of n (1..16) windows, whose rows start at r0 and r1, and the winners' places (0..3,
// row-major; the first of equal values, and a NaN never wins), as the scalar loop finds them.
TEXT ·maxPoolRow16(SB), NOSPLIT, $0-40
	MOVQ    y+0(FP), DI
	MOVQ    arg+8(FP), R8
	MOVQ    r0+16(FP), SI
	MOVQ    r1+24(FP), DX
	MOVQ    n+32(FP), CX
	MASKS
	CONSTS
	VMOVUPS poolEven<>(SB), Z30
	VMOVUPS poolOdd<>(SB), Z31

	VMOVUPS.Z (SI), K2, Z0
	VMOVUPS.Z 64(SI), K3, Z1
	VMOVAPS   Z0, Z2
	VPERMT2PS Z1, Z30, Z2 // place 0, the running maximum
	VPERMT2PS Z1, Z31, Z0 // place 1
	VMOVUPS.Z (DX), K2, Z3
	VMOVUPS.Z 64(DX), K3, Z1
	VMOVAPS   Z3, Z4
	VPERMT2PS Z1, Z30, Z4 // place 2
	VPERMT2PS Z1, Z31, Z3 // place 3

	VMOVDQA32 Z9, Z5
	VCMPPS    $0x1e, Z2, Z0, K4 // greater, ordered: false for NaN, as Go's >
	VMOVAPS   Z0, K4, Z2
	VMOVDQA32 Z6, K4, Z5
	VCMPPS    $0x1e, Z2, Z4, K4
	VMOVAPS   Z4, K4, Z2
	VMOVDQA32 Z7, K4, Z5
	VCMPPS    $0x1e, Z2, Z3, K4
	VMOVAPS   Z3, K4, Z2
	VMOVDQA32 Z8, K4, Z5

	VMOVUPS Z2, K1, (DI)
	VPMOVDB Z5, K1, (R8)
	VZEROUPPER
	RET

// func maxPoolGradRow16(r0, r1 *float32, dy *float32, arg *uint8, n int)
//
// Routes the gradients of n (1..16) windows to the places arg names in the rows at r0 and r1,
// zero to the others.
TEXT ·maxPoolGradRow16(SB), NOSPLIT, $0-40
	MOVQ    r0+0(FP), DI
	MOVQ    r1+8(FP), DX
	MOVQ    dy+16(FP), SI
	MOVQ    arg+24(FP), R8
	MOVQ    n+32(FP), CX
	MASKS
	CONSTS
	VMOVUPS poolInterLo<>(SB), Z30
	VMOVUPS poolInterHi<>(SB), Z31

	VMOVUPS.Z   (SI), K1, Z0
	VPMOVZXBD.Z (R8), K1, Z1
	VPCMPEQD    Z9, Z1, K4
	VMOVAPS.Z   Z0, K4, Z2
	VPCMPEQD    Z6, Z1, K4
	VMOVAPS.Z   Z0, K4, Z3
	VPCMPEQD    Z7, Z1, K4
	VMOVAPS.Z   Z0, K4, Z4
	VPCMPEQD    Z8, Z1, K4
	VMOVAPS.Z   Z0, K4, Z5

	VMOVAPS   Z2, Z10
	VPERMT2PS Z3, Z30, Z10
	VPERMT2PS Z3, Z31, Z2
	VMOVUPS   Z10, K2, (DI)
	VMOVUPS   Z2, K3, 64(DI)
	VMOVAPS   Z4, Z10
	VPERMT2PS Z5, Z30, Z10
	VPERMT2PS Z5, Z31, Z4
	VMOVUPS   Z10, K2, (DX)
	VMOVUPS   Z4, K3, 64(DX)
	VZEROUPPER
	RET
