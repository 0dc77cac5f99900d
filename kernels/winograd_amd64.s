//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 plane transforms of Winograd F(2×2, 3×3) (see winograd.go), 16 tiles of one row of
// tiles at a time, one tile per lane. Tile t of the row reads columns 2t..2t+3 of its input rows
// and writes columns 2t, 2t+1 of its output rows: the columns are split into their even and odd
// lanes (or merged back) with two-table permutes, so that every transformed element ξ is one
// vector, stored with a mask of the row's n tiles at ξ·ld floats from the first.

// Permute indices: the even and the odd lanes of a pair of vectors, and the lanes of two vectors
// interleaved, their low and high halves.
DATA winoEven<>+0(SB)/4, $0
DATA winoEven<>+4(SB)/4, $2
DATA winoEven<>+8(SB)/4, $4
DATA winoEven<>+12(SB)/4, $6
DATA winoEven<>+16(SB)/4, $8
DATA winoEven<>+20(SB)/4, $10
DATA winoEven<>+24(SB)/4, $12
DATA winoEven<>+28(SB)/4, $14
DATA winoEven<>+32(SB)/4, $16
DATA winoEven<>+36(SB)/4, $18
DATA winoEven<>+40(SB)/4, $20
DATA winoEven<>+44(SB)/4, $22
DATA winoEven<>+48(SB)/4, $24
DATA winoEven<>+52(SB)/4, $26
DATA winoEven<>+56(SB)/4, $28
DATA winoEven<>+60(SB)/4, $30
GLOBL winoEven<>(SB), RODATA|NOPTR, $64

DATA winoOdd<>+0(SB)/4, $1
DATA winoOdd<>+4(SB)/4, $3
DATA winoOdd<>+8(SB)/4, $5
DATA winoOdd<>+12(SB)/4, $7
DATA winoOdd<>+16(SB)/4, $9
DATA winoOdd<>+20(SB)/4, $11
DATA winoOdd<>+24(SB)/4, $13
DATA winoOdd<>+28(SB)/4, $15
DATA winoOdd<>+32(SB)/4, $17
DATA winoOdd<>+36(SB)/4, $19
DATA winoOdd<>+40(SB)/4, $21
DATA winoOdd<>+44(SB)/4, $23
DATA winoOdd<>+48(SB)/4, $25
DATA winoOdd<>+52(SB)/4, $27
DATA winoOdd<>+56(SB)/4, $29
DATA winoOdd<>+60(SB)/4, $31
GLOBL winoOdd<>(SB), RODATA|NOPTR, $64

DATA winoInterLo<>+0(SB)/4, $0
DATA winoInterLo<>+4(SB)/4, $16
DATA winoInterLo<>+8(SB)/4, $1
DATA winoInterLo<>+12(SB)/4, $17
DATA winoInterLo<>+16(SB)/4, $2
DATA winoInterLo<>+20(SB)/4, $18
DATA winoInterLo<>+24(SB)/4, $3
DATA winoInterLo<>+28(SB)/4, $19
DATA winoInterLo<>+32(SB)/4, $4
DATA winoInterLo<>+36(SB)/4, $20
DATA winoInterLo<>+40(SB)/4, $5
DATA winoInterLo<>+44(SB)/4, $21
DATA winoInterLo<>+48(SB)/4, $6
DATA winoInterLo<>+52(SB)/4, $22
DATA winoInterLo<>+56(SB)/4, $7
DATA winoInterLo<>+60(SB)/4, $23
GLOBL winoInterLo<>(SB), RODATA|NOPTR, $64

DATA winoInterHi<>+0(SB)/4, $8
DATA winoInterHi<>+4(SB)/4, $24
DATA winoInterHi<>+8(SB)/4, $9
DATA winoInterHi<>+12(SB)/4, $25
DATA winoInterHi<>+16(SB)/4, $10
DATA winoInterHi<>+20(SB)/4, $26
DATA winoInterHi<>+24(SB)/4, $11
DATA winoInterHi<>+28(SB)/4, $27
DATA winoInterHi<>+32(SB)/4, $12
DATA winoInterHi<>+36(SB)/4, $28
DATA winoInterHi<>+40(SB)/4, $13
DATA winoInterHi<>+44(SB)/4, $29
DATA winoInterHi<>+48(SB)/4, $14
DATA winoInterHi<>+52(SB)/4, $30
DATA winoInterHi<>+56(SB)/4, $15
DATA winoInterHi<>+60(SB)/4, $31
GLOBL winoInterHi<>(SB), RODATA|NOPTR, $64

