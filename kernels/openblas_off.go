//go:build !openblas

package kernels

// sgemmExternal is the matrix product of an external BLAS; without the openblas build
// tag there is none, and Sgemm uses its own kernels.
func sgemmExternal(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	return false
}

// externalBLAS names the external BLAS of this build, "" for none.
const externalBLAS = ""
