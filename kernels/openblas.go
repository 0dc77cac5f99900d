//go:build openblas

package kernels

import "github.com/ssfusion/ssfusion/kernels/internal/openblas"

// sgemmExternal computes C = alpha·op(A)·op(B) + beta·C on row-major matrices with OpenBLAS's
// cblas_sgemm and returns true. Sgemm calls it for the products its assembly kernels do not
// take: every product on a CPU without AVX2 and FMA, matrix-vector products elsewhere. op
// transposes when tA or tB is set, C is m×n and the inner dimension is k, as in BLAS Sgemm.
// Slices too short for their shapes panic.
//
// OpenBLAS runs on one thread unless OPENBLAS_NUM_THREADS says otherwise: Go already keeps every
// core busy, and several worker processes share the machine (see package openblas). The cgo call
// lives in kernels/internal/openblas because a package using cgo cannot also hold Go assembly,
// which kernels does.
func sgemmExternal(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	openblas.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return true
}

// openblasThreads reports how many threads OpenBLAS uses (for tests and diagnostics).
func openblasThreads() int { return openblas.Threads() }

// externalBLAS names the external BLAS of this build, "" for none.
const externalBLAS = "openblas"
