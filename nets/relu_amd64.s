//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 loops of the ReLU ops (see op_relu.go), 16 floats per step, with the masked tail of
// bn_amd64.s: K1 is all ones over whole vectors, then holds the n%16 lanes left. The ReLU
// keeps a lane when its bits minus the sign bit's exceed +Inf's (positive numbers, +0, +Inf
// and every NaN) and sets it to +0 otherwise, as reluForward computes it; its gradient keeps
// dy where the output's bits minus one are below +Inf's (y > 0, +Inf included, NaN not).

// RELUMASK sets K2 to the lanes of Z2 the ReLU keeps (Z30: 0x80000000, Z31: 0x7f800000).
#define RELUMASK \
	VPSUBD  Z30, Z2, Z5; \
	VPCMPUD $6, Z31, Z5, K2

#define TAILMASK(label) \
	TESTQ CX, CX; \
	JEQ   label; \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVW AX, K1

#define CONSTANTS \
	MOVL         $0x80000000, AX; \
	VPBROADCASTD AX, Z30; \
	MOVL         $0x7f800000, AX; \
	VPBROADCASTD AX, Z31; \
	MOVL         $0xffff, AX; \
	KMOVW        AX, K1

#define RELUBODY \
	VMOVUPS.Z (SI), K1, Z2; \
	RELUMASK; \
	VMOVAPS.Z Z2, K2, Z2; \
	VMOVUPS   Z2, K1, (DI); \
	ADDQ      $64, SI; \
	ADDQ      $64, DI

// func reluVec(y, x *float32, n int)
TEXT ·reluVec(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	CONSTANTS
reluloop:
	CMPQ CX, $16
	JLT  relutail
	RELUBODY
	SUBQ $16, CX
	JMP  reluloop
relutail:
	TAILMASK(reludone)
	RELUBODY
reludone:
	VZEROUPPER
	RET

#define ADDRELUBODY \
	VMOVUPS.Z (SI), K1, Z2; \
	VMOVUPS.Z (DX), K1, Z3; \
	VADDPS    Z3, Z2, Z2; \
	RELUMASK; \
	VMOVAPS.Z Z2, K2, Z2; \
	VMOVUPS   Z2, K1, (DI); \
	ADDQ      $64, SI; \
	ADDQ      $64, DX; \
	ADDQ      $64, DI

// func addReLUVec(y, a, b *float32, n int)
TEXT ·addReLUVec(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTANTS
addloop:
	CMPQ CX, $16
	JLT  addtail
	ADDRELUBODY
	SUBQ $16, CX
	JMP  addloop
addtail:
	TAILMASK(adddone)
	ADDRELUBODY
adddone:
	VZEROUPPER
	RET

// RGRADBODY stores dy where y's bits minus one are below +Inf's (Z30 here: 1), zero elsewhere.
#define RGRADBODY \
	VMOVUPS.Z (SI), K1, Z2; \
	VPSUBD    Z30, Z2, Z5; \
	VPCMPUD   $1, Z31, Z5, K2; \
	VMOVUPS.Z (DX), K1, Z3; \
	VMOVAPS.Z Z3, K2, Z3; \
	VMOVUPS   Z3, K1, (DI); \
	ADDQ      $64, SI; \
	ADDQ      $64, DX; \
	ADDQ      $64, DI

// func reluGradVec(dx, y, dy *float32, n int)
TEXT ·reluGradVec(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ dy+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTANTS
	MOVL         $1, AX
	VPBROADCASTD AX, Z30
gradloop:
	CMPQ CX, $16
	JLT  gradtail
	RGRADBODY
	SUBQ $16, CX
	JMP  gradloop
gradtail:
	TAILMASK(graddone)
	RGRADBODY
graddone:
	VZEROUPPER
	RET
