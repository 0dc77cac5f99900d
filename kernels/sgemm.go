package kernels

import (
	"fmt"
	"sync"

	"github.com/ssfusion/ssfusion/internal/parallel"
)

// This file is the blocked single-precision GEMM around the assembly micro-kernels of
// sgemm_amd64.s, in the usual Goto/BLIS arrangement:
//
//	for each block of nc columns of C (jc)
//	  for each block of kc steps of the inner dimension (pc)
//	    pack op(B)[pc:pc+kc, jc:jc+nc] into panels nr columns wide   (stays in L2/L3)
//	    for each block of mc rows of C (ic)
//	      pack op(A)[ic:ic+mc, pc:pc+kc] into panels mr rows high     (stays in L2)
//	      for each B panel (jr), for each A panel (ir): micro-kernel  (B panel stays in L1)
//
// The kernel keeps an mr×nr tile of C in registers for all kc steps: each element of A it
// broadcasts feeds nr/8 (AVX2) or nr/16 (AVX-512) vector fused multiply-adds and each vector of B
// feeds mr of them, where the row kernels of gemm.go load and store a vector of C for every
// multiply-add. Packing makes both operands contiguous in the order the kernel reads them, and
// zero-pads the panels at the edges of A and B so that the kernel always runs whole tiles; edge
// tiles are computed into a small buffer and only their valid part is added to C.
//
// An operand whose rows already have the kernel's layout is read in place instead of being packed
// when it is reused too little for packing to pay: a transposed A (mr consecutive rows of op(A)
// are mr consecutive floats) and a plain B (nr consecutive columns).

// sgemmKernel is a register-blocked micro-kernel: fn computes the mr×nr tile
// C = alpha·Ã·B̃ + beta·C over kc steps, step l reading mr floats of Ã at a+l·lda and nr floats of
// B̃ at b+l·ldb (strides in elements); with beta == 0 it does not read C.
type sgemmKernel struct {
	name   string
	mr, nr int
	fn     func(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)
}

// fastKernel is the kernel Sgemm uses, the best this CPU runs, or nil when there is none. It is
// chosen once, at start-up.
var fastKernel = firstKernel()

func firstKernel() *sgemmKernel {
	if ks := sgemmKernels(); len(ks) > 0 {
		return ks[0]
	}
	return nil
}

// Block sizes. A kc×nr panel of B (16 KiB at 256×16, 32 KiB at 256×32) stays in the 48 KiB L1
// while the kernel sweeps an mc×kc block of A (144 KiB) in L2; mc is a multiple of both kernels'
// mr. Blocks are balanced (blockSize), so that k = 288 runs as two passes of 144 and not as 256
// and 32.
const (
	sgemmKC = 256
	sgemmMC = 144
	sgemmNC = 2048

	// sgemmParFlops is the least work (2·m·n·k) worth a goroutine of its own: starting and
	// joining one costs a few microseconds, about 200k flops of the kernel.
	sgemmParFlops = 1 << 20

	// sgemmReuse is how many times a B panel must be reused (A panels of mr rows over the same
	// columns) before copying it into a packed panel can pay, when it can be read in place.
	sgemmReuse = 4

	// sgemmAlias is the row stride (in floats: 4 KiB, the span of one way of the 48 KiB
	// 12-way L1) at which every row of a B panel read in place falls into the same cache sets.
	// Measured: with such strides (the 32×32 layers, n = 1024) a reused B panel read in place
	// runs at half the speed of a packed one; with others (n = 128, 256, 200) in place is as fast
	// or up to 10% faster.
	sgemmAlias = 1024

	// sgemmFar is the row stride (in floats: 8 KiB) from which every row of a B panel read in
	// place lies in a page of its own, and sgemmReuseFar the reuse from which packing such a
	// panel pays. Measured on the GEMMs of Winograd convolutions, whose B rows are 16 tiles
	// apart: with 256 or 512 rows of C packing is 1.2-1.4× faster, with 64 reading in place.
	sgemmFar      = 2048
	sgemmReuseFar = 16
)

// sgemmScratch is one goroutine's packing space. The pool keeps the buffers across calls, so
// that the steady state allocates nothing.
type sgemmScratch struct {
	a, b, tile []float32
}

