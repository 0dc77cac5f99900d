package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ssfusion/ssfusion/internal/parallel"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestGemmMatchesSgemm compares Sgemm with Gonum's over shapes that take each of its paths,
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
						ar, ac, br, bc := storedShapes(tA, tB, m, n, k)
						pa, pb := pad(a, ar, ac, lda), pad(b, br, bc, ldb)
						got, want := pad(c, m, n, ldc), pad(c, m, n, ldc)
						Sgemm(tA, tB, m, n, k, 1.5, pa, lda, pb, ldb, beta, got, ldc, par)
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

// gemmBenchShapes are the products of a training step (batch 32 for the convolutional nets,
// 20×35 tokens for the LSTM), with the par flag their callers pass: ResNet-20's first two stages
// and VGG-16's 32×32 layers run one image per core (serial GEMMs), deeper layers group images
// side by side and split one GEMM across cores.
var gemmBenchShapes = []struct {
	name    string
	tA, tB  bool
	m, n, k int
	par     bool
}{
	{"resnet20-conv1-fwd-16x1024x27", false, false, 16, 1024, 27, false},
	{"resnet20-s1-fwd-16x1024x144", false, false, 16, 1024, 144, false},
	{"resnet20-s1-dx-144x1024x16", true, false, 144, 1024, 16, false},
	{"resnet20-s1-dw-16x144x1024", false, true, 16, 144, 1024, false},
	{"resnet20-s2-fwd-32x256x288", false, false, 32, 256, 288, false},
	{"resnet20-s2-dx-288x256x32", true, false, 288, 256, 32, false},
	{"resnet20-s2-dw-32x288x256", false, true, 32, 288, 256, false},
	{"resnet20-s3-fwd-64x256x576", false, false, 64, 256, 576, true},
	{"resnet20-s3-dx-576x256x64", true, false, 576, 256, 64, true},
	{"resnet20-s3-dw-64x576x256", false, true, 64, 576, 256, true},
	{"vgg16-c64-fwd-64x1024x576", false, false, 64, 1024, 576, false},
	{"vgg16-c64-dx-576x1024x64", true, false, 576, 1024, 64, false},
	{"vgg16-c64-dw-64x576x1024", false, true, 64, 576, 1024, false},
	{"vgg16-c128-fwd-128x256x1152", false, false, 128, 256, 1152, false},
	{"vgg16-c256-fwd-256x256x2304", false, false, 256, 256, 2304, true},
	{"vgg16-c256-dx-2304x256x256", true, false, 2304, 256, 256, true},
	{"vgg16-c256-dw-256x2304x256", false, true, 256, 2304, 256, true},
	{"vgg16-c512-fwd-512x128x4608", false, false, 512, 128, 4608, true},
	{"vgg16-c512-dx-4608x128x512", true, false, 4608, 128, 512, true},
	{"vgg16-c512-dw-512x4608x128", false, true, 512, 4608, 128, true},
	{"lstm-step-20x800x200", false, true, 20, 800, 200, true},
	{"lstm-step-dx-20x200x800", false, false, 20, 200, 800, true},
	{"lstm-ih-fwd-700x800x200", false, true, 700, 800, 200, true},
	{"lstm-dw-800x200x700", true, false, 800, 200, 700, true},
	{"decoder-fwd-700x10000x200", false, true, 700, 10000, 200, true},
	{"decoder-dx-700x200x10000", false, false, 700, 200, 10000, true},
	{"decoder-dw-10000x200x700", true, false, 10000, 200, 700, true},
}

// BenchmarkGemm times every product of gemmBenchShapes with the pure-Go paths of Sgemm ("go",
// what Sgemm runs without an assembly kernel), Gonum's Sgemm, and each assembly kernel this CPU
// runs, and reports GFLOP/s (2·m·n·k per product).
func BenchmarkGemm(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range gemmBenchShapes {
		a, bb, cc := randSlice(r, c.m*c.k), randSlice(r, c.k*c.n), randSlice(r, c.m*c.n)
		lda, ldb := c.k, c.n
		if c.tA {
			lda = c.m
		}
		if c.tB {
			ldb = c.k
		}
		flops := func(b *testing.B) {
			b.ReportMetric(float64(2*c.m*c.n*c.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		}
		b.Run(c.name+"/go", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				gemmGo(gonum.Implementation{}, c.tA, c.tB, c.m, c.n, c.k, 1, a, lda, bb, ldb, 0, cc, c.n, c.par)
			}
			flops(b)
		})
		b.Run(c.name+"/sgemm", func(b *testing.B) {
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
			flops(b)
		})
		for _, kern := range sgemmKernels() {
			b.Run(c.name+"/"+kern.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					sgemm(kern, c.tA, c.tB, c.m, c.n, c.k, 1, a, lda, bb, ldb, 0, cc, c.n, c.par)
				}
				flops(b)
			})
		}
	}
}

