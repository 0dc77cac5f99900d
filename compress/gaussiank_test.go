package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// absNormalTail is P(|X| >= t) for X ~ N(mu, sigma²).
func absNormalTail(mu, sigma, t float64) float64 {
	s := sigma * math.Sqrt2
	return 0.5 * (math.Erfc((t-mu)/s) + math.Erfc((t+mu)/s))
}

func TestAbsNormalThreshold(t *testing.T) {
	for _, mu := range []float64{0, 1e-3, -0.05, 0.3, 1, -5} {
		for _, sigma := range []float64{1, 2e-3, 40} {
			for _, q := range []float64{1e-7, 1e-3, 0.01, 0.05, 0.3, 0.7, 0.99} {
				got := absNormalThreshold(mu*sigma, sigma, q)
				// The reference bisects the tail, decreasing in t, to float64 resolution.
				lo, hi := 0.0, math.Abs(mu*sigma)+10*sigma
				for range 200 {
					if m := lo + (hi-lo)/2; absNormalTail(mu*sigma, sigma, m) > q {
						lo = m
					} else {
						hi = m
					}
				}
				if math.Abs(got-lo) > 1e-6*sigma {
					t.Errorf("mu=%gσ σ=%g q=%g: threshold %.9g, want %.9g", mu, sigma, q, got, lo)
				}
				if mu == 0 {
					// Shi et al.'s threshold, σ·Φ⁻¹(1 − q/2), computed independently.
					if shi := sigma * -math.Sqrt2 * math.Erfinv(q-1); math.Abs(got-shi) > 1e-6*sigma {
						t.Errorf("σ=%g q=%g: threshold %.9g, want σΦ⁻¹(1−q/2) = %.9g", sigma, q, got, shi)
					}
				}
			}
		}
	}
	if got := absNormalThreshold(-2, 0, 0.01); got != 2 {
		t.Errorf("σ=0: threshold %g, want |μ| = 2", got)
	}
}

// TestGaussianKRecall checks that Gaussian-k picks the large elements on normal gradients:
// what it returns is always a prefix by magnitude of TopK's answer (so no element returned
// is smaller than the k-th largest magnitude: the factor is 1), and on average over 95% of
// it.
func TestGaussianKRecall(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	var s GaussianK
	var exact TopK
	for _, c := range []struct {
		n         int
		density   float64
		mu, sigma float64
	}{
		{100_000, 0.001, 0, 1}, {100_000, 0.01, 0, 1}, {100_000, 0.05, 0.3, 2},
		{300_000, 0.01, -0.1, 1e-3}, {1_000_000, 0.001, 0, 1}, {1_000_000, 0.01, 0.3, 2},
	} {
		t.Run(fmt.Sprintf("n=%d density=%g N(%g,%g²)", c.n, c.density, c.mu, c.sigma), func(t *testing.T) {
			k := KFor(c.n, c.density)
			g := make([]float32, c.n)
			const trials = 5
			var got, want []int32
			sum, minRecall := 0.0, 1.0
			for range trials {
				for i := range g {
					g[i] = float32(c.mu + c.sigma*r.NormFloat64())
				}
				var err error
				if got, err = s.Select(g, k, got); err != nil {
					t.Fatal(err)
				}
				if want, err = exact.Select(g, k, want); err != nil {
					t.Fatal(err)
				}
				kth := float32(math.Inf(1))
				for _, i := range want {
					kth = min(kth, float32(math.Abs(float64(g[i]))))
				}
				hits := 0
				for _, i := range got {
					if float32(math.Abs(float64(g[i]))) < kth {
						t.Fatalf("|g[%d]| = %g is below the k-th largest magnitude %g", i, g[i], kth)
					}
					if _, ok := slices.BinarySearch(want, i); ok {
						hits++
					}
				}
				if hits != len(got) {
					t.Fatalf("%d of %d returned are not in the exact top k", len(got)-hits, len(got))
				}
				recall := float64(hits) / float64(k)
				sum += recall
				minRecall = min(minRecall, recall)
				if lo, _ := selectorBand("gaussiank", k); len(got) < lo {
					t.Errorf("recall %.3f: %d of k=%d, below the documented band's %d", recall, len(got), k, lo)
				}
			}
			if mean := sum / trials; mean < 0.95 {
				t.Errorf("mean recall %.3f over %d calls (lowest %.3f), want >= 0.95", mean, trials, minRecall)
			}
		})
	}
}