var sgemmPool = sync.Pool{New: func() any { return new(sgemmScratch) }}

func (s *sgemmScratch) grow(na, nb, nt int) {
	if cap(s.a) < na {
		s.a = make([]float32, na)
	}
	if cap(s.b) < nb {
		s.b = make([]float32, nb)
	}
	if cap(s.tile) < nt {
		s.tile = make([]float32, nt)
	}
	s.a, s.b, s.tile = s.a[:na], s.b[:nb], s.tile[:nt]
}

// blockSize splits n (> 0) into the fewest blocks of at most most (a multiple of unit), all of
// equal size rounded up to a multiple of unit.
func blockSize(n, most, unit int) int {
	nb := (n + most - 1) / most
	bs := (n + nb - 1) / nb
	return (bs + unit - 1) / unit * unit
}

// fits reports whether a rows×cols matrix with leading dimension ld fits in l elements.
func fits(l, rows, cols, ld int) bool {
	if ld < max(cols, 1) {
		return false
	}
	return rows == 0 || cols == 0 || (rows-1)*ld+cols <= l
}

// storedShapes returns the rows and columns of A and B as stored, for op(A) m×k and op(B)
// k×n: a transposed operand is stored the other way round.
func storedShapes(tA, tB bool, m, n, k int) (ar, ac, br, bc int) {
	ar, ac, br, bc = m, k, k, n
	if tA {
		ar, ac = k, m
	}
	if tB {
		br, bc = n, k
	}
	return ar, ac, br, bc
}

// gemmArgsOK checks Sgemm's arguments as BLAS would: the assembly kernels read through raw
// pointers, so every element they may touch must lie inside the slices.
func gemmArgsOK(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	if m < 0 || n < 0 || k < 0 {
		return false
	}
	ar, ac, br, bc := storedShapes(tA, tB, m, n, k)
	return fits(len(a), ar, ac, lda) && fits(len(b), br, bc, ldb) && fits(len(c), m, n, ldc)
}

// scaleC sets C = beta·C; beta 0 clears C whatever it held.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(ci)
		case 1:
		default:
			for j := range ci {
				ci[j] *= beta
			}
		}
	}
}

// sgemm computes C = alpha·op(A)·op(B) + beta·C (the arguments of Sgemm) with kern. It returns
// false, having done nothing, when kern is nil or the arguments are invalid, so that the caller's
// fallback reports the error. With par set, C is split between goroutines by whole panels: along
// its columns when it is wider than high (each goroutine then packs all of A, the smaller
// operand), else along its rows.
func sgemm(kern *sgemmKernel, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, par bool) bool {
	if kern == nil || !gemmArgsOK(tA, tB, m, n, k, a, lda, b, ldb, c, ldc) {
		return false
	}
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return true
	}
	if !par || parallel.Workers() == 1 || 2*m*n*k < 2*sgemmParFlops {
		s := sgemmPool.Get().(*sgemmScratch)
		sgemmSerial(kern, s, tA, tB, 0, m, 0, n, k, alpha, a, lda, b, ldb, nil, beta, c, ldc)
		sgemmPool.Put(s)
		return true
	}
	sgemmParallel(kern, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return true
}

// sgemmParallel is sgemm split across goroutines. It is a function of its own because its
// closures move the arguments to the heap, which the serial path should not pay for.
func sgemmParallel(kern *sgemmKernel, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	run := func(m0, m1, n0, n1 int) {
		s := sgemmPool.Get().(*sgemmScratch)
		sgemmSerial(kern, s, tA, tB, m0, m1, n0, n1, k, alpha, a, lda, b, ldb, nil, beta, c, ldc)
		sgemmPool.Put(s)
	}
	mp, np := (m+kern.mr-1)/kern.mr, (n+kern.nr-1)/kern.nr
	if np >= 2 && (n >= m || mp < 2) {
		per := max(1, sgemmParFlops/(2*m*kern.nr*k))
		parallel.For(np, per, func(_, lo, hi int) { run(0, m, lo*kern.nr, min(hi*kern.nr, n)) })
		return
	}
	per := max(1, sgemmParFlops/(2*kern.mr*n*k))
	parallel.For(mp, per, func(_, lo, hi int) { run(lo*kern.mr, min(hi*kern.mr, m), 0, n) })
}

