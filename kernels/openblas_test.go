//go:build openblas

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// openblasPad is the value left in the padding between rows of a strided matrix: any change to it
// means a write outside the matrix.
const openblasPad = -777

// openblasMatrix returns a random rows×cols matrix stored with leading dimension ld, its padding
// filled with openblasPad.
func openblasMatrix(r *rand.Rand, rows, cols, ld int) []float32 {
	v := make([]float32, rows*ld)
	for i := range v {
		if i%ld < cols {
			v[i] = float32(r.Float64()*2 - 1)
		} else {
			v[i] = openblasPad
		}
	}
	return v
}

// openblasReference computes alpha·op(A)·op(B) + beta·C in float64, and for each element the sum
// of the magnitudes of its terms, which bounds the rounding error float32 arithmetic may make.
func openblasReference(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (want, mag []float64) {
	want, mag = make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var sum, abs float64
			for l := 0; l < k; l++ {
				ai, bi := i*lda+l, l*ldb+j
				if tA {
					ai = l*lda + i
				}
				if tB {
					bi = j*ldb + l
				}
				av, bv := a[ai], b[bi]
				p := float64(av) * float64(bv)
				sum += p
				abs += math.Abs(p)
			}
			want[i*n+j] = float64(alpha)*sum + float64(beta)*float64(c[i*ldc+j])
			mag[i*n+j] = math.Abs(float64(alpha))*abs + math.Abs(float64(beta)*float64(c[i*ldc+j]))
		}
	}
	return want, mag
}

// TestOpenblasSgemmExternal compares cblas_sgemm, through sgemmExternal, with a float64 reference
// for every transpose combination, padded leading dimensions and several alpha and beta, and
// checks that the padding between rows is never written.
func TestOpenblasSgemmExternal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 129, 65}, {64, 300, 33}, {33, 16, 576}, {200, 20, 800}}
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, ab := range [][2]float32{{1, 0}, {1, 1}, {-1.5, 0.5}} {
					alpha, beta := ab[0], ab[1]
					name := fmt.Sprintf("%dx%dx%d/tA=%v/tB=%v/alpha=%v/beta=%v", m, n, k, tA, tB, alpha, beta)
					ar, ac, br, bc := m, k, k, n
					if tA {
						ar, ac = k, m
					}
					if tB {
						br, bc = n, k
					}
					lda, ldb, ldc := ac+1, bc+3, n+2
					a, b, c := openblasMatrix(r, ar, ac, lda), openblasMatrix(r, br, bc, ldb), openblasMatrix(r, m, n, ldc)
					want, mag := openblasReference(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					if !sgemmExternal(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
						t.Fatalf("%s: sgemmExternal returned false in the openblas build", name)
					}
					// Recursive summation of k products in float32 errs by at most about
					// (k+2)·2⁻²⁴ times the sum of the magnitudes; blocked kernels do better.
					tol := float64(k+2) * math.Pow(2, -24)
					for i := 0; i < m; i++ {
						for j := 0; j < ldc; j++ {
							got := c[i*ldc+j]
							if j >= n {
								if got != openblasPad {
									t.Fatalf("%s: padding C[%d][%d] changed to %v", name, i, j, got)
								}
								continue
							}
							w, bound := want[i*n+j], tol*mag[i*n+j]+1e-30
							if d := math.Abs(float64(got) - w); d > bound {
								t.Fatalf("%s: C[%d][%d] = %v, want %v (error %.3g > bound %.3g)", name, i, j, got, w, d, bound)
							}
						}
					}
				}
			}
		}
	}
}

// TestOpenblasSgemmEmpty checks that empty products touch nothing they should not: no pointer is
// taken of an empty (even nil) slice, and k = 0 leaves C = beta·C.
func TestOpenblasSgemmEmpty(t *testing.T) {
	for _, sh := range [][3]int{{0, 0, 0}, {0, 4, 3}, {4, 0, 3}} {
		if !sgemmExternal(false, false, sh[0], sh[1], sh[2], 1, nil, max(1, sh[2]), nil, max(1, sh[1]), 0, nil, max(1, sh[1])) {
			t.Fatalf("%v: returned false", sh)
		}
	}
	for _, beta := range []float32{0, 1, 0.5} {
		c := []float32{1, 2, float32(math.NaN()), openblasPad, 4, 8, 16, openblasPad}
		if !sgemmExternal(true, true, 2, 3, 0, 1, nil, 2, nil, 1, beta, c, 4) {
			t.Fatalf("k=0, beta=%v: returned false", beta)
		}
		want := []float32{beta * 1, beta * 2, float32(math.NaN()), openblasPad, beta * 4, beta * 8, beta * 16, openblasPad}
		if beta == 0 {
			want[2] = 0 // beta = 0 overwrites C, NaNs included, as BLAS does
		}
		for i := range c {
			if c[i] != want[i] && !(math.IsNaN(float64(c[i])) && math.IsNaN(float64(want[i]))) {
				t.Errorf("k=0, beta=%v: C = %v, want %v", beta, c, want)
				break
			}
		}
	}
}

// TestOpenblasBetaZeroOverwritesNaN checks that beta = 0 ignores what C held, NaN included, as the
// BLAS specification (and Sgemm's callers, which reuse buffers) require.
func TestOpenblasBetaZeroOverwritesNaN(t *testing.T) {
	a, b := []float32{1, 2, 3, 4}, []float32{1, 0, 0, 1}
	c := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.NaN()), 5}
	sgemmExternal(false, false, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2)
	for i, w := range a {
		if c[i] != w {
			t.Fatalf("C = %v, want %v", c, a)
		}
	}
}

// TestOpenblasShortSlicePanics checks that a slice too short for its shape panics in Go instead of
// letting C read or write past it.
func TestOpenblasShortSlicePanics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b, c []float32
		lda     int
	}{
		{"short a", make([]float32, 5), make([]float32, 6), make([]float32, 6), 3},
		{"short c", make([]float32, 6), make([]float32, 6), make([]float32, 3), 3},
		{"lda below columns", make([]float32, 6), make([]float32, 6), make([]float32, 6), 2},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			sgemmExternal(false, false, 2, 2, 3, 1, tc.a, tc.lda, tc.b, 2, 0, tc.c, 2)
		}()
	}
}

// TestOpenblasOneThread checks the thread default: one OpenBLAS thread unless OPENBLAS_NUM_THREADS
// chose otherwise (OpenBLAS then applied it itself when it loaded).
func TestOpenblasOneThread(t *testing.T) {
	c := make([]float32, 1)
	sgemmExternal(false, false, 1, 1, 1, 1, []float32{2}, 1, []float32{3}, 1, 0, c, 1)
	if c[0] != 6 {
		t.Fatalf("1×1 product = %v, want 6", c[0])
	}
	if v, set := os.LookupEnv("OPENBLAS_NUM_THREADS"); set {
		t.Skipf("OPENBLAS_NUM_THREADS=%s is set; OpenBLAS uses %d thread(s)", v, openblasThreads())
	}
	if got := openblasThreads(); got != 1 {
		t.Fatalf("OpenBLAS uses %d threads, want 1", got)
	}
}
