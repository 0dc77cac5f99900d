package compress

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// gaussGrad and cauchyGrad are synthetic gradients: light and heavy tailed.
func gaussGrad(r *rand.Rand, n int) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	return g
}

func cauchyGrad(r *rand.Rand, n int) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(math.Tan(math.Pi * (r.Float64() - 0.5)))
	}
	return g
}

// checkSampled checks what SampledThreshold promises for any input: at most k ascending,
// unique indices, none smaller in magnitude than any element left out, and exactly
// TopK's answer when it returns k.
func checkSampled(t *testing.T, g []float32, k int, got []int32) {
	t.Helper()
	k = max(0, min(k, len(g)))
	if len(got) > k {
		t.Fatalf("returned %d indices, more than k=%d", len(got), k)
	}
	for j := 1; j < len(got); j++ {
		if got[j] <= got[j-1] {
			t.Fatalf("indices not ascending and unique at %d: %d after %d", j, got[j], got[j-1])
		}
	}
	in := make([]bool, len(g))
	minIn := float32(math.Inf(1))
	for _, i := range got {
		in[i] = true
		minIn = min(minIn, float32(math.Abs(float64(g[i]))))
	}
	for i, x := range g {
		if !in[i] && float32(math.Abs(float64(x))) > minIn {
			t.Fatalf("|g[%d]| = %v left out, but %v returned", i, x, minIn)
		}
	}
	if len(got) == k {
		var exact TopK
		want, err := exact.Select(g, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("returned k=%d indices, but not TopK's: %v, want %v", k, trunc(got), trunc(want))
		}
	}
}

// TestSampledDensity checks the achieved count stays in the band the type documents, on
// light- and heavy-tailed gradients, and that most calls give exactly k.
func TestSampledDensity(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, dist := range []struct {
		name string
		gen  func(*rand.Rand, int) []float32
	}{{"gauss", gaussGrad}, {"cauchy", cauchyGrad}} {
		for _, c := range []struct{ n, k int }{
			{1 << 18, 1 << 18 / 10}, {1 << 18, 1 << 18 / 50}, {1 << 20, 1 << 20 / 100}, {1 << 21, 1 << 21 / 1000},
		} {
			t.Run(fmt.Sprintf("%s n=%d k=%d", dist.name, c.n, c.k), func(t *testing.T) {
				s := NewSampledThreshold(uint64(c.n + c.k))
				const trials = 8
				full := 0
				var idx []int32
				for range trials {
					g := dist.gen(r, c.n)
					var err error
					if idx, err = s.Select(g, c.k, idx); err != nil {
						t.Fatal(err)
					}
					checkSampled(t, g, c.k, idx)
					if len(idx) < c.k*3/4 {
						t.Fatalf("returned %d of k=%d, below the documented 0.75k", len(idx), c.k)
					}
					if len(idx) == c.k {
						full++
					}
				}
				if full < trials*3/4 {
					t.Errorf("exactly k in %d of %d calls, want most", full, trials)
				}
			})
		}
	}
}

// TestSampledCases covers the inputs TopK is tested on, including those SampledThreshold
// hands to TopK, and gradients whose many ties defeat the estimate.
func TestSampledCases(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	type tc struct {
		name string
		g    []float32
		k    int
	}
	cases := []tc{
		{"empty", nil, 3},
		{"k=0", []float32{1, 2, 3}, 0},
		{"negative k", []float32{1, 2, 3}, -5},
		{"k>n", []float32{1, -2, 3}, 10},
		{"small", randGrad(r, 1000, 0), 10},
	}
	const n = smallSampled
	zeros := make([]float32, n)
	sparse := make([]float32, n)
	equal := make([]float32, n)
	for i := range n {
		if r.IntN(100) == 0 {
			sparse[i] = float32(r.NormFloat64())
		}
		equal[i] = 0.5
	}
	for _, k := range []int{1, 1599, 1600, n / 100, n / 10, n / 2, n - 1, n} {
		cases = append(cases,
			tc{fmt.Sprintf("random k=%d", k), randGrad(r, n, 0), k},
			tc{fmt.Sprintf("few values k=%d", k), randGrad(r, n, 7), k},
			tc{fmt.Sprintf("zeros k=%d", k), zeros, k},
			tc{fmt.Sprintf("mostly zeros k=%d", k), sparse, k},
			tc{fmt.Sprintf("all equal k=%d", k), equal, k},
		)
	}
	s := NewSampledThreshold(5)
	var idx []int32
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.g)
			var err error
			if idx, err = s.Select(c.g, c.k, idx); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(in, c.g) {
				t.Fatal("SampledThreshold modified its input")
			}
			checkSampled(t, c.g, c.k, idx)
		})
	}
}

