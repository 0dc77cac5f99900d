//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 loops of BatchNorm (see op_bn.go): per-channel sums, the normalisation and the input
// gradient, 16 floats per step. Each loop runs its body with K1 all ones over whole vectors, then
// once more with K1 holding the n%16 lanes left: masked loads read zeros past the end (adding
// nothing to the sums) and masked stores leave what lies past it. The sums keep one partial sum
// per lane, added up halves first at the end.

// HSUM sets X0 to the sum of Z0's lanes, halves first.
#define HSUM \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPS        X1, X0, X0; \
	VPERMILPS     $0x4e, X0, X1; \
	VADDPS        X1, X0, X0; \
	VPERMILPS     $0xb1, X0, X1; \
	VADDPS        X1, X0, X0

#define SUMBODY \
	VMOVUPS.Z (SI), K1, Z2; \
	VADDPS    Z2, Z0, Z0; \
	ADDQ      $64, SI

// func sumVec(x *float32, n int) float32
TEXT ·sumVec(SB), NOSPLIT, $0-20
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPS Z0, Z0, Z0
	MOVL  $0xffff, AX
	KMOVW AX, K1
sumloop:
	CMPQ  CX, $16
	JLT   sumtail
	SUMBODY
	SUBQ  $16, CX
	JMP   sumloop
sumtail:
	TESTQ CX, CX
	JEQ   sumdone
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	SUMBODY
sumdone:
	HSUM
	MOVSS  X0, ret+16(FP)
	VZEROUPPER
	RET

#define SQBODY \
	VMOVUPS.Z (SI), K1, Z2; \
	VSUBPS    Z29, Z2, Z2; \
	VMOVAPS.Z Z2, K1, Z2; \
	VFMADD231PS Z2, Z2, Z0; \
	ADDQ      $64, SI

