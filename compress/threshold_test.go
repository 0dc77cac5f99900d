package compress

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAppendAtLeast checks the threshold selector and its int32 and counting forms on
// signed values, zeros of both signs and NaN.
func TestAppendAtLeast(t *testing.T) {
	g := []float32{0.5, -2, 1, -1, 0, 3, float32(math.Copysign(0, -1)), float32(math.NaN())}
	for _, tc := range []struct {
		tau  float32
		base int
		want []uint32
	}{
		{1, 0, []uint32{1, 2, 3, 5, 7}},
		{1, 100, []uint32{101, 102, 103, 105, 107}},
		{2.5, 0, []uint32{5, 7}},
		{math.SmallestNonzeroFloat32, 0, []uint32{0, 1, 2, 3, 5, 7}},
	} {
		prefix := []byte{9, 9, 9}
		out := AppendAtLeast(slices.Clone(prefix), g, tc.base, tc.tau)
		if !slices.Equal(out[:3], prefix) || (len(out)-3)%4 != 0 {
			t.Fatalf("tau %g: the prefix was not kept or the indices are not whole: %v", tc.tau, out)
		}
		var got []uint32
		for b := out[3:]; len(b) > 0; b = b[4:] {
			got = append(got, binary.LittleEndian.Uint32(b))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("tau %g base %d: indices %v, want %v", tc.tau, tc.base, got, tc.want)
		}
		if n := CountAtLeast(g, tc.tau); n != len(tc.want) {
			t.Errorf("tau %g: CountAtLeast %d, want %d", tc.tau, n, len(tc.want))
		}
		idx := AppendIndicesAtLeast([]int32{-1}, g, tc.tau)
		for i := range idx[1:] {
			idx[1+i] += int32(tc.base)
		}
		if want := append([]int32{-1}, u32sToI32s(tc.want)...); !slices.Equal(idx, want) {
			t.Errorf("tau %g base %d: AppendIndicesAtLeast gave %v (plus base), want %v", tc.tau, tc.base, idx, want)
		}
	}
}

func u32sToI32s(u []uint32) []int32 {
	out := make([]int32, len(u))
	for i, v := range u {
		out[i] = int32(v)
	}
	return out
}

// atLeast counts the elements of g whose magnitude reaches t.
func atLeast(g []float32, t float32) int {
	n := 0
	for _, v := range g {
		if float32(math.Abs(float64(v))) >= t {
			n++
		}
	}
	return n
}

// laplace returns n elements of a heavy-tailed distribution with scale s, deterministic.
func laplace(n int, s float64, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(rng.ExpFloat64() * s)
		if rng.IntN(2) == 0 {
			g[i] = -g[i]
		}
	}
	return g
}

func TestKthEstimator(t *testing.T) {
	var e KthEstimator
	// Small k: exact, from the whole slice.
	g := []float32{0.5, -2, 1, -1, 0, 3}
	for k, want := range map[int]float32{1: 3, 2: 2, 3: 1, 4: 1, 6: 0, 0: 3, 99: 0} {
		if got, m := e.Estimate(g, k); got != want || m != len(g) {
			t.Errorf("k=%d: estimate %g from %d elements, want %g exactly from all %d", k, got, m, want, len(g))
		}
	}
	if got, m := e.Estimate(nil, 3); !math.IsInf(float64(got), 1) || m != 0 {
		t.Errorf("empty slice: %g from %d elements, want +Inf from none", got, m)
	}
	// Large k: sampled, and about k elements reach the estimate.
	for _, tc := range []struct{ n, k int }{{1 << 20, 10000}, {1 << 20, 1000}, {300000, 30000}, {5000, 4000}} {
		g := laplace(tc.n, 0.01, uint64(tc.n+tc.k))
		est, m := e.Estimate(g, tc.k)
		if m >= tc.n && tc.k*4 < tc.n {
			t.Errorf("n=%d k=%d: sampled all %d elements", tc.n, tc.k, m)
		}
		if c := atLeast(g, est); math.Abs(float64(c)/float64(tc.k)-1) > 0.15 {
			t.Errorf("n=%d k=%d: %d elements reach the estimate %g (from %d samples)", tc.n, tc.k, c, est, m)
		}
		if again, _ := e.Estimate(g, tc.k); again != est {
			t.Errorf("n=%d k=%d: estimates %g then %g of the same slice", tc.n, tc.k, est, again)
		}
	}
}

// TestThresholdFromHistograms: the histograms of several slices' samples, put together,
// give a threshold that about k elements of all the slices reach, and Above splits those k
// among the slices as they hold them.
func TestThresholdFromHistograms(t *testing.T) {
	parts := [][]float32{laplace(200000, 0.04, 1), laplace(100000, 0.01, 2), laplace(50000, 0.002, 3), make([]float32, 1000)}
	for _, k := range []int{300, 3500, 35000} {
		var hs []Histogram
		for i, g := range parts {
			var e KthEstimator
			e.Estimate(g, k/len(parts))
			h := e.Histogram(g, nil)
			if len(g) > 0 && (h.Weight < 1 || len(h.Counts) == 0 || h.First+len(h.Counts) > HistogramBins) {
				t.Fatalf("k=%d, part %d: histogram %+v", k, i, h)
			}
			hs = append(hs, h)
		}
		tau, ok := ThresholdFor(hs, k)
		if !ok {
			t.Fatalf("k=%d: no threshold", k)
		}
		total, sum := 0, 0.0
		for i, g := range parts {
			c := atLeast(g, tau)
			total += c
			sum += hs[i].Above(tau)
			if a := hs[i].Above(tau); math.Abs(a-float64(c)) > 0.2*float64(k)+20 {
				t.Errorf("k=%d, part %d: Above says %g reach %g, %d do", k, i, a, tau, c)
			}
		}
		if math.Abs(float64(total)/float64(k)-1) > 0.15 || math.Abs(sum/float64(k)-1) > 0.01 {
			t.Errorf("k=%d: %d elements reach the threshold %g, the histograms say %g", k, total, tau, sum)
		}
	}
	if _, ok := ThresholdFor([]Histogram{{First: 0, Counts: []uint32{9}, Weight: 1}}, 3); ok {
		t.Error("a threshold from zeros alone")
	}
	// Fewer elements than k: the smallest sampled magnitude, so all of them get through.
	g := []float32{1, 2, 3}
	var e KthEstimator
	e.Estimate(g, 3)
	if tau, ok := ThresholdFor([]Histogram{e.Histogram(g, nil)}, 10); !ok || atLeast(g, tau) != 3 {
		t.Errorf("k beyond the elements: threshold %g (%v) lets %d of 3 through", tau, ok, atLeast(g, tau))
	}
}
