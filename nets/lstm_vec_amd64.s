//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 element-wise kernels of the LSTM cell and the softmax cross-entropy: 16 floats per
// instruction, the last n mod 16 under a mask, so that any length runs without a scalar tail.
//
// Every kernel is built on EXP, expf32's algorithm in vector form: exp(x) = 2^n·exp(r) with
// n = round(x·log2(e)) and r = x - n·ln2 (in two parts), exp(r) by the Cephes polynomial, and
// VSCALEFPS for the 2^n, which also gives 0 on underflow and +Inf on overflow.
//
// Registers loaded by EXPCONST and kept for the whole kernel:
//	Z16 log2(e)  Z17 ln2 high part  Z18 ln2 low part  Z19..Z24 the polynomial  Z25 1.0

#define EXPCONST \
	MOVL         $0x3fb8aa3b, AX; \
	VPBROADCASTD AX, Z16; \
	MOVL         $0x3f318000, AX; \
	VPBROADCASTD AX, Z17; \
	MOVL         $0xb95e8083, AX; \
	VPBROADCASTD AX, Z18; \
	MOVL         $0x39506967, AX; \
	VPBROADCASTD AX, Z19; \
	MOVL         $0x3ab743ce, AX; \
	VPBROADCASTD AX, Z20; \
	MOVL         $0x3c088908, AX; \
	VPBROADCASTD AX, Z21; \
	MOVL         $0x3d2aa9c1, AX; \
	VPBROADCASTD AX, Z22; \
	MOVL         $0x3e2aaaaa, AX; \
	VPBROADCASTD AX, Z23; \
	MOVL         $0x3f000000, AX; \
	VPBROADCASTD AX, Z24; \
	MOVL         $0x3f800000, AX; \
	VPBROADCASTD AX, Z25

// EXP sets e = exp(x), using t and r as scratch; x is left unchanged. The polynomial's last step,
// p·r² + r + 1, is taken as (p·r + 1)·r + 1.
#define EXP(x, e, t, r) \
	VMULPS       Z16, x, t; \
	VRNDSCALEPS  $8, t, t; \
	VMOVAPS      x, r; \
	VFNMADD231PS Z17, t, r; \
	VFNMADD231PS Z18, t, r; \
	VMOVAPS      Z19, e; \
	VFMADD213PS  Z20, r, e; \
	VFMADD213PS  Z21, r, e; \
	VFMADD213PS  Z22, r, e; \
	VFMADD213PS  Z23, r, e; \
	VFMADD213PS  Z24, r, e; \
	VFMADD213PS  Z25, r, e; \
	VFMADD213PS  Z25, r, e; \
	VSCALEFPS    t, e, e

// TAILMASK sets K1 to the low CX bits (CX < 16).
#define TAILMASK \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVW AX, K1

// func maxF32AVX512(x *float32, n int) float32
TEXT ·maxF32AVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0xff800000, AX // -Inf
	VPBROADCASTD AX, Z0
	VMOVAPS      Z0, Z1

max32:
	CMPQ    CX, $32
	JLT     max16
	VMAXPS  (SI), Z0, Z0
	VMAXPS  64(SI), Z1, Z1
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     max32

max16:
	CMPQ   CX, $16
	JLT    maxtail
	VMAXPS (SI), Z0, Z0
	ADDQ   $64, SI
	SUBQ   $16, CX

maxtail:
	TESTQ CX, CX
	JZ    maxreduce
	TAILMASK
	VMOVAPS Z0, Z2
	VMOVUPS (SI), K1, Z2 // lanes past the end keep values already counted
	VMAXPS  Z2, Z1, Z1

maxreduce:
	VMAXPS        Z1, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXPS        X1, X0, X0
	MOVSS         X0, ret+16(FP)
	VZEROUPPER
	RET

