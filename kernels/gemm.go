package kernels

import (
	"github.com/ssfusion/ssfusion/internal/parallel"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major float32 matrices, like BLAS Sgemm,
// where op transposes when tA or tB is set; C is m×n and the inner dimension is k. When par is
// set the work is split across cores; callers that are already parallel pass false. With beta 0,
// C is written without being read. Slices too short for their shapes and leading dimensions
// panic.
//
// It goes, in order, to the register-blocked assembly kernels of sgemm.go when the CPU has AVX2
// and FMA (6-12× the speed of the pure-Go paths on the shapes of the networks, see
// BenchmarkGemm), to an external BLAS when the build has one (sgemmExternal: the openblas build
// tag), and otherwise to gemmGo. The kernels come first even in the openblas build because
// single-threaded OpenBLAS runs at a third to a half of their speed on every shape of the
// networks; OpenBLAS serves CPUs without AVX2 and the one shape family the kernels decline: fewer
// rows than a kernel tile with a transposed B (a matrix-vector product, 2× slower), where packing
// B costs more than the product itself.
func Sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, par bool) {
	if kern := fastKernel; kern != nil && !(tB && m < kern.mr) &&
		sgemm(kern, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, par) {
		return
	}
	if sgemmExternal(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	gemmGo(FallbackBLAS(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, par)
}

// FallbackBLAS returns the BLAS whose Sgemm takes the products that neither the assembly kernels
// nor the build's external BLAS take, and that the pure-Go row kernels do not suit. Package nets
// points it at Gorgonia's BLAS, so that a BLAS installed with gorgonia.Use serves these products
// as it serves Gorgonia's own. Set it before the first product (nets does so when it is
// initialised): it is read, without locking, by every product that takes the pure-Go path.
var FallbackBLAS = func() blas.Float32 { return gonum.Implementation{} }

// gemmGo is Sgemm without the assembly kernels, on bl.
//
// With Gonum's pure-Go BLAS the shapes of the networks run 1.3-2× faster as long row operations
// — one SIMD axpy over a whole row of C per element of A, or one dot product per element of C —
// than through Gonum's Sgemm, which cuts every matrix into 64×64 blocks and so calls its kernels
// on short vectors. Small shapes, and any other BLAS, go to bl.Sgemm. When par is set the rows of
// C are split across cores.
func gemmGo(bl blas.Float32, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, par bool) {
	impl, native := bl.(gonum.Implementation)
	switch {
	case native && !tB && n >= 128:
		rows := func(lo, hi int) { axpyRows(impl, tA, lo, hi, n, k, alpha, a, lda, b, ldb, beta, c, ldc) }
		if par {
			parallel.For(m, 4, func(_, lo, hi int) { rows(lo, hi) })
		} else {
			rows(0, m)
		}
	case native && !tA && tB && k >= 64:
		rows := func(lo, hi int) { dotRows(impl, lo, hi, n, k, alpha, a, lda, b, ldb, beta, c, ldc) }
		if par {
			parallel.For(m, 4, func(_, lo, hi int) { rows(lo, hi) })
		} else {
			rows(0, m)
		}
	default:
		ta, tb := blas.NoTrans, blas.NoTrans
		if tA {
			ta = blas.Trans
		}
		if tB {
			tb = blas.Trans
		}
		bl.Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
}

// cacheFloats is how much of B the row kernels keep hot while they sweep the rows of C: about
// half of a typical 512 KiB L2.
const cacheFloats = 64 << 10

// axpyRows computes rows [lo, hi) of C = alpha·op(A)·B + beta·C as C_i += alpha·A(i,l)·B_l.
// B's rows are visited in blocks small enough to stay in cache across the rows of C.
func axpyRows(impl gonum.Implementation, tA bool, lo, hi, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if hi > lo {
		scaleC(hi-lo, n, beta, c[lo*ldc:], ldc)
	}
	kb := max(1, cacheFloats/n)
	for l0 := 0; l0 < k; l0 += kb {
		l1 := min(l0+kb, k)
		for i := lo; i < hi; i++ {
			ci := c[i*ldc : i*ldc+n]
			for l := l0; l < l1; l++ {
				var av float32
				if tA {
					av = a[l*lda+i]
				} else {
					av = a[i*lda+l]
				}
				if av != 0 {
					impl.Saxpy(n, alpha*av, b[l*ldb:l*ldb+n], 1, ci, 1)
				}
			}
		}
	}
}

// dotRows computes rows [lo, hi) of C = alpha·A·Bᵀ + beta·C as one dot product per element, with
// B's rows visited in cache-sized blocks.
func dotRows(impl gonum.Implementation, lo, hi, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	jb := max(1, cacheFloats/k)
	for j0 := 0; j0 < n; j0 += jb {
		j1 := min(j0+jb, n)
		for i := lo; i < hi; i++ {
			ai := a[i*lda : i*lda+k]
			ci := c[i*ldc : i*ldc+n]
			for j := j0; j < j1; j++ {
				d := alpha * impl.Sdot(k, ai, 1, b[j*ldb:j*ldb+k], 1)
				if beta == 0 {
					ci[j] = d
				} else {
					ci[j] = beta*ci[j] + d
				}
			}
		}
	}
}
