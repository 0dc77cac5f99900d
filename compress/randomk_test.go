package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRandomKReproducible checks that the draws depend on the seed and on the sequence of
// (n, k) alone: equal seeds agree call for call, whatever the values and whatever failed
// calls come between; different seeds do not.
func TestRandomKReproducible(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	calls := []struct{ n, k int }{{1000, 10}, {1000, 500}, {70_000, 30}, {70_000, 7000}, {5, 2}, {64, 63}, {200_000, 2000}}
	a, b, c := NewRandomK(42), NewRandomK(42), NewRandomK(43)
	var zero RandomK
	zeroSeeded := NewRandomK(0)
	differ := 0
	for _, call := range calls {
		ga, gb := gaussGrad(r, call.n), cauchyGrad(r, call.n)
		x, err := a.Select(ga, call.k, nil)
		if err != nil {
			t.Fatal(err)
		}
		// b sees other values, and a failing call first, which must draw nothing.
		bad := slices.Clone(gb)
		bad[call.n/2] = float32(math.NaN())
		if _, err := b.Select(bad, call.k, nil); err == nil {
			t.Fatal("NaN accepted")
		}
		y, err := b.Select(gb, call.k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x, y) {
			t.Fatalf("n=%d k=%d: equal seeds gave %v and %v", call.n, call.k, trunc(x), trunc(y))
		}
		z, _ := c.Select(ga, call.k, nil)
		if !slices.Equal(x, z) {
			differ++
		}
		x, _ = zero.Select(ga, call.k, nil)
		y, _ = zeroSeeded.Select(ga, call.k, nil)
		if !slices.Equal(x, y) {
			t.Fatalf("n=%d k=%d: the zero RandomK differs from seed 0", call.n, call.k)
		}
	}
	if differ < len(calls)-1 {
		t.Errorf("seeds 42 and 43 agreed on %d of %d calls", len(calls)-differ, len(calls))
	}
}

// chiSquare is Pearson's statistic of counts against equal expectations.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	e := float64(total) / float64(len(counts))
	x := 0.0
	for _, c := range counts {
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

// TestRandomKUniform checks, loosely, that RandomK is uniform: over 10 stretches of the
// index range, over single positions (Floyd's algorithm takes j on a collision, which a
// mistake would bias towards the end), and over whole subsets. With 9 degrees of freedom a
// statistic above 40 has probability under 1e-5 (so has one above 35 with 6, and 70 with
// 19); sampling without replacement only makes it smaller.
func TestRandomKUniform(t *testing.T) {
	s := NewRandomK(7)
	for _, c := range []struct{ n, k, calls int }{
		{1 << 16, 50, 2000},  // ordered by sorting (50·6 < 1024 words)
		{1 << 16, 5000, 20},  // ordered by scanning the bitmap
		{1 << 16, 60000, 2},  // most of the range
		{100_003, 1000, 100}, // n not a multiple of the bins or of 64
		{20, 7, 20000},       // single positions
		{1000, 999, 1000},    // one left out
		{300_000, 3, 3000},   // k = 1 in 100000, below the pipelines' smallest densities
	} {
		t.Run(fmt.Sprintf("n=%d k=%d", c.n, c.k), func(t *testing.T) {
			bins := min(10, c.n)
			counts := make([]int, bins)
			var idx []int32
			g := make([]float32, c.n)
			for range c.calls {
				var err error
				if idx, err = s.Select(g, c.k, idx); err != nil {
					t.Fatal(err)
				}
				checkSelection(t, "randomk", g, c.k, idx)
				for _, i := range idx {
					counts[int(i)*bins/c.n]++
				}
			}
			limit := 40.0
			if c.k == c.n-1 {
				// The left-out index alone varies: count it instead.
				for b := range counts {
					lo, hi := b*c.n/bins, (b+1)*c.n/bins
					counts[b] = c.calls*(hi-lo) - counts[b]
				}
			}
			if x := chiSquare(counts); x > limit {
				t.Errorf("chi-square %.1f over %d bins %v, want <= %g", x, bins, counts, limit)
			}
		})
	}
	for _, c := range []struct{ n, k int }{{5, 2}, {6, 3}, {7, 1}} {
		t.Run(fmt.Sprintf("subsets n=%d k=%d", c.n, c.k), func(t *testing.T) {
			seen := make(map[string]int)
			g := make([]float32, c.n)
			const calls = 30000
			for range calls {
				idx, err := s.Select(g, c.k, nil)
				if err != nil {
					t.Fatal(err)
				}
				seen[fmt.Sprint(idx)]++
			}
			subsets := 1 // n choose k
			for i := range c.k {
				subsets = subsets * (c.n - i) / (i + 1)
			}
			if len(seen) != subsets {
				t.Fatalf("%d distinct subsets, want %d", len(seen), subsets)
			}
			counts := make([]int, 0, subsets)
			for _, v := range seen {
				counts = append(counts, v)
			}
			limit := map[int]float64{10: 40, 20: 70, 7: 35}[subsets] // by degrees of freedom + 1
			if x := chiSquare(counts); x > limit {
				t.Errorf("chi-square %.1f over %d subsets %v, want <= %g", x, subsets, seen, limit)
			}
		})
	}
}

func TestRandomKAllocs(t *testing.T) {
	g := gaussGrad(rand.New(rand.NewPCG(53, 54)), 1<<20)
	s := NewRandomK(1)
	var idx []int32
	// Grow the bitmap and idx once; k varies over both ways of ordering.
	idx, _ = s.Select(g, len(g)/2, idx)
	for _, k := range []int{1, 100, 1 << 14, len(g) / 2} {
		allocs := testing.AllocsPerRun(10, func() {
			idx, _ = s.Select(g, k, idx)
		})
		if allocs != 0 {
			t.Errorf("k=%d: %v allocations per call in steady state, want 0", k, allocs)
		}
	}
}
