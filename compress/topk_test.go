package compress

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
)

// refTopK is the obvious reference: a stable sort by descending magnitude, so equal
// magnitudes keep ascending index order, then the first k indices, sorted.
func refTopK(g []float32, k int) []int32 {
	k = max(0, min(k, len(g)))
	idx := make([]int32, len(g))
	for i := range idx {
		idx[i] = int32(i)
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return math.Abs(float64(g[idx[a]])) > math.Abs(float64(g[idx[b]]))
	})
	out := slices.Clone(idx[:k])
	slices.Sort(out)
	return out
}

func randGrad(r *rand.Rand, n int, distinct int) []float32 {
	g := make([]float32, n)
	for i := range g {
		if distinct > 0 {
			g[i] = float32(r.IntN(distinct)-distinct/2) * 0.25
		} else {
			g[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(6)-4)))
		}
	}
	return g
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	negZero := float32(math.Copysign(0, -1))
	type tc struct {
		name string
		g    []float32
		k    int
	}
	cases := []tc{
		{"empty", nil, 3},
		{"empty k=0", []float32{}, 0},
		{"k=0", []float32{1, 2, 3}, 0},
		{"negative k", []float32{1, 2, 3}, -5},
		{"k=n", []float32{1, -2, 3}, 3},
		{"k>n", []float32{1, -2, 3}, 10},
		{"k=1", []float32{0.5, -7, 3, 7}, 1},
		{"negatives win", []float32{-9, 1, -8, 2, 3}, 2},
		{"all equal", []float32{4, 4, -4, 4, 4, -4}, 3},
		{"zeros", []float32{0, 0, negZero, 0, 0}, 2},
		{"mostly zero", []float32{0, 0, 1e-30, 0, -1e-38, 0}, 3},
		{"subnormal", []float32{1e-45, 2e-45, 0, -3e-45}, 2},
		{"ties at threshold", []float32{1, 2, 2, 3, -2, 2, 0}, 3},
	}
	for _, n := range []int{1, 2, 7, 100, 1000, smallTopK - 1, smallTopK, 50000} {
		for _, k := range []int{1, n / 100, n / 10, n / 2, n - 1, n} {
			cases = append(cases,
				tc{fmt.Sprintf("random n=%d k=%d", n, k), randGrad(r, n, 0), k},
				tc{fmt.Sprintf("few values n=%d k=%d", n, k), randGrad(r, n, 7), k},
			)
		}
		all := make([]float32, n)
		for i := range all {
			all[i] = -1.5
		}
		cases = append(cases, tc{fmt.Sprintf("all equal n=%d", n), all, n / 3})
		// Magnitudes that share the high 16 bits exercise the second radix pass.
		sameHigh := make([]float32, n)
		for i := range sameHigh {
			sameHigh[i] = math.Float32frombits(0x3f800000 | uint32(r.IntN(1<<16)))
		}
		cases = append(cases, tc{fmt.Sprintf("one high bucket n=%d", n), sameHigh, n/2 + 1})
	}
	var s TopK
	var idx []int32
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.g)
			var err error
			idx, err = s.Select(c.g, c.k, idx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(in, c.g) {
				t.Fatal("TopK modified its input")
			}
			if want := refTopK(c.g, c.k); !slices.Equal(idx, want) {
				t.Fatalf("TopK(k=%d) = %v, want %v", c.k, trunc(idx), trunc(want))
			}
		})
	}
}

func trunc(a []int32) []int32 {
	if len(a) > 20 {
		return a[:20]
	}
	return a
}

func TestTopKNonFinite(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	var s TopK
	for _, n := range []int{5, smallTopK + 10} {
		for _, k := range []int{0, 1, 2, n} {
			for _, bad := range []float32{nan, inf, -inf} {
				g := make([]float32, n)
				for i := range g {
					g[i] = float32(i)
				}
				pos := n - 2
				g[pos] = bad
				_, err := s.Select(g, k, nil)
				var nf *NonFiniteError
				if !errors.As(err, &nf) || nf.Index != pos {
					t.Fatalf("n=%d k=%d value %v: err %v, want NonFiniteError at %d", n, k, bad, err, pos)
				}
			}
		}
		// A failed call must not leave stale state behind.
		g := randGrad(rand.New(rand.NewPCG(3, 4)), n, 0)
		got, err := s.Select(g, 3, nil)
		if err != nil || !slices.Equal(got, refTopK(g, 3)) {
			t.Fatalf("after an error: %v, %v; want %v", got, err, refTopK(g, 3))
		}
	}
}

func TestSelectKth(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 10, 1000} {
		for trial := range 20 {
			a := make([]uint32, n)
			for i := range a {
				switch trial % 3 {
				case 0:
					a[i] = r.Uint32()
				case 1:
					a[i] = uint32(r.IntN(3))
				default:
					a[i] = uint32(i) // sorted input
				}
			}
			sorted := slices.Clone(a)
			slices.Sort(sorted)
			m := r.IntN(n)
			if got := selectKth(a, m); got != sorted[m] {
				t.Fatalf("n=%d m=%d: got %d, want %d", n, m, got, sorted[m])
			}
		}
	}
}

func TestTopKAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{100, 100000} {
		g := randGrad(r, n, 0)
		var s TopK
		k := n / 100
		idx, err := s.Select(g, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(10, func() {
			idx, err = s.Select(g, k, idx)
		})
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Errorf("n=%d: %v allocations per call in steady state, want 0", n, allocs)
		}
	}
}

// parallelCases are gradients for the parallel radix path: long enough for it, with the
// patterns that decide which path and which tie-breaking apply.
func parallelCases(r *rand.Rand) []struct {
	name string
	g    []float32
	k    int
} {
	type tc = struct {
		name string
		g    []float32
		k    int
	}
	var cases []tc
	for _, n := range []int{smallTopK, 5003, 100_003} {
		for _, k := range []int{1, n / 100, n / 10, n / 2, n - 1} {
			cases = append(cases,
				tc{fmt.Sprintf("random n=%d k=%d", n, k), randGrad(r, n, 0), k},
				tc{fmt.Sprintf("few values n=%d k=%d", n, k), randGrad(r, n, 7), k},
			)
		}
		equal := make([]float32, n)
		zeros := make([]float32, n)
		sparse := make([]float32, n)
		negative := make([]float32, n)
		spread := make([]float32, n)
		sameHigh := make([]float32, n)
		for i := range n {
			equal[i] = -1.5
			if r.IntN(50) == 0 {
				sparse[i] = float32(r.NormFloat64())
			}
			negative[i] = -float32(math.Abs(r.NormFloat64()))
			// 2% tie at the largest magnitude, scattered over every part.
			spread[i] = float32(r.NormFloat64())
			if r.IntN(50) == 0 {
				spread[i] = -8
			}
			sameHigh[i] = math.Float32frombits(0x3f800000 | uint32(r.IntN(1<<16)))
		}
		cases = append(cases,
			tc{fmt.Sprintf("all equal n=%d", n), equal, n / 3},
			tc{fmt.Sprintf("zeros n=%d", n), zeros, n / 100},
			tc{fmt.Sprintf("mostly zeros n=%d", n), sparse, n / 10},
			tc{fmt.Sprintf("negatives n=%d", n), negative, n / 100},
			tc{fmt.Sprintf("ties across parts n=%d", n), spread, n / 100},
			tc{fmt.Sprintf("one high bucket n=%d", n), sameHigh, n / 100},
			tc{fmt.Sprintf("one high bucket, half n=%d", n), sameHigh, n/2 + 1},
		)
	}
	return cases
}

// TestTopKParallel forces the parallel path with a small chunk and checks it returns
// exactly the serial path's indices, for several goroutine counts (more than the machine's
// cores, and not dividing n, to get uneven parts).
func TestTopKParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	serial := TopK{procs: 1}
	for _, c := range parallelCases(r) {
		want, err := serial.Select(c.g, c.k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.g) <= 5003 && !slices.Equal(want, refTopK(c.g, c.k)) {
			t.Fatalf("%s: serial path disagrees with the reference", c.name)
		}
		for _, procs := range []int{2, 3, 7} {
			t.Run(fmt.Sprintf("%s procs=%d", c.name, procs), func(t *testing.T) {
				s := TopK{chunk: 500, procs: procs}
				// Twice, so the second call runs on the histograms the first left behind.
				for range 2 {
					got, err := s.Select(c.g, c.k, nil)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("parallel = %v, serial = %v", trunc(got), trunc(want))
					}
				}
				if w := len(s.parts); w != min(procs, len(c.g)/500) {
					t.Fatalf("ran %d parts, want %d", w, min(procs, len(c.g)/500))
				}
			})
		}
	}
}

// TestTopKParallelNonFinite checks the parallel path reports the first non-finite element,
// wherever the parts split, and leaves no stale counts behind.
func TestTopKParallelNonFinite(t *testing.T) {
	const n = 10_000
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	r := rand.New(rand.NewPCG(15, 16))
	clean := randGrad(r, n, 0)
	want := refTopK(clean, n/100)
	for _, bad := range [][]int{{0}, {n - 1}, {n / 3}, {n/3 - 1, n / 3}, {n - 2, 10}, {4999, 5000}} {
		for _, procs := range []int{2, 3} {
			s := TopK{chunk: 100, procs: procs}
			g := slices.Clone(clean)
			for j, i := range bad {
				g[i] = []float32{nan, inf, -inf}[j%3]
			}
			for _, k := range []int{1, n / 100, n / 2} {
				_, err := s.Select(g, k, nil)
				var nf *NonFiniteError
				if first := slices.Min(bad); !errors.As(err, &nf) || nf.Index != first {
					t.Fatalf("bad %v procs=%d k=%d: err %v, want NonFiniteError at %d", bad, procs, k, err, first)
				}
			}
			got, err := s.Select(clean, n/100, nil)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("bad %v procs=%d: after an error got %v, %v; want %v", bad, procs, trunc(got), err, trunc(want))
			}
		}
	}
}