// func expShiftSumAVX512(dst, src *float32, n int, mx float32) float64
TEXT ·expShiftSumAVX512(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS mx+24(FP), Z15
	EXPCONST
	MOVL         $0xc2aeac4f, AX // -87.33654: results below the smallest normal float32 become 0
	VPBROADCASTD AX, Z26
	VXORPD       Z8, Z8, Z8
	VXORPD       Z9, Z9, Z9

expsum16:
	CMPQ      CX, $16
	JLT       expsumtail
	VMOVUPS   (SI), Z0
	VSUBPS    Z15, Z0, Z0
	VCMPPS    $5, Z26, Z0, K2 // not less than the bound (or NaN): kept
	EXP(Z0, Z1, Z2, Z3)
	VMOVAPS.Z Z1, K2, Z1
	VMOVUPS   Z1, (DI)
	VCVTPS2PD Y1, Z4
	VEXTRACTF32X8 $1, Z1, Y5
	VCVTPS2PD Y5, Z5
	VADDPD    Z4, Z8, Z8
	VADDPD    Z5, Z9, Z9
	ADDQ      $64, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JMP       expsum16

expsumtail:
	TESTQ     CX, CX
	JZ        expsumreduce
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	VSUBPS    Z15, Z0, Z0
	VCMPPS    $5, Z26, Z0, K2
	KANDW     K1, K2, K2
	EXP(Z0, Z1, Z2, Z3)
	VMOVAPS.Z Z1, K2, Z1
	VMOVUPS   Z1, K1, (DI)
	VCVTPS2PD Y1, Z4
	VEXTRACTF32X8 $1, Z1, Y5
	VCVTPS2PD Y5, Z5
	VADDPD    Z4, Z8, Z8
	VADDPD    Z5, Z9, Z9

expsumreduce:
	VADDPD        Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y9
	VADDPD        Y9, Y8, Y8
	VEXTRACTF128  $1, Y8, X9
	VADDPD        X9, X8, X8
	VPERMILPD     $1, X8, X9
	VADDSD        X9, X8, X8
	MOVSD         X8, ret+32(FP)
	VZEROUPPER
	RET

// func scaleF32AVX512(x *float32, n int, s float32)
TEXT ·scaleF32AVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Z1

scale16:
	CMPQ    CX, $16
	JLT     scaletail
	VMULPS  (SI), Z1, Z0
	VMOVUPS Z0, (SI)
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     scale16

scaletail:
	TESTQ     CX, CX
	JZ        scaledone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	VMULPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (SI)

scaledone:
	VZEROUPPER
	RET

// SIGMOID sets Z1 = 1/(1 + exp(-Z0)) for Z0 clamped to [-80, 80] (NaN stays NaN), where the
// result is a normal float32. Z26 = -80, Z27 = 80, Z28 the sign bit.
#define SIGMOID \
	VMINPS Z0, Z27, Z0; \
	VMAXPS Z0, Z26, Z0; \
	VPXORD Z28, Z0, Z0; \
	EXP(Z0, Z1, Z2, Z3); \
	VADDPS Z25, Z1, Z1; \
	VDIVPS Z1, Z25, Z1

// func sigmoidAVX512(dst, src *float32, n int)
TEXT ·sigmoidAVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	EXPCONST
	MOVL         $0xc2a00000, AX // -80
	VPBROADCASTD AX, Z26
	MOVL         $0x42a00000, AX // 80
	VPBROADCASTD AX, Z27
	MOVL         $0x80000000, AX
	VPBROADCASTD AX, Z28

sigmoid16:
	CMPQ    CX, $16
	JLT     sigmoidtail
	VMOVUPS (SI), Z0
	SIGMOID
	VMOVUPS Z1, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     sigmoid16

sigmoidtail:
	TESTQ     CX, CX
	JZ        sigmoiddone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	SIGMOID
	VMOVUPS   Z1, K1, (DI)

sigmoiddone:
	VZEROUPPER
	RET

// TANH sets Z3 = tanh(Z0): for |x| < 0.625 the odd Cephes polynomial x + x³·P(x²), else
// sign(x)·(1 - 2/(exp(2|x|) + 1)) with |x| clamped to 10 (where tanh is 1 in float32).
// Z26 = |.| mask, Z27 = 10, Z28 = 0.625, Z29 = 2, Z10..Z14 the polynomial.
#define TANH \
	VPANDD       Z26, Z0, Z1; \
	VMINPS       Z1, Z27, Z1; \
	VADDPS       Z1, Z1, Z2; \
	EXP(Z2, Z3, Z4, Z5); \
	VADDPS       Z25, Z3, Z3; \
	VDIVPS       Z3, Z29, Z3; \
	VSUBPS       Z3, Z25, Z3; \
	VPANDND      Z0, Z26, Z6; \
	VPORD        Z6, Z3, Z3; \
	VMULPS       Z0, Z0, Z7; \
	VMOVAPS      Z10, Z8; \
	VFMADD213PS  Z11, Z7, Z8; \
	VFMADD213PS  Z12, Z7, Z8; \
	VFMADD213PS  Z13, Z7, Z8; \
	VFMADD213PS  Z14, Z7, Z8; \
	VMULPS       Z7, Z8, Z8; \
	VFMADD213PS  Z0, Z0, Z8; \
	VCMPPS       $1, Z28, Z1, K2; \
	VBLENDMPS    Z8, Z3, K2, Z3

// func tanhAVX512(dst, src *float32, n int)
TEXT ·tanhAVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	EXPCONST
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z26
	MOVL         $0x41200000, AX // 10
	VPBROADCASTD AX, Z27
	MOVL         $0x3f200000, AX // 0.625
	VPBROADCASTD AX, Z28
	MOVL         $0x40000000, AX // 2
	VPBROADCASTD AX, Z29
	MOVL         $0xbbbaf0ea, AX // -5.70498872745e-3
	VPBROADCASTD AX, Z10
	MOVL         $0x3ca9134e, AX // 2.06390887954e-2
	VPBROADCASTD AX, Z11
	MOVL         $0xbd5c1e2d, AX // -5.37397155531e-2
	VPBROADCASTD AX, Z12
	MOVL         $0x3e088393, AX // 1.33314422036e-1
	VPBROADCASTD AX, Z13
	MOVL         $0xbeaaaa99, AX // -3.33332819422e-1
	VPBROADCASTD AX, Z14

tanh16:
	CMPQ    CX, $16
	JLT     tanhtail
	VMOVUPS (SI), Z0
	TANH
	VMOVUPS Z3, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     tanh16

tanhtail:
	TESTQ     CX, CX
	JZ        tanhdone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	TANH
	VMOVUPS   Z3, K1, (DI)

tanhdone:
	VZEROUPPER
	RET

// func addF32AVX512(dst, src *float32, n int)
TEXT ·addF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

add32:
	CMPQ    CX, $32
	JLT     add16
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VADDPS  (SI), Z0, Z0
	VADDPS  64(SI), Z1, Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     add32

add16:
	CMPQ    CX, $16
	JLT     addtail
	VMOVUPS (DI), Z0
	VADDPS  (SI), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX

addtail:
	TESTQ     CX, CX
	JZ        adddone
	TAILMASK
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z (SI), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (DI)

adddone:
	VZEROUPPER
	RET

// CELLBWD does 16 (or, under K1, fewer) elements of lstmCellBackward at offset BX; the loads are
// zeroing-masked with K1 and the stores masked with K1, which is all-ones in the main loop.
// SI, R8, R9, R10: the i, f, g, o gates; DI, R11, R12, R13: their gradients; DX tanh(c_t),
// R14 c_{t-1}, R15 dh, AX dn, CX dc (all advanced by the caller). Z31 = 1.
#define CELLBWD \
	VMOVUPS.Z    (SI)(BX*1), K1, Z0; \
	VMOVUPS.Z    (R8)(BX*1), K1, Z1; \
	VMOVUPS.Z    (R9)(BX*1), K1, Z2; \
	VMOVUPS.Z    (R10)(BX*1), K1, Z3; \
	VMOVUPS.Z    (DX)(BX*1), K1, Z4; \
	VMOVUPS.Z    (R15)(BX*1), K1, Z5; \
	VADDPS.Z     (AX)(BX*1), Z5, K1, Z5; \
	VMULPS       Z4, Z4, Z6; \
	VSUBPS       Z6, Z31, Z6; \
	VMULPS       Z3, Z5, Z7; \
	VMULPS       Z6, Z7, Z7; \
	VADDPS.Z     (CX)(BX*1), Z7, K1, Z7; \
	VSUBPS       Z0, Z31, Z8; \
	VMULPS       Z2, Z7, Z9; \
	VMULPS       Z0, Z9, Z9; \
	VMULPS       Z8, Z9, Z9; \
	VMOVUPS      Z9, K1, (DI)(BX*1); \
	VSUBPS       Z1, Z31, Z10; \
	VMULPS.Z     (R14)(BX*1), Z7, K1, Z11; \
	VMULPS       Z1, Z11, Z11; \
	VMULPS       Z10, Z11, Z11; \
	VMOVUPS      Z11, K1, (R11)(BX*1); \
	VMULPS       Z2, Z2, Z12; \
	VSUBPS       Z12, Z31, Z12; \
	VMULPS       Z0, Z7, Z13; \
	VMULPS       Z12, Z13, Z13; \
	VMOVUPS      Z13, K1, (R12)(BX*1); \
	VSUBPS       Z3, Z31, Z14; \
	VMULPS       Z4, Z5, Z15; \
	VMULPS       Z3, Z15, Z15; \
	VMULPS       Z14, Z15, Z15; \
	VMOVUPS      Z15, K1, (R13)(BX*1); \
	VMULPS       Z1, Z7, Z7; \
	VMOVUPS      Z7, K1, (CX)(BX*1)

// func lstmCellBackwardAVX512(gates, d, tc, cp, dh, dn, dc *float32, h int)
// Every GPR but SP and BP holds a pointer or the offset, so the count of elements left is kept
// in h's argument slot.
TEXT ·lstmCellBackwardAVX512(SB), NOSPLIT, $0-64
	MOVQ         h+56(FP), BX
	SHLQ         $2, BX // h in bytes: the distance between gates
	MOVQ         gates+0(FP), SI
	LEAQ         (SI)(BX*1), R8
	LEAQ         (R8)(BX*1), R9
	LEAQ         (R9)(BX*1), R10
	MOVQ         d+8(FP), DI
	LEAQ         (DI)(BX*1), R11
	LEAQ         (R11)(BX*1), R12
	LEAQ         (R12)(BX*1), R13
	MOVQ         tc+16(FP), DX
	MOVQ         cp+24(FP), R14
	MOVQ         dh+32(FP), R15
	MOVQ         dn+40(FP), AX
	MOVQ         dc+48(FP), CX
	MOVL         $0x3f800000, BX
	VPBROADCASTD BX, Z31
	MOVL         $0xffff, BX
	KMOVW        BX, K1
	XORQ         BX, BX // byte offset

cellbwd16:
	CMPQ h+56(FP), $16
	JLT  cellbwdtail
	CELLBWD
	ADDQ $64, BX
	SUBQ $16, h+56(FP)
	JMP  cellbwd16

cellbwdtail:
	CMPQ  h+56(FP), $0
	JEQ   cellbwddone
	MOVQ  CX, X12 // free CX (the shift count) and AX for the mask
	MOVQ  AX, X13
	MOVQ  h+56(FP), CX
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	MOVQ  X12, CX
	MOVQ  X13, AX
	CELLBWD

cellbwddone:
	VZEROUPPER
	RET