// gemmCase is one product for the reference tests, with its matrices stored row-major with
// leading dimensions at least as large as their rows.
type gemmCase struct {
	tA, tB        bool
	m, n, k       int
	alpha, beta   float32
	lda, ldb, ldc int
	a, b, c       []float32
}

// newGemmCase draws A, B and C with padding pad after every row; the padding and, when beta is
// 0, C itself hold NaN, which must not reach the result.
func newGemmCase(r *rand.Rand, tA, tB bool, m, n, k, pad int, alpha, beta float32) *gemmCase {
	g := &gemmCase{tA: tA, tB: tB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	ar, ac, br, bc := storedShapes(tA, tB, m, n, k)
	g.lda, g.ldb, g.ldc = ac+pad, bc+pad, n+pad
	nan := float32(math.NaN())
	fill := func(rows, cols, ld int, garbage bool) []float32 {
		v := make([]float32, max(0, (rows-1)*ld+cols))
		for i := range v {
			if garbage || i%ld >= cols {
				v[i] = nan
			} else {
				v[i] = float32(r.NormFloat64())
			}
		}
		return v
	}
	g.a = fill(ar, ac, g.lda, false)
	g.b = fill(br, bc, g.ldb, false)
	g.c = fill(m, n, g.ldc, beta == 0)
	return g
}

func (g *gemmCase) String() string {
	return fmt.Sprintf("%dx%dx%d/tA=%v/tB=%v/alpha=%v/beta=%v/ld=%d,%d,%d", g.m, g.n, g.k, g.tA, g.tB, g.alpha, g.beta, g.lda, g.ldb, g.ldc)
}

// check compares got (the case's C after a product) with a float64 reference, element by element
// within float32 accumulation error of the magnitudes summed, and checks that C's padding is
// untouched.
func (g *gemmCase) check(t *testing.T, what string, got []float32) {
	t.Helper()
	at := func(i, l int) float64 {
		if g.tA {
			return float64(g.a[l*g.lda+i])
		}
		return float64(g.a[i*g.lda+l])
	}
	bt := func(l, j int) float64 {
		if g.tB {
			return float64(g.b[j*g.ldb+l])
		}
		return float64(g.b[l*g.ldb+j])
	}
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.ldc && i*g.ldc+j < len(got); j++ {
			idx := i*g.ldc + j
			if j >= g.n {
				if !math.IsNaN(float64(got[idx])) {
					t.Fatalf("%s %v: padding C[%d][%d] overwritten with %g", what, g, i, j, got[idx])
				}
				continue
			}
			var sum, mag float64
			for l := 0; l < g.k; l++ {
				p := at(i, l) * bt(l, j)
				sum += p
				mag += math.Abs(p)
			}
			want := float64(g.alpha) * sum
			mag *= math.Abs(float64(g.alpha))
			if g.beta != 0 {
				cv := float64(g.beta) * float64(g.c[idx])
				want += cv
				mag += math.Abs(cv)
			}
			if d := math.Abs(float64(got[idx]) - want); !(d <= float64(g.k+4)*1.2e-7*mag+1e-30) {
				t.Fatalf("%s %v: C[%d][%d] = %g, want %g (magnitude %g)", what, g, i, j, got[idx], want, mag)
			}
		}
	}
}

// gemmTestShapes are m, n, k triples: edges of both kernels' tiles (1, primes, one off the block
// sizes) and the products of the networks (conv forward, input and filter gradients, LSTM).
var gemmTestShapes = [][3]int{
	{1, 1, 1}, {1, 17, 5}, {7, 1, 3}, {5, 3, 1}, {6, 16, 8}, {8, 32, 8}, {13, 37, 41},
	{7, 31, 257}, {97, 101, 103}, {145, 2049 % 300, 259}, {16, 300, 3}, {300, 17, 300},
	{211, 223, 227}, {289, 293, 283}, {300, 300, 300},
	{16, 1024, 27}, {16, 1024, 144}, {144, 1024, 16}, {16, 144, 1024}, {64, 256, 576},
	{576, 256, 64}, {64, 576, 256}, {20, 800, 200}, {20, 200, 800}, {10, 64, 32}, {32, 10, 64},
}

