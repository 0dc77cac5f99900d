//go:build amd64 && !purego

#include "textflag.h"

// Register-only fused multiply-add loops, the machine's peak for single precision: twelve
// independent accumulators, so that every FMA pipe stays busy through the instruction's
// latency, and no memory access inside the loop. Each accumulator starts at 0 and gains
// 1·1 per iteration and lane; the sum of all lanes of all accumulators is returned, so a
// test can check that the loop ran (12·lanes·n) and the work cannot be optimised away.

// func fmaLoopAVX512(n int) float32
TEXT ·fmaLoopAVX512(SB), NOSPLIT, $0-12
	MOVQ         n+0(FP), CX
	MOVL         $0x3f800000, AX
	VPBROADCASTD AX, Z0
	VXORPS       Z4, Z4, Z4
	VXORPS       Z5, Z5, Z5
	VXORPS       Z6, Z6, Z6
	VXORPS       Z7, Z7, Z7
	VXORPS       Z8, Z8, Z8
	VXORPS       Z9, Z9, Z9
	VXORPS       Z10, Z10, Z10
	VXORPS       Z11, Z11, Z11
	VXORPS       Z12, Z12, Z12
	VXORPS       Z13, Z13, Z13
	VXORPS       Z14, Z14, Z14
	VXORPS       Z15, Z15, Z15
	TESTQ        CX, CX
	JLE          sum512

loop512:
	VFMADD231PS Z0, Z0, Z4
	VFMADD231PS Z0, Z0, Z5
	VFMADD231PS Z0, Z0, Z6
	VFMADD231PS Z0, Z0, Z7
	VFMADD231PS Z0, Z0, Z8
	VFMADD231PS Z0, Z0, Z9
	VFMADD231PS Z0, Z0, Z10
	VFMADD231PS Z0, Z0, Z11
	VFMADD231PS Z0, Z0, Z12
	VFMADD231PS Z0, Z0, Z13
	VFMADD231PS Z0, Z0, Z14
	VFMADD231PS Z0, Z0, Z15
	DECQ        CX
	JNZ         loop512

sum512:
	VADDPS        Z5, Z4, Z4
	VADDPS        Z7, Z6, Z6
	VADDPS        Z9, Z8, Z8
	VADDPS        Z11, Z10, Z10
	VADDPS        Z13, Z12, Z12
	VADDPS        Z15, Z14, Z14
	VADDPS        Z6, Z4, Z4
	VADDPS        Z10, Z8, Z8
	VADDPS        Z14, Z12, Z12
	VADDPS        Z8, Z4, Z4
	VADDPS        Z12, Z4, Z4
	VEXTRACTF64X4 $1, Z4, Y1
	VADDPS        Y1, Y4, Y4
	VEXTRACTF128  $1, Y4, X1
	VADDPS        X1, X4, X4
	VHADDPS       X4, X4, X4
	VHADDPS       X4, X4, X4
	MOVSS         X4, ret+8(FP)
	VZEROUPPER
	RET

// func fmaLoopAVX2(n int) float32
TEXT ·fmaLoopAVX2(SB), NOSPLIT, $0-12
	MOVQ         n+0(FP), CX
	MOVL         $0x3f800000, AX
	MOVL         AX, X0
	VBROADCASTSS X0, Y0
	VXORPS       Y4, Y4, Y4
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
	VXORPS       Y12, Y12, Y12
	VXORPS       Y13, Y13, Y13
	VXORPS       Y14, Y14, Y14
	VXORPS       Y15, Y15, Y15
	TESTQ        CX, CX
	JLE          sum256

loop256:
	VFMADD231PS Y0, Y0, Y4
	VFMADD231PS Y0, Y0, Y5
	VFMADD231PS Y0, Y0, Y6
	VFMADD231PS Y0, Y0, Y7
	VFMADD231PS Y0, Y0, Y8
	VFMADD231PS Y0, Y0, Y9
	VFMADD231PS Y0, Y0, Y10
	VFMADD231PS Y0, Y0, Y11
	VFMADD231PS Y0, Y0, Y12
	VFMADD231PS Y0, Y0, Y13
	VFMADD231PS Y0, Y0, Y14
	VFMADD231PS Y0, Y0, Y15
	DECQ        CX
	JNZ         loop256

sum256:
	VADDPS       Y5, Y4, Y4
	VADDPS       Y7, Y6, Y6
	VADDPS       Y9, Y8, Y8
	VADDPS       Y11, Y10, Y10
	VADDPS       Y13, Y12, Y12
	VADDPS       Y15, Y14, Y14
	VADDPS       Y6, Y4, Y4
	VADDPS       Y10, Y8, Y8
	VADDPS       Y14, Y12, Y12
	VADDPS       Y8, Y4, Y4
	VADDPS       Y12, Y4, Y4
	VEXTRACTF128 $1, Y4, X1
	VADDPS       X1, X4, X4
	VHADDPS      X4, X4, X4
	VHADDPS      X4, X4, X4
	MOVSS        X4, ret+8(FP)
	VZEROUPPER
	RET