// sgemmSerial computes rows [m0, m1) and columns [n0, n1) of C on the calling goroutine. When
// bRows is not nil, B is not transposed and its row l starts at b[bRows[l]] (ldb is unused).
func sgemmSerial(kern *sgemmKernel, s *sgemmScratch, tA, tB bool, m0, m1, n0, n1, k int, alpha float32, a []float32, lda int, b []float32, ldb int, bRows []int, beta float32, c []float32, ldc int) {
	mr, nr := kern.mr, kern.nr
	kc := blockSize(k, sgemmKC, 1)
	mc := blockSize(m1-m0, sgemmMC, mr)
	nc := blockSize(n1-n0, sgemmNC, nr)
	s.grow(mc*kc, nc*kc, mr*nr)
	// In place: a transposed A always (measured as fast as packed, up to 1.7× faster for
	// 4608×128×512, since packing it is a copy that gains nothing), a plain B when few A panels
	// reuse it or its rows do not alias in cache.
	directA := tA
	directB := bRows == nil && !tB && !packsPlainB(kern, m1-m0, ldb)
	for jc := n0; jc < n1; jc += nc {
		nn := min(nc, n1-jc)
		for pc := 0; pc < k; pc += kc {
			kk := min(kc, k-pc)
			bet := beta
			if pc > 0 {
				bet = 1 // later passes add to the first one's result
			}
			for jr := 0; jr < nn; jr += nr {
				nrr := min(nr, nn-jr)
				switch {
				case bRows != nil:
					packBRows(s.b[jr*kk:(jr+nr)*kk], b, bRows, pc, kk, jc+jr, nrr, nr)
				case !directB || nrr < nr:
					packB(s.b[jr*kk:(jr+nr)*kk], tB, b, ldb, pc, kk, jc+jr, nrr, nr)
				}
			}
			for ic := m0; ic < m1; ic += mc {
				mm := min(mc, m1-ic)
				for ir := 0; ir < mm; ir += mr {
					if mrr := min(mr, mm-ir); !directA || mrr < mr {
						packA(s.a[ir*kk:(ir+mr)*kk], tA, a, lda, ic+ir, mrr, pc, kk, mr)
					}
				}
				for jr := 0; jr < nn; jr += nr {
					nrr := min(nr, nn-jr)
					bp, bs := &s.b[jr*kk], nr
					if directB && nrr == nr {
						bp, bs = &b[pc*ldb+jc+jr], ldb
					}
					for ir := 0; ir < mm; ir += mr {
						mrr := min(mr, mm-ir)
						ap, as := &s.a[ir*kk], mr
						if directA && mrr == mr {
							ap, as = &a[pc*lda+ic+ir], lda
						}
						if mrr == mr && nrr == nr {
							kern.fn(kk, ap, as, bp, bs, &c[(ic+ir)*ldc+jc+jr], ldc, alpha, bet)
							continue
						}
						// Edge tile: compute it whole into the buffer, then add its valid part.
						kern.fn(kk, ap, as, bp, bs, &s.tile[0], nr, alpha, 0)
						for r := 0; r < mrr; r++ {
							ci := c[(ic+ir+r)*ldc+jc+jr:][:nrr]
							ti := s.tile[r*nr:][:nrr]
							if bet == 0 {
								copy(ci, ti)
								continue
							}
							for j, t := range ti {
								ci[j] = bet*ci[j] + t
							}
						}
					}
				}
			}
		}
	}
}

// packsPlainB reports whether sgemmSerial packs a B that is not transposed, for m rows of C and
// B's row stride ldb, rather than reading it in place.
func packsPlainB(kern *sgemmKernel, m, ldb int) bool {
	panels := (m + kern.mr - 1) / kern.mr
	return panels > sgemmReuse && ldb%sgemmAlias == 0 || panels > sgemmReuseFar && ldb >= sgemmFar
}