// SPLIT loads a row of input from SI (34 floats) and splits it into e (columns 2t), o (2t+1),
// e2 (2t+2) and o2 (2t+3); then SI moves to the next row.
#define SPLIT(e, o, e2, o2) \
	VMOVUPS   (SI), e; \
	VMOVAPS   e, o; \
	VPERMT2PS 64(SI), Z30, e; \
	VPERMT2PS 64(SI), Z31, o; \
	VMOVUPS   8(SI), e2; \
	VMOVAPS   e2, o2; \
	VPERMT2PS 72(SI), Z30, e2; \
	VPERMT2PS 72(SI), Z31, o2; \
	ADDQ      R9, SI

// STORE writes x to the n tiles at DI and moves DI to the next element ξ.
#define STORE(x) \
	VMOVUPS x, K1, (DI); \
	ADDQ    R8, DI

// ROWB stores the four elements of ·B of a row whose columns are x0..x3: x0-x2, x1+x2, x2-x1,
// x1-x3.
#define ROWB(x0, x1, x2, x3) \
	VSUBPS x2, x0, Z28; \
	STORE(Z28); \
	VADDPS x2, x1, Z29; \
	STORE(Z29); \
	VSUBPS x1, x2, Z28; \
	STORE(Z28); \
	VSUBPS x3, x1, Z29; \
	STORE(Z29)

// func winoInput16(v *float32, ld int, r *float32, pw int, n int)
//
// Bᵀ·d·B of the n (1..16) tiles whose input rows start at r, pw floats apart (34 floats of each of
// the four rows are read), into v + ξ·ld.
TEXT ·winoInput16(SB), NOSPLIT, $0-40
	MOVQ    v+0(FP), DI
	MOVQ    ld+8(FP), R8
	SHLQ    $2, R8
	MOVQ    r+16(FP), SI
	MOVQ    pw+24(FP), R9
	SHLQ    $2, R9
	MOVQ    n+32(FP), CX
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VMOVUPS winoEven<>(SB), Z30
	VMOVUPS winoOdd<>(SB), Z31

	SPLIT(Z0, Z1, Z2, Z3)
	SPLIT(Z4, Z5, Z6, Z7)
	SPLIT(Z8, Z9, Z10, Z11)
	SPLIT(Z12, Z13, Z14, Z15)

	// Bᵀ·d down the columns: rows d0-d2, d1+d2, d2-d1, d1-d3.
	VSUBPS Z8, Z0, Z16
	VSUBPS Z9, Z1, Z17
	VSUBPS Z10, Z2, Z18
	VSUBPS Z11, Z3, Z19
	VADDPS Z8, Z4, Z20
	VADDPS Z9, Z5, Z21
	VADDPS Z10, Z6, Z22
	VADDPS Z11, Z7, Z23
	VSUBPS Z4, Z8, Z24
	VSUBPS Z5, Z9, Z25
	VSUBPS Z6, Z10, Z26
	VSUBPS Z7, Z11, Z27
	VSUBPS Z12, Z4, Z0
	VSUBPS Z13, Z5, Z1
	VSUBPS Z14, Z6, Z2
	VSUBPS Z15, Z7, Z3

	ROWB(Z16, Z17, Z18, Z19)
	ROWB(Z20, Z21, Z22, Z23)
	ROWB(Z24, Z25, Z26, Z27)
	ROWB(Z0, Z1, Z2, Z3)
	VZEROUPPER
	RET

// ROWMASKS sets K1 to the low n bits and K2, K3 to the low 2n bits, split into two halves of 16;
// n in CX.
#define ROWMASKS \
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

// func winoOutputGrad16(dm *float32, ld int, y0, y1 *float32, n int)
//
// A·dy·Aᵀ of the n (1..16) tiles whose two rows of output gradient start at y0 and y1 (2n floats
// each), into dm + ξ·ld.
TEXT ·winoOutputGrad16(SB), NOSPLIT, $0-40
	MOVQ    dm+0(FP), DI
	MOVQ    ld+8(FP), R8
	SHLQ    $2, R8
	MOVQ    y0+16(FP), SI
	MOVQ    y1+24(FP), DX
	MOVQ    n+32(FP), CX
	ROWMASKS
	VMOVUPS winoEven<>(SB), Z30
	VMOVUPS winoOdd<>(SB), Z31

	// The tile [[p q] [r s]]: p in Z2, q in Z0, r in Z4, s in Z3.
	VMOVUPS.Z (SI), K2, Z0
	VMOVUPS.Z 64(SI), K3, Z1
	VMOVAPS   Z0, Z2
	VPERMT2PS Z1, Z30, Z2
	VPERMT2PS Z1, Z31, Z0
	VMOVUPS.Z (DX), K2, Z3
	VMOVUPS.Z 64(DX), K3, Z1
	VMOVAPS   Z3, Z4
	VPERMT2PS Z1, Z30, Z4
	VPERMT2PS Z1, Z31, Z3
	VXORPS    Z29, Z29, Z29

	// A·dy has rows (p, q), (p+r, q+s), (p-r, q-s), (-r, -s); ·Aᵀ takes each row (a, b) to
	// (a, a+b, a-b, -b).
	STORE(Z2)
	VADDPS Z0, Z2, Z5
	STORE(Z5)
	VSUBPS Z0, Z2, Z6
	STORE(Z6)
	VSUBPS Z0, Z29, Z7
	STORE(Z7)

	VADDPS Z4, Z2, Z8  // a = p+r
	VADDPS Z3, Z0, Z9  // b = q+s
	STORE(Z8)
	VADDPS Z9, Z8, Z10
	STORE(Z10)
	VSUBPS Z9, Z8, Z11
	STORE(Z11)
	VSUBPS Z9, Z29, Z12
	STORE(Z12)

	VSUBPS Z4, Z2, Z8  // a = p-r
	VSUBPS Z3, Z0, Z9  // b = q-s
	STORE(Z8)
	VADDPS Z9, Z8, Z10
	STORE(Z10)
	VSUBPS Z9, Z8, Z11
	STORE(Z11)
	VSUBPS Z9, Z29, Z12
	STORE(Z12)

	VSUBPS Z4, Z29, Z8 // -r
	STORE(Z8)
	VSUBPS Z3, Z8, Z10 // -r-s
	STORE(Z10)
	VSUBPS Z4, Z3, Z11 // s-r
	STORE(Z11)
	STORE(Z3)
	VZEROUPPER
	RET