// TestSgemmKernelsMatchReference runs every kernel this CPU supports over random shapes, all four
// transpose combinations, scalings (beta 0 over NaN), padded leading dimensions and row or column
// splitting.
func TestSgemmKernelsMatchReference(t *testing.T) {
	kernels := sgemmKernels()
	if len(kernels) == 0 {
		t.Skip("no assembly kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	shapes := append([][3]int(nil), gemmTestShapes...)
	for range 12 {
		shapes = append(shapes, [3]int{1 + r.IntN(300), 1 + r.IntN(300), 1 + r.IntN(300)})
	}
	scales := [][2]float32{{1, 0}, {1, 1}, {-0.75, 0.5}, {2, 0}}
	for _, kern := range kernels {
		for si, sh := range shapes {
			for combo := range 4 {
				tA, tB := combo&1 != 0, combo&2 != 0
				sc := scales[(si+combo)%len(scales)]
				pad := (si + combo) % 3 * 5
				g := newGemmCase(r, tA, tB, sh[0], sh[1], sh[2], pad, sc[0], sc[1])
				for _, par := range []bool{false, true} {
					got := append([]float32(nil), g.c...)
					if !sgemm(kern, tA, tB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, got, g.ldc, par) {
						t.Fatalf("%s %v: rejected valid arguments", kern.name, g)
					}
					g.check(t, fmt.Sprintf("%s par=%v", kern.name, par), got)
				}
			}
		}
	}
}

// TestGemmFallbackMatchesReference checks the pure-Go paths Sgemm takes without an assembly
// kernel (other architectures, other CPUs).
func TestGemmFallbackMatchesReference(t *testing.T) {
	if sgemm(nil, false, false, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2, false) {
		t.Fatal("sgemm without a kernel claimed to have computed the product")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for si, sh := range gemmTestShapes {
		for combo := range 4 {
			tA, tB := combo&1 != 0, combo&2 != 0
			beta := []float32{0, 1, 0.5}[(si+combo)%3]
			g := newGemmCase(r, tA, tB, sh[0], sh[1], sh[2], combo, 1.25, beta)
			got := append([]float32(nil), g.c...)
			gemmGo(gonum.Implementation{}, tA, tB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, got, g.ldc, si%2 == 0)
			g.check(t, "fallback", got)
		}
	}
}

// TestSgemmSpecialCases covers empty products, alpha 0 and k 0 (C = beta·C, NaN cleared by beta
// 0) and arguments that do not fit their slices, which sgemm leaves to the fallback.
func TestSgemmSpecialCases(t *testing.T) {
	kern := fastKernel
	if kern == nil {
		t.Skip("no assembly kernel on this CPU")
	}
	nan := float32(math.NaN())
	if !sgemm(kern, false, false, 0, 5, 3, 1, nil, 3, make([]float32, 15), 5, 0, nil, 5, true) {
		t.Fatal("m = 0 rejected")
	}
	c := []float32{nan, nan, 1, 2}
	if !sgemm(kern, false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0, c, 2, false) || c[0] != 0 || c[3] != 0 {
		t.Fatalf("k = 0, beta = 0: C = %v, want zeros", c)
	}
	c = []float32{1, 2, 3, 4}
	a := []float32{nan, 1, 2, 3}
	if !sgemm(kern, false, false, 2, 2, 2, 0, a, 2, a, 2, 2, c, 2, false) || c[0] != 2 || c[3] != 8 {
		t.Fatalf("alpha = 0, beta = 2: C = %v, want 2·C without NaN", c)
	}
	ok := make([]float32, 64)
	for _, bad := range []struct {
		name          string
		a, b, c       []float32
		lda, ldb, ldc int
	}{
		{"short a", ok[:10], ok, ok, 4, 4, 4},
		{"short b", ok, ok[:15], ok, 4, 4, 4},
		{"short c", ok, ok, ok[:15], 4, 4, 4},
		{"small lda", ok, ok, ok, 3, 4, 4},
		{"small ldc", ok, ok, ok, 4, 4, 3},
	} {
		if sgemm(kern, false, false, 4, 4, 4, 1, bad.a, bad.lda, bad.b, bad.ldb, 0, bad.c, bad.ldc, false) {
			t.Errorf("%s: accepted", bad.name)
		}
	}
}

// TestGemmNoAllocs checks that the steady state of Sgemm allocates nothing on one goroutine
// (packing buffers come from a pool); split across goroutines it allocates only what starting
// them takes.
func TestGemmNoAllocs(t *testing.T) {
	if fastKernel == nil {
		t.Skip("no assembly kernel on this CPU")
	}
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, sh := range [][3]int{{16, 1024, 144}, {97, 101, 103}, {20, 800, 200}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, b, c := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
		for _, tA := range []bool{false, true} {
			lda := k
			if tA {
				lda = m
			}
			serial := testing.AllocsPerRun(20, func() { Sgemm(tA, false, m, n, k, 1, a, lda, b, n, 0, c, n, false) })
			if serial != 0 {
				t.Errorf("%v tA=%v: %v allocations per serial call, want 0", sh, tA, serial)
			}
			split := testing.AllocsPerRun(20, func() { Sgemm(tA, false, m, n, k, 1, a, lda, b, n, 0, c, n, true) })
			if split > 4*float64(parallel.Workers()) {
				t.Errorf("%v tA=%v: %v allocations per parallel call", sh, tA, split)
			}
		}
	}
}