// packA copies the rows [i, i+rows) (rows ≤ mr) and steps [p, p+kk) of op(A) into dst as one
// panel, step-major: dst[l·mr+r] = op(A)[i+r][p+l], with rows past the edge zero.
func packA(dst []float32, tA bool, a []float32, lda, i, rows, p, kk, mr int) {
	dst = dst[:kk*mr]
	if tA {
		// op(A)[i+r][p+l] = a[(p+l)·lda+i+r]: a contiguous run of rows per step.
		for l := 0; l < kk; l++ {
			d := dst[l*mr : (l+1)*mr]
			copy(d, a[(p+l)*lda+i:][:rows])
			clear(d[rows:])
		}
		return
	}
	// op(A)[i+r][p+l] = a[(i+r)·lda+p+l]: rows of a are interleaved.
	if rows == mr && mr == 8 {
		transpose8(dst, 8, a[i*lda+p:], lda, kk)
		return
	}
	if rows == mr && mr == 6 {
		s0, s1, s2 := a[i*lda+p:][:kk], a[(i+1)*lda+p:][:kk], a[(i+2)*lda+p:][:kk]
		s3, s4, s5 := a[(i+3)*lda+p:][:kk], a[(i+4)*lda+p:][:kk], a[(i+5)*lda+p:][:kk]
		for l := range s0 {
			d := (*[6]float32)(dst[l*6:])
			d[0], d[1], d[2], d[3], d[4], d[5] = s0[l], s1[l], s2[l], s3[l], s4[l], s5[l]
		}
		return
	}
	for r := 0; r < mr; r++ {
		if r >= rows {
			for l := 0; l < kk; l++ {
				dst[l*mr+r] = 0
			}
			continue
		}
		for l, v := range a[(i+r)*lda+p:][:kk] {
			dst[l*mr+r] = v
		}
	}
}

// packB copies the columns [j, j+cols) (cols ≤ nr) and steps [p, p+kk) of op(B) into dst as one
// panel, step-major: dst[l·nr+c] = op(B)[p+l][j+c], with columns past the edge zero.
func packB(dst []float32, tB bool, b []float32, ldb, p, kk, j, cols, nr int) {
	dst = dst[:kk*nr]
	if !tB {
		// op(B)[p+l][j+c] = b[(p+l)·ldb+j+c]: one contiguous run per step.
		for l := 0; l < kk; l++ {
			d := dst[l*nr : (l+1)*nr]
			copy(d, b[(p+l)*ldb+j:][:cols])
			clear(d[cols:])
		}
		return
	}
	// op(B)[p+l][j+c] = b[(j+c)·ldb+p+l]: columns of op(B) are rows of b, transposed eight at a
	// time.
	c := 0
	for ; c+8 <= cols; c += 8 {
		transpose8(dst[c:], nr, b[(j+c)*ldb+p:], ldb, kk)
	}
	for ; c < cols; c++ {
		for l, v := range b[(j+c)*ldb+p:][:kk] {
			dst[l*nr+c] = v
		}
	}
	if cols < nr {
		for l := 0; l < kk; l++ {
			clear(dst[l*nr+cols : (l+1)*nr])
		}
	}
}

// transpose8 sets dst[l·ldd+c] = src[c·lds+l] for c < 8 and l < kk (> 0): eight rows of src
// become eight-float pieces of kk rows of dst.
func transpose8(dst []float32, ldd int, src []float32, lds, kk int) {
	dst = dst[:(kk-1)*ldd+8] // the bounds the assembly relies on
	src = src[:7*lds+kk]
	for l := transpose8Blocks(dst, ldd, src, lds, kk); l < kk; l++ {
		d := (*[8]float32)(dst[l*ldd:])
		d[0], d[1], d[2], d[3] = src[l], src[lds+l], src[2*lds+l], src[3*lds+l]
		d[4], d[5], d[6], d[7] = src[4*lds+l], src[5*lds+l], src[6*lds+l], src[7*lds+l]
	}
}

// GEMMKernel names the matrix-product code this process runs, for the provenance of its
// results: the assembly micro-kernel chosen for this CPU or the portable Go loops, and the
// external BLAS of the build, when it has one, which takes the products the kernel does not.
func GEMMKernel() string {
	name := "go (no assembly kernel for this CPU)"
	if fastKernel != nil {
		name = fmt.Sprintf("%s assembly, %dx%d tiles", fastKernel.name, fastKernel.mr, fastKernel.nr)
	}
	if externalBLAS != "" {
		name += ", " + externalBLAS + " for the rest"
	}
	return name
}