func TestTopKParallelAllocs(t *testing.T) {
	g := randGrad(rand.New(rand.NewPCG(17, 18)), 100_000, 0)
	for _, k := range []int{1000, 50_000} { // gathering, and the three-pass path
		s := TopK{chunk: 1000, procs: 3}
		idx, err := s.Select(g, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(10, func() {
			idx, _ = s.Select(g, k, idx)
		})
		// One closure per extra goroutine and pass: 2 goroutines, 3 passes.
		if allocs > 6 {
			t.Errorf("k=%d: %v allocations per call, want at most 6", k, allocs)
		}
	}
}

func benchGrad(n int) []float32 { return randGrad(rand.New(rand.NewPCG(9, 10)), n, 0) }

func BenchmarkTopK(b *testing.B) {
	for _, n := range []int{1000, 1 << 13, 1 << 15, 1 << 17, 1 << 20} {
		g := benchGrad(n)
		k := n / 100
		b.Run(fmt.Sprintf("selector/n=%d", n), func(b *testing.B) {
			var s TopK
			var idx []int32
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				idx, _ = s.Select(g, k, idx)
			}
		})
		if n != 1000 && n != 1<<20 {
			continue
		}
		b.Run(fmt.Sprintf("sort/n=%d", n), func(b *testing.B) {
			idx := make([]int32, n)
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				for i := range idx {
					idx[i] = int32(i)
				}
				slices.SortFunc(idx, func(x, y int32) int {
					return -cmpAbs(g[x], g[y])
				})
				slices.Sort(idx[:k])
			}
		})
	}
}

func cmpAbs(x, y float32) int {
	ax, ay := math.Abs(float64(x)), math.Abs(float64(y))
	switch {
	case ax < ay:
		return -1
	case ax > ay:
		return 1
	}
	return 0
}

// BenchmarkTopKParallel times the radix path on one goroutine and on GOMAXPROCS of them,
// around the size from which Select splits its passes (2·chunkTopK).
func BenchmarkTopKParallel(b *testing.B) {
	for _, n := range []int{1 << 17, 1 << 18, 1 << 19, 1 << 20, 1 << 21, 1 << 22} {
		g := benchGrad(n)
		k := n / 100
		for _, c := range []struct {
			name string
			s    *TopK
		}{{"serial", &TopK{procs: 1}}, {"parallel", &TopK{chunk: 1}}} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				s := c.s
				idx, _ := s.Select(g, k, nil)
				b.ReportAllocs()
				b.SetBytes(int64(4 * n))
				for b.Loop() {
					idx, _ = s.Select(g, k, idx)
				}
			})
		}
	}
}

// BenchmarkTopK25M selects 1% of 25M normally distributed elements, the size of a large
// model's fused gradient: "topk" as Select runs it, "serial" on one goroutine, "sampled"
// with SampledThreshold. "stream" is a plain read of the same 100 MB (sum of |x| with four
// accumulators, so the loop is bound by memory rather than by add latency), the floor for
// any selector that must look at every element, and "stream2" the same read split across
// GOMAXPROCS goroutines.
func BenchmarkTopK25M(b *testing.B) {
	const n = 25_000_000
	r := rand.New(rand.NewPCG(11, 12))
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	k := n / 100
	for _, c := range []struct {
		name string
		s    Selector
	}{{"topk", new(TopK)}, {"serial", &TopK{procs: 1}}, {"sampled", NewSampledThreshold(1)}} {
		b.Run(c.name, func(b *testing.B) {
			idx, _ := c.s.Select(g, k, nil)
			b.ReportAllocs()
			b.SetBytes(4 * n)
			for b.Loop() {
				idx, _ = c.s.Select(g, k, idx)
			}
		})
	}
	var sink float32
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(4 * n)
		for b.Loop() {
			sink += sumAbs(g)
		}
	})
	b.Run("stream2", func(b *testing.B) {
		w := runtime.GOMAXPROCS(0)
		sums := make([]float32, w)
		b.ReportAllocs()
		b.SetBytes(4 * n)
		for b.Loop() {
			var wg sync.WaitGroup
			for i := range w {
				wg.Go(func() { sums[i] = sumAbs(g[i*n/w : (i+1)*n/w]) })
			}
			wg.Wait()
			sink += sums[0]
		}
	})
	if sink == -1 {
		b.Log(sink)
	}
}

func sumAbs(g []float32) float32 {
	var s0, s1, s2, s3 float32
	for len(g) >= 4 {
		s0 += float32(math.Abs(float64(g[0])))
		s1 += float32(math.Abs(float64(g[1])))
		s2 += float32(math.Abs(float64(g[2])))
		s3 += float32(math.Abs(float64(g[3])))
		g = g[4:]
	}
	for _, x := range g {
		s0 += float32(math.Abs(float64(x)))
	}
	return s0 + s1 + s2 + s3
}