// func winoOutput16(y0, y1 *float32, m *float32, ld int, n int, bias float32)
//
// Aᵀ·m·A + bias of the n (1..16) tiles at m + ξ·ld into two rows of output, y0 and y1 (2n floats
// each).
TEXT ·winoOutput16(SB), NOSPLIT, $0-44
	MOVQ y0+0(FP), DI
	MOVQ y1+8(FP), DX
	MOVQ m+16(FP), SI
	MOVQ ld+24(FP), R8
	SHLQ $2, R8
	MOVQ n+32(FP), CX
	ROWMASKS

	VMOVUPS.Z (SI), K1, Z0
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z1
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z2
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z3
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z4
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z5
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z6
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z7
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z8
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z9
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z10
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z11
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z12
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z13
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z14
	ADDQ      R8, SI
	VMOVUPS.Z (SI), K1, Z15

	// Aᵀ·m down the columns: rows m0+m1+m2 (Z16..Z19) and m1-m2-m3 (Z20..Z23).
	VADDPS Z4, Z0, Z16
	VADDPS Z8, Z16, Z16
	VADDPS Z5, Z1, Z17
	VADDPS Z9, Z17, Z17
	VADDPS Z6, Z2, Z18
	VADDPS Z10, Z18, Z18
	VADDPS Z7, Z3, Z19
	VADDPS Z11, Z19, Z19
	VSUBPS Z8, Z4, Z20
	VSUBPS Z12, Z20, Z20
	VSUBPS Z9, Z5, Z21
	VSUBPS Z13, Z21, Z21
	VSUBPS Z10, Z6, Z22
	VSUBPS Z14, Z22, Z22
	VSUBPS Z11, Z7, Z23
	VSUBPS Z15, Z23, Z23

	// ·A along the rows: (x0+x1+x2, x1-x2-x3), plus the bias; then the even and odd columns
	// merged into the row.
	VBROADCASTSS bias+40(FP), Z29
	VMOVUPS      winoInterLo<>(SB), Z30
	VMOVUPS      winoInterHi<>(SB), Z31

	VADDPS    Z17, Z16, Z0
	VADDPS    Z18, Z0, Z0
	VADDPS    Z29, Z0, Z0
	VSUBPS    Z18, Z17, Z1
	VSUBPS    Z19, Z1, Z1
	VADDPS    Z29, Z1, Z1
	VMOVAPS   Z0, Z2
	VPERMT2PS Z1, Z30, Z0
	VPERMT2PS Z1, Z31, Z2
	VMOVUPS   Z0, K2, (DI)
	VMOVUPS   Z2, K3, 64(DI)

	VADDPS    Z21, Z20, Z0
	VADDPS    Z22, Z0, Z0
	VADDPS    Z29, Z0, Z0
	VSUBPS    Z22, Z21, Z1
	VSUBPS    Z23, Z1, Z1
	VADDPS    Z29, Z1, Z1
	VMOVAPS   Z0, Z2
	VPERMT2PS Z1, Z30, Z0
	VPERMT2PS Z1, Z31, Z2
	VMOVUPS   Z0, K2, (DX)
	VMOVUPS   Z2, K3, 64(DX)
	VZEROUPPER
	RET

