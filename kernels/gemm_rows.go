package kernels

// gemmRows computes C = alpha·A·B + beta·C on the calling goroutine, like Sgemm with A (m×k) and
// B (k×n) not transposed, except that row l of B is b[rows[l] : rows[l]+n]: B's rows may lie
// anywhere in b, and overlap. It returns false, having done nothing, when there is no assembly
// kernel or the arguments do not fit, so that the caller can take another way.
//
// Overlapping rows let a stride-1 convolution skip most of its column matrix: rows of kernel taps
// in the same column of the kernel are one shifted plane read at offsets a row of the image apart
// (convGeom.shiftedPlanes).
func gemmRows(m, n, k int, alpha float32, a []float32, lda int, b []float32, rows []int, beta float32, c []float32, ldc int) bool {
	kern := fastKernel
	if kern == nil || m < 0 || n < 0 || k < 1 || len(rows) != k || !fits(len(a), m, k, lda) || !fits(len(c), m, n, ldc) {
		return false
	}
	for _, r := range rows {
		if r < 0 || r+n > len(b) {
			return false
		}
	}
	if m == 0 || n == 0 {
		return true
	}
	s := sgemmPool.Get().(*sgemmScratch)
	sgemmSerial(kern, s, false, false, 0, m, 0, n, k, alpha, a, lda, b, 0, rows, beta, c, ldc)
	sgemmPool.Put(s)
	return true
}

// packBRows is packB for a B whose row l starts at b[rows[l]]. Whole panels of the kernels'
// widths are copied as arrays, which the compiler does with a few vector moves in place of a call
// to memmove per row.
func packBRows(dst, b []float32, rows []int, p, kk, j, cols, nr int) {
	dst = dst[:kk*nr]
	rs := rows[p : p+kk]
	switch {
	case cols == 32 && nr == 32:
		for l, r := range rs {
			*(*[32]float32)(dst[l*32:]) = *(*[32]float32)(b[r+j:])
		}
		return
	case cols == 16 && nr == 16:
		for l, r := range rs {
			*(*[16]float32)(dst[l*16:]) = *(*[16]float32)(b[r+j:])
		}
		return
	}
	for l := 0; l < kk; l++ {
		d := dst[l*nr : (l+1)*nr]
		copy(d, b[rows[p+l]+j:][:cols])
		clear(d[cols:])
	}
}