// func sumSqDevVec(x *float32, n int, m float32) float32
TEXT ·sumSqDevVec(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Z29
	VXORPS       Z0, Z0, Z0
	MOVL  $0xffff, AX
	KMOVW AX, K1
sqloop:
	CMPQ  CX, $16
	JLT   sqtail
	SQBODY
	SUBQ  $16, CX
	JMP   sqloop
sqtail:
	TESTQ CX, CX
	JEQ   sqdone
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	SQBODY
sqdone:
	HSUM
	MOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// DYBODY adds the step's dy (masked by y > 0 when R9 is set, and stored to out when R10 is) to Z0
// and dy·(x-m) to Z3. y > 0 exactly when its bits minus one lie below those of +Inf, as masked
// computes it; Z30 holds ones, Z31 +Inf's bits.
#define DYBODY \
	VMOVUPS.Z (DX), K1, Z2; \
	TESTQ     R9, R9; \
	JEQ       5(PC); \
	VMOVUPS.Z (BX), K1, Z5; \
	VPSUBD    Z30, Z5, Z5; \
	VPCMPUD   $1, Z31, Z5, K2; \
	VMOVAPS.Z Z2, K2, Z2; \
	TESTQ     R10, R10; \
	JEQ       2(PC); \
	VMOVUPS   Z2, K1, (DI); \
	VADDPS    Z2, Z0, Z0; \
	VMOVUPS.Z (SI), K1, Z4; \
	VSUBPS    Z29, Z4, Z4; \
	VMOVAPS.Z Z4, K1, Z4; \
	VFMADD231PS Z4, Z2, Z3; \
	ADDQ      $64, DX; \
	ADDQ      $64, BX; \
	ADDQ      $64, SI; \
	ADDQ      $64, DI

// func sumDyDevVec(out, dy, y, x *float32, n int, m float32, mode int) (sdy, sdyx float32)
//
// Σ dy and Σ dy·(x-m); mode bit 0 masks dy by y > 0 first, bit 1 stores the masked dy to out.
TEXT ·sumDyDevVec(SB), NOSPLIT, $0-64
	MOVQ         out+0(FP), DI
	MOVQ         dy+8(FP), DX
	MOVQ         y+16(FP), BX
	MOVQ         x+24(FP), SI
	MOVQ         n+32(FP), CX
	VBROADCASTSS m+40(FP), Z29
	MOVQ         mode+48(FP), R9
	MOVQ         R9, R10
	ANDQ         $1, R9
	ANDQ         $2, R10
	MOVL         $1, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x7f800000, AX
	VPBROADCASTD AX, Z31
	VXORPS       Z0, Z0, Z0
	VXORPS       Z3, Z3, Z3
	MOVL  $0xffff, AX
	KMOVW AX, K1
dyloop:
	CMPQ  CX, $16
	JLT   dytail
	DYBODY
	SUBQ  $16, CX
	JMP   dyloop
dytail:
	TESTQ CX, CX
	JEQ   dydone
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	DYBODY
dydone:
	HSUM
	MOVSS        X0, sdy+56(FP)
	VMOVAPS      Z3, Z0
	HSUM
	MOVSS        X0, sdyx+60(FP)
	VZEROUPPER
	RET

// AFFBODY stores x·a + b, with the ReLU when R9 is set: lanes whose bits minus the sign bit's are
// at most +Inf's (negative numbers, -0, -Inf) become +0, as affineReLU computes it.
#define AFFBODY \
	VMOVUPS.Z (SI), K1, Z2; \
	VMULPS    Z28, Z2, Z2; \
	VADDPS    Z29, Z2, Z2; \
	TESTQ     R9, R9; \
	JEQ       4(PC); \
	VPSUBD    Z30, Z2, Z5; \
	VPCMPUD   $6, Z31, Z5, K2; \
	VMOVAPS.Z Z2, K2, Z2; \
	VMOVUPS   Z2, K1, (DI); \
	ADDQ      $64, SI; \
	ADDQ      $64, DI

// func affineVec(y, x *float32, n int, a, b float32, relu bool)
TEXT ·affineVec(SB), NOSPLIT, $0-33
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS a+24(FP), Z28
	VBROADCASTSS b+28(FP), Z29
	MOVBQZX      relu+32(FP), R9
	MOVL         $0x80000000, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x7f800000, AX
	VPBROADCASTD AX, Z31
	MOVL  $0xffff, AX
	KMOVW AX, K1
affloop:
	CMPQ  CX, $16
	JLT   afftail
	AFFBODY
	SUBQ  $16, CX
	JMP   affloop
afftail:
	TESTQ CX, CX
	JEQ   affdone
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	AFFBODY
affdone:
	VZEROUPPER
	RET

// GRADBODY stores a·(dy - mdy - (x-m)·is·mdyx).
#define GRADBODY \
	VMOVUPS.Z (SI), K1, Z2; \
	VSUBPS    Z25, Z2, Z2; \
	VMULPS    Z26, Z2, Z2; \
	VMULPS    Z29, Z2, Z2; \
	VMOVUPS.Z (DX), K1, Z3; \
	VSUBPS    Z28, Z3, Z3; \
	VSUBPS    Z2, Z3, Z3; \
	VMULPS    Z27, Z3, Z3; \
	VMOVUPS   Z3, K1, (DI); \
	ADDQ      $64, SI; \
	ADDQ      $64, DX; \
	ADDQ      $64, DI

// func bnGradVec(dx, dy, x *float32, n int, m, is, a, mdy, mdyx float32)
TEXT ·bnGradVec(SB), NOSPLIT, $0-52
	MOVQ         dx+0(FP), DI
	MOVQ         dy+8(FP), DX
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	VBROADCASTSS m+32(FP), Z25
	VBROADCASTSS is+36(FP), Z26
	VBROADCASTSS a+40(FP), Z27
	VBROADCASTSS mdy+44(FP), Z28
	VBROADCASTSS mdyx+48(FP), Z29
	MOVL  $0xffff, AX
	KMOVW AX, K1
gradloop:
	CMPQ  CX, $16
	JLT   gradtail
	GRADBODY
	SUBQ  $16, CX
	JMP   gradloop
gradtail:
	TESTQ CX, CX
	JEQ   graddone
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	GRADBODY
graddone:
	VZEROUPPER
	RET