func TestSampledNonFinite(t *testing.T) {
	const n = smallSampled
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	clean := gaussGrad(rand.New(rand.NewPCG(25, 26)), n)
	s := NewSampledThreshold(7)
	for _, bad := range [][]int{{0}, {n - 1}, {n / 2}, {100, 50_000}, {n - 2, 7}} {
		for _, k := range []int{0, 1, n / 100, n / 10, n} {
			for _, v := range []float32{nan, inf, -inf} {
				g := slices.Clone(clean)
				for _, i := range bad {
					g[i] = v
				}
				_, err := s.Select(g, k, nil)
				var nf *NonFiniteError
				if first := slices.Min(bad); !errors.As(err, &nf) || nf.Index != first {
					t.Fatalf("bad %v k=%d value %v: err %v, want NonFiniteError at %d", bad, k, v, err, first)
				}
			}
		}
	}
	// Half NaN: the sample itself holds NaNs, which must not hide an Inf behind a
	// threshold above it.
	g := slices.Clone(clean)
	for i := 1000; i < n; i += 2 {
		g[i] = nan
	}
	g[999] = -inf
	_, err := s.Select(g, n/10, nil)
	if nf := (*NonFiniteError)(nil); !errors.As(err, &nf) || nf.Index != 999 {
		t.Fatalf("half NaN: err %v, want NonFiniteError at 999", err)
	}
}

// TestSampledDeterministic checks that equal seeds give equal results, call after call.
func TestSampledDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	a, b := NewSampledThreshold(42), NewSampledThreshold(42)
	var zero SampledThreshold
	zeroSeeded := NewSampledThreshold(0)
	for i := range 20 {
		g := gaussGrad(r, smallSampled)
		k := 400 * (i + 1)
		x, err := a.Select(g, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		y, err := b.Select(g, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x, y) {
			t.Fatalf("call %d: equal seeds gave different results", i)
		}
		x, _ = zero.Select(g, k, nil)
		y, _ = zeroSeeded.Select(g, k, nil)
		if !slices.Equal(x, y) {
			t.Fatalf("call %d: the zero SampledThreshold differs from seed 0", i)
		}
	}
}

func TestSampledAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	g := gaussGrad(r, 1<<18)
	s := NewSampledThreshold(1)
	for _, k := range []int{1 << 8, 1 << 11, 1 << 14} {
		// Warm up over many calls: the buffers grow to the largest candidate set seen.
		var idx []int32
		for range 20 {
			idx, _ = s.Select(g, k, idx)
		}
		allocs := testing.AllocsPerRun(20, func() {
			idx, _ = s.Select(g, k, idx)
		})
		if allocs != 0 {
			t.Errorf("k=%d: %v allocations per call in steady state, want 0", k, allocs)
		}
	}
}

// BenchmarkSampled compares SampledThreshold with TopK where it samples (k >= 1600).
func BenchmarkSampled(b *testing.B) {
	for _, c := range []struct{ n, k int }{
		{1 << 17, 1 << 17 / 10}, {1 << 17, 1 << 17 / 50}, {1 << 18, 1 << 18 / 100}, {1 << 20, 1 << 20 / 100},
	} {
		g := benchGrad(c.n)
		for _, sel := range []struct {
			name string
			s    Selector
		}{{"sampled", NewSampledThreshold(1)}, {"topk", new(TopK)}, {"topk-serial", &TopK{procs: 1}}} {
			b.Run(fmt.Sprintf("%s/n=%d/k=%d", sel.name, c.n, c.k), func(b *testing.B) {
				idx, _ := sel.s.Select(g, c.k, nil)
				b.ReportAllocs()
				b.SetBytes(int64(4 * c.n))
				for b.Loop() {
					idx, _ = sel.s.Select(g, c.k, idx)
				}
			})
		}
	}
}