// ADDROW adds a row of B·dv·Bᵀ whose columns (over the tiles, lane t) are c0..c3 to the row at SI:
// columns 2t+j get cj. (c0, c1) interleaved cover columns 0..31 and (c2, c3) columns 2..33, so
// the latter are shifted by two lanes before both are added, with one read-modify-write of the
// row's 2n+2 floats; then SI moves to the next row. Clobbers c0, c2 and Z20..Z27.
#define ADDROW(c0, c1, c2, c3) \
	VMOVAPS   c0, Z20; \
	VPERMT2PS c1, Z29, Z20; \
	VPERMT2PS c1, Z30, c0; \
	VMOVAPS   c2, Z21; \
	VPERMT2PS c3, Z29, Z21; \
	VPERMT2PS c3, Z30, c2; \
	VALIGND   $14, Z31, Z21, Z22; \
	VALIGND   $14, Z21, c2, Z23; \
	VALIGND   $14, c2, Z31, Z24; \
	VADDPS    Z22, Z20, Z20; \
	VADDPS    Z23, c0, c0; \
	VMOVUPS.Z (SI), K2, Z25; \
	VADDPS    Z20, Z25, Z25; \
	VMOVUPS   Z25, K2, (SI); \
	VMOVUPS.Z 64(SI), K3, Z26; \
	VADDPS    c0, Z26, Z26; \
	VMOVUPS   Z26, K3, 64(SI); \
	VMOVUPS.Z 128(SI), K4, Z27; \
	VADDPS    Z24, Z27, Z27; \
	VMOVUPS   Z27, K4, 128(SI); \
	ADDQ      R9, SI

// ROWBT sets a, b, c, d, a row of dv, to B·(a, b, c, d) = (a, b-c+d, b+c-a, -d). Z31 is zero.
#define ROWBT(a, b, c, d) \
	VSUBPS c, b, Z28; \
	VADDPS c, b, c; \
	VADDPS d, Z28, b; \
	VSUBPS a, c, c; \
	VSUBPS d, Z31, d

// func winoInputGrad16(r *float32, pw int, dv *float32, ld int, n int)
//
// Adds B·dv·Bᵀ of the n (1..16) tiles at dv + ξ·ld to the four rows at r, pw floats apart
// (2n+2 floats of each).
TEXT ·winoInputGrad16(SB), NOSPLIT, $0-40
	MOVQ  r+0(FP), SI
	MOVQ  pw+8(FP), R9
	SHLQ  $2, R9
	MOVQ  dv+16(FP), DI
	MOVQ  ld+24(FP), R8
	SHLQ  $2, R8
	MOVQ  n+32(FP), CX
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	LEAQ  2(CX)(CX*1), CX
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVW AX, K2
	SHRQ  $16, AX
	KMOVW AX, K3
	SHRQ  $16, AX
	KMOVW AX, K4

	VMOVUPS.Z (DI), K1, Z0
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z1
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z2
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z3
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z4
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z5
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z6
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z7
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z8
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z9
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z10
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z11
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z12
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z13
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z14
	ADDQ      R8, DI
	VMOVUPS.Z (DI), K1, Z15

	VXORPS       Z31, Z31, Z31
	VMOVUPS      winoInterLo<>(SB), Z29
	VMOVUPS      winoInterHi<>(SB), Z30

	// Along the rows of dv.
	ROWBT(Z0, Z1, Z2, Z3)
	ROWBT(Z4, Z5, Z6, Z7)
	ROWBT(Z8, Z9, Z10, Z11)
	ROWBT(Z12, Z13, Z14, Z15)

	// Down the columns: rows s0, s1-s2+s3 (into Z4..Z7), s1+s2-s0 (Z16..Z19), -s3 (Z12..Z15).
	VADDPS Z8, Z4, Z16
	VSUBPS Z0, Z16, Z16
	VADDPS Z9, Z5, Z17
	VSUBPS Z1, Z17, Z17
	VADDPS Z10, Z6, Z18
	VSUBPS Z2, Z18, Z18
	VADDPS Z11, Z7, Z19
	VSUBPS Z3, Z19, Z19
	VSUBPS Z8, Z4, Z4
	VADDPS Z12, Z4, Z4
	VSUBPS Z9, Z5, Z5
	VADDPS Z13, Z5, Z5
	VSUBPS Z10, Z6, Z6
	VADDPS Z14, Z6, Z6
	VSUBPS Z11, Z7, Z7
	VADDPS Z15, Z7, Z7
	VSUBPS Z12, Z31, Z12
	VSUBPS Z13, Z31, Z13
	VSUBPS Z14, Z31, Z14
	VSUBPS Z15, Z31, Z15

	ADDROW(Z0, Z1, Z2, Z3)
	ADDROW(Z4, Z5, Z6, Z7)
	ADDROW(Z16, Z17, Z18, Z19)
	ADDROW(Z12, Z13, Z14, Z15)
	VZEROUPPER
	RET
