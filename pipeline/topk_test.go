package pipeline

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
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

func benchGrad(n int) []float32 { return randGrad(rand.New(rand.NewPCG(9, 10)), n, 0) }

func BenchmarkTopK(b *testing.B) {
	for _, n := range []int{1000, 1 << 20} {
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
