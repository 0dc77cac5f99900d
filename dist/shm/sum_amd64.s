//go:build amd64 && !purego && !mpi

#include "textflag.h"

// The vector bodies of sum2, sum3 and sum4 (shmsum.go): AVX, 32 floats per iteration in
// four registers, n a multiple of 32. Each operand after the first is added to the running
// sum as the second operand of VADDPS, the order of the scalar code's a + b. The stores of
// an iteration follow all of its loads, so dst may alias a.

// func sumVec2(dst, a, b *float32, n int)
TEXT ·sumVec2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ AX, AX

loop2:
	CMPQ    AX, CX
	JAE     done2
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VADDPS  (DX)(AX*4), Y0, Y0
	VADDPS  32(DX)(AX*4), Y1, Y1
	VADDPS  64(DX)(AX*4), Y2, Y2
	VADDPS  96(DX)(AX*4), Y3, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	ADDQ    $32, AX
	JMP     loop2

done2:
	VZEROUPPER
	RET

// func sumVec3(dst, a, b, c *float32, n int)
TEXT ·sumVec3(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ c+24(FP), R8
	MOVQ n+32(FP), CX
	XORQ AX, AX

loop3:
	CMPQ    AX, CX
	JAE     done3
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VADDPS  (DX)(AX*4), Y0, Y0
	VADDPS  32(DX)(AX*4), Y1, Y1
	VADDPS  64(DX)(AX*4), Y2, Y2
	VADDPS  96(DX)(AX*4), Y3, Y3
	VADDPS  (R8)(AX*4), Y0, Y0
	VADDPS  32(R8)(AX*4), Y1, Y1
	VADDPS  64(R8)(AX*4), Y2, Y2
	VADDPS  96(R8)(AX*4), Y3, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	ADDQ    $32, AX
	JMP     loop3

done3:
	VZEROUPPER
	RET

// func sumVec4(dst, a, b, c, d *float32, n int)
TEXT ·sumVec4(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ c+24(FP), R8
	MOVQ d+32(FP), R9
	MOVQ n+40(FP), CX
	XORQ AX, AX

loop4:
	CMPQ    AX, CX
	JAE     done4
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VADDPS  (DX)(AX*4), Y0, Y0
	VADDPS  32(DX)(AX*4), Y1, Y1
	VADDPS  64(DX)(AX*4), Y2, Y2
	VADDPS  96(DX)(AX*4), Y3, Y3
	VADDPS  (R8)(AX*4), Y0, Y0
	VADDPS  32(R8)(AX*4), Y1, Y1
	VADDPS  64(R8)(AX*4), Y2, Y2
	VADDPS  96(R8)(AX*4), Y3, Y3
	VADDPS  (R9)(AX*4), Y0, Y0
	VADDPS  32(R9)(AX*4), Y1, Y1
	VADDPS  64(R9)(AX*4), Y2, Y2
	VADDPS  96(R9)(AX*4), Y3, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	ADDQ    $32, AX
	JMP     loop4

done4:
	VZEROUPPER
	RET
