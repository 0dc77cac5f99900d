package nets

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestGemmMatchesSgemm compares gemm with Gonum's Sgemm over shapes that take each of its paths,
// with and without transposes, scaling and row splitting.
func TestGemmMatchesSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][3]int{{3, 5, 7}, {5, 130, 9}, {9, 300, 70}, {4, 64, 200}, {17, 129, 65}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, beta := range []float32{0, 1, 0.5} {
					for _, par := range []bool{false, true} {
						name := fmt.Sprintf("%dx%dx%d/tA=%v/tB=%v/beta=%v/par=%v", m, n, k, tA, tB, beta, par)
						a, b, c := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
						// Padded leading dimensions check the strides.
						lda, ldb, ldc := k+1, n+2, n+3
						if tA {
							lda = m + 1
						}
						if tB {
							ldb = k + 2
						}
						pad := func(v []float32, rows, cols, ld int) []float32 {
							out := make([]float32, rows*ld)
							for i := 0; i < rows; i++ {
								copy(out[i*ld:i*ld+cols], v[i*cols:(i+1)*cols])
							}
							return out
						}
						ar, ac := m, k
						if tA {
							ar, ac = k, m
						}
						br, bc := k, n
						if tB {
							br, bc = n, k
						}
						pa, pb := pad(a, ar, ac, lda), pad(b, br, bc, ldb)
						got, want := pad(c, m, n, ldc), pad(c, m, n, ldc)
						gemm(tA, tB, m, n, k, 1.5, pa, lda, pb, ldb, beta, got, ldc, par)
						ta, tb := blas.NoTrans, blas.NoTrans
						if tA {
							ta = blas.Trans
						}
						if tB {
							tb = blas.Trans
						}
						gonum.Implementation{}.Sgemm(ta, tb, m, n, k, 1.5, pa, lda, pb, ldb, beta, want, ldc)
						assertClose(t, name, got, want)
					}
				}
			}
		}
	}
}

func BenchmarkGemm(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{
		{"conv-fwd-16x1024x144", false, false, 16, 1024, 144},
		{"conv-dx-144x1024x16", true, false, 144, 1024, 16},
		{"conv-dw-16x144x1024", false, true, 16, 144, 1024},
		{"decoder-fwd-700x10000x200", false, true, 700, 10000, 200},
		{"decoder-dx-700x200x10000", false, false, 700, 200, 10000},
		{"decoder-dw-10000x200x700", true, false, 10000, 200, 700},
	} {
		a, bb, cc := randSlice(r, c.m*c.k), randSlice(r, c.k*c.n), randSlice(r, c.m*c.n)
		lda, ldb := c.k, c.n
		if c.tA {
			lda = c.m
		}
		if c.tB {
			ldb = c.k
		}
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				gemm(c.tA, c.tB, c.m, c.n, c.k, 1, a, lda, bb, ldb, 0, cc, c.n, true)
			}
			b.ReportMetric(float64(2*c.m*c.n*c.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
		b.Run(c.name+"-sgemm", func(b *testing.B) {
			ta, tb := blas.NoTrans, blas.NoTrans
			if c.tA {
				ta = blas.Trans
			}
			if c.tB {
				tb = blas.Trans
			}
			for i := 0; i < b.N; i++ {
				gonum.Implementation{}.Sgemm(ta, tb, c.m, c.n, c.k, 1, a, lda, bb, ldb, 0, cc, c.n)
			}
			b.ReportMetric(float64(2*c.m*c.n*c.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}