// TestGaussianKTails checks what the type's comment says of non-normal gradients: heavier
// tails (Laplace) give TopK's exact answer, light tails (uniform) defeat the threshold and
// get TopK's answer through the fallbacks, and a Cauchy gradient gets far fewer than k
// (but never none).
func TestGaussianKTails(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	const n = 200_000
	laplace, uniform := make([]float32, n), make([]float32, n)
	for i := range n {
		laplace[i] = float32(r.ExpFloat64() * float64(1-2*r.IntN(2)))
		uniform[i] = float32(2*r.Float64() - 1)
	}
	cauchy := cauchyGrad(r, n)
	var s GaussianK
	var exact TopK
	for _, c := range []struct {
		name    string
		g       []float32
		k       int
		isExact bool // whether the answer must be TopK's
	}{
		{"laplace", laplace, n / 1000, true},
		{"laplace", laplace, n / 100, true},
		{"laplace", laplace, n / 20, true},
		{"uniform", uniform, 1, true}, // nothing reaches either threshold: the largest alone
		{"uniform", uniform, n / 100, true},
		{"uniform", uniform, n / 20, true},
		{"cauchy", cauchy, n / 100, false},
		{"cauchy", cauchy, n / 20, false},
	} {
		t.Run(fmt.Sprintf("%s k=%d", c.name, c.k), func(t *testing.T) {
			got, err := s.Select(c.g, c.k, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkSelection(t, "gaussiank", c.g, c.k, got)
			if c.isExact {
				if want, _ := exact.Select(c.g, c.k, nil); !slices.Equal(got, want) {
					t.Fatalf("got %d indices %v, want TopK's %d: %v", len(got), trunc(got), len(want), trunc(want))
				}
			} else if len(got) >= c.k/2 {
				t.Errorf("%d of k=%d on a Cauchy gradient: the type's comment says far fewer", len(got), c.k)
			}
		})
	}
}

// TestGaussianKPaths drives the branches of Select on small inputs whose statistics are
// known.
func TestGaussianKPaths(t *testing.T) {
	spike := make([]float32, 1000)
	spike[617] = -3
	equal := make([]float32, 999)
	for i := range equal {
		equal[i] = 0.25
	}
	shifted := make([]float32, 1000) // 997 to 1003 in turn: mean 1000, σ = 2
	for i := range shifted {
		shifted[i] = 1000 + float32(i%7) - 3
	}
	var s GaussianK
	for _, c := range []struct {
		name string
		g    []float32
		k    int
		want []int32
	}{
		// One element above the threshold, fewer than k/2: the lowered one takes it alone.
		{"spike", spike, 10, []int32{617}},
		// σ = 0: every element reaches |μ|, beyond the candidates' limit: TopK over g, ties
		// to the lowest indices.
		{"all equal", equal, 3, []int32{0, 1, 2}},
		// μ = 1000, σ = 2: nothing reaches μ + 2.33σ = 1004.65 (the tail below −t is
		// empty), and the lowered threshold, μ + 1.16σ, takes the 143 elements at 1003, more
		// than k: the exact top k of them, the lowest indices.
		{"shifted", shifted, 10, []int32{6, 13, 20, 27, 34, 41, 48, 55, 62, 69}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Select(c.g, c.k, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", trunc(got), c.want)
			}
		})
	}
}

func TestGaussianKAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	const n = 1 << 18
	uniform := make([]float32, n)
	for i := range uniform {
		uniform[i] = float32(2*r.Float64() - 1)
	}
	for _, c := range []struct {
		name string
		g    []float32
	}{{"gauss", gaussGrad(r, n)}, {"cauchy", cauchyGrad(r, n)}, {"uniform", uniform}} {
		var s GaussianK
		for _, k := range []int{1, 1 << 8, 1 << 11, 1 << 14} {
			// Warm up over the sizes: the buffers grow to the largest candidate set seen.
			var idx []int32
			for range 5 {
				idx, _ = s.Select(c.g, k, idx)
			}
			allocs := testing.AllocsPerRun(10, func() {
				idx, _ = s.Select(c.g, k, idx)
			})
			if allocs != 0 {
				t.Errorf("%s k=%d: %v allocations per call in steady state, want 0", c.name, k, allocs)
			}
		}
	}
}
