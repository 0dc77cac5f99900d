package compress

import (
	"math"
)

// GaussianK is the Gaussian-k Selector (Shi et al., "Understanding Top-k Sparsification in
// Distributed Deep Learning", 2019): it assumes the gradient is normally distributed and
// sets the threshold from its mean and standard deviation instead of ranking the elements.
// One pass computes the mean μ and the standard deviation σ of g (and so detects any NaN or
// ±Inf); the threshold is the t for which P(|X| >= t) = k/n when X ~ N(μ, σ²), which for
// μ = 0 is Shi et al.'s σ·z with z = Φ⁻¹(1 − k/(2n)); a second pass collects every element
// with |x| >= t. There is no sort and no histogram.
//
// For μ ≠ 0 it does not use their |μ| + z·σ: that leaves k/(2n) in the tail on μ's side but
// less in the other, 2|μ| further out, and so selects too few; see absNormalThreshold.
//
// Its count misses k both ways, so it keeps the contract of SampledThreshold, which every
// pipeline relies on: Sparsify and the SSFusion stage send what comes back, the multi-tensor
// baseline splits the buffer-wide indices by tensor, which needs them ascending, and the
// pipelines' tests bound what is sent by k per tensor and rank. So:
//   - At most k indices, ascending and unique, and every element returned is at least as
//     large in magnitude as every element not returned: the result is always a prefix, by
//     magnitude, of TopK's answer, and its recall of TopK's is its count over k.
//   - When more than k elements reach the threshold, it keeps the k largest of them by
//     exact TopK, so the result is exactly TopK's, ties included. When more than
//     max(2k, n/8) reach it (the threshold is far too low: a light-tailed gradient, or many
//     elements tied at it) it drops them and returns TopK's answer over g, two more passes.
//   - When fewer than k/2 reach it (σ overstates the spread of the bulk, as a few huge
//     values do), it halves the threshold's margin over |μ|, scans once more (a third pass)
//     and returns what reaches the lower threshold, or its top k.
//   - At least one element whenever k >= 1 and n >= 1, so no tensor goes missing: the
//     lowered threshold never exceeds the largest magnitude. k = 0 and k = n get TopK's exact
//     answers.
//
// On normally distributed gradients the count at or above the threshold is about binomial
// around k, so about half of the calls return exactly k and the rest a few √k fewer. The
// documented band, which TestSelectorsDensity and TestGaussianKRecall check, is
// [k − 4√k − 2, k]. Off the normal law (TestGaussianKTails) the assumption shows: a
// gradient with heavier tails than its σ predicts (Laplace) puts more than k over the
// threshold, so the answer is exactly TopK's; one with lighter tails (uniform) puts none
// over it and gets TopK's answer through the fallbacks; one whose few huge values inflate σ
// (Cauchy) gets far fewer than k even after the lowered threshold: Gaussian-k is the wrong
// tool there.
//
// The passes run on one goroutine, so on long gradients it is no faster than TopK, which
// splits its passes across goroutines from 1M elements; BenchmarkSelectors compares them.
// Reused, it does not allocate once its candidate buffers have grown to the largest call,
// except as TopK does when its exact refinement or fallback runs over 1M or more elements.
// It keeps scratch and is not safe for concurrent use; the zero value is ready to use.
type GaussianK struct {
	refiner // refinement of the candidates, and (its TopK) the fallback

	candIdx []int32   // indices of the elements at or above the threshold, ascending
	candVal []float32 // their values
}

// Select returns the indices of at most k elements of g, the largest in magnitude, as
// ascending indices in idx[:0]; see the type's comment for how close to k it gets. Any NaN
// or ±Inf in g is reported as a *NonFiniteError naming the first one.
func (s *GaussianK) Select(g []float32, k int, idx []int32) ([]int32, error) {
	n := len(g)
	k = max(0, min(k, n))
	if k == 0 || k == n || n > math.MaxInt32 {
		return s.exact.Select(g, k, idx)
	}
	mean, std, ok := moments(g)
	if !ok {
		// A NaN or Inf poisoned the sums (finite float32 values cannot overflow them).
		if err := checkFinite(g); err != nil {
			return idx[:0], err
		}
		return s.exact.Select(g, k, idx)
	}
	thr := absNormalThreshold(mean, std, float64(k)/float64(n))
	// Candidates beyond limit cost more to refine than TopK over g; n/8 is the bound TopK
	// itself gathers up to, 2k leaves room above k when k is a large fraction of n.
	limit := max(2*k, n/8)
	cand, vals, top, ok := s.collect(g, thresholdKey(thr), limit)
	if ok && 2*len(cand) < k {
		// Far fewer than k: lower the threshold once, halving its margin over |μ|, and never
		// above the largest magnitude, so that at least that element is sent.
		m := math.Abs(mean)
		cand, vals, _, ok = s.collect(g, min(thresholdKey(m+max(thr-m, 0)/2), top), limit)
	}
	if !ok {
		return s.exact.Select(g, k, idx)
	}
	// The candidates hold every element at or above the threshold, so their top k are
	// exactly g's.
	return s.top(cand, vals, k, idx)
}

// absNormalThreshold returns the t >= 0 for which P(|X| >= t) = q when X ~ N(mu, sigma²),
// 0 < q < 1. With mu = 0 that is Shi et al.'s threshold, sigma·Φ⁻¹(1 − q/2); their |mu| + that
// for mu ≠ 0 puts q/2 in the tail on mu's side but less in the other, which is 2|mu| further
// out (at |mu| = 0.15·sigma and q = 1%, about 0.7q in all), so this solves for t instead:
// Newton's method on the two tails, from Shi et al.'s t, which is never too low, kept inside
// a bracket and bisecting whenever a step would leave it. Each step costs two erfc and a
// handful of steps converge, which is nothing beside a pass over the gradient.
func absNormalThreshold(mu, sigma, q float64) float64 {
	m := math.Abs(mu)
	// Φ⁻¹(1 − q/2) = √2·erfc⁻¹(q): erfc⁻¹ keeps its precision at the tiny q of low
	// densities, where 1 − q/2 would round.
	hi := m + sigma*math.Sqrt2*math.Erfcinv(q)
	if m == 0 || sigma == 0 {
		return hi
	}
	s := sigma * math.Sqrt2
	lo := 0.0 // P(|X| >= 0) = 1 >= q
	t := hi
	for range 64 {
		// excess > 0: more than q of the mass reaches t, so t is too low.
		excess := 0.5*(math.Erfc((t-m)/s)+math.Erfc((t+m)/s)) - q
		if excess > 0 {
			lo = t
		} else {
			hi = t
		}
		a, b := (t-m)/sigma, (t+m)/sigma
		slope := -(math.Exp(-a*a/2) + math.Exp(-b*b/2)) / (sigma * math.Sqrt(2*math.Pi))
		next := t - excess/slope
		if !(next > lo && next < hi) { // also when the slope underflowed to 0
			next = lo + (hi-lo)/2
		}
		if math.Abs(next-t) <= 1e-7*sigma {
			return next
		}
		t = next
	}
	return t
}

// thresholdKey is the ordering key of the magnitude threshold t >= 0: magKey(t), or infKey
// when t is beyond float32, so that no finite element reaches it.
func thresholdKey(t float64) uint32 {
	if !(t < math.MaxFloat32) {
		return infKey
	}
	return magKey(float32(t))
}

// moments returns the mean and the (population) standard deviation of g, len(g) > 0, or
// false if g holds a NaN or an Inf, which the sums carry through. The sums run in float64,
// which no finite float32 values can overflow, over values shifted by g[0] so that a mean
// large against the spread does not cancel the variance away, in four independent lanes so
// that the loop is not bound by the latency of the additions.
func moments(g []float32) (mean, std float64, ok bool) {
	c := float64(g[0])
	var s0, s1, s2, s3, q0, q1, q2, q3 float64
	i := 0
	for ; i+4 <= len(g); i += 4 {
		x := g[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(x[0])-c, float64(x[1])-c, float64(x[2])-c, float64(x[3])-c
		s0, s1, s2, s3 = s0+d0, s1+d1, s2+d2, s3+d3
		q0, q1, q2, q3 = q0+d0*d0, q1+d1*d1, q2+d2*d2, q3+d3*d3
	}
	for _, x := range g[i:] {
		d := float64(x) - c
		s0 += d
		q0 += d * d
	}
	n := float64(len(g))
	d := (s0 + s1 + s2 + s3) / n
	v := (q0+q1+q2+q3)/n - d*d
	// An Inf makes the sum of squares Inf, a NaN or Infs of both signs make it NaN.
	if math.IsInf(v, 0) || math.IsNaN(v) || math.IsNaN(d) {
		return 0, 0, false
	}
	return c + d, math.Sqrt(max(v, 0)), true
}

// collect returns the indices and values of the elements of g, all finite, whose key is at
// least t, and the largest key of g, or false if more than limit reach t (the largest key
// is then that of the elements read).
func (s *GaussianK) collect(g []float32, t uint32, limit int) ([]int32, []float32, uint32, bool) {
	cand, vals := s.candIdx[:0], s.candVal[:0]
	i, top := nextAtLeast(g, 0, t, 0)
	for ; i < len(g); i, top = nextAtLeast(g, i+1, t, top) {
		if len(cand) == limit {
			s.candIdx, s.candVal = cand, vals // keep what the buffers grew to
			return nil, nil, top, false
		}
		// The buffers grow by append as the counts call for, not to limit, which the usual
		// count (about k) stays far below; once grown they are reused.
		cand, vals = append(cand, int32(i)), append(vals, g[i])
	}
	s.candIdx, s.candVal = cand, vals
	return cand, vals, top, true
}

// nextAtLeast returns the index of the first element of g from i on whose key is at least
// t, or len(g), and the larger of top and every key it read. It reads four elements at a
// time with one test of their largest key, so the usual case, none reaching t, costs no
// branch per element. It is a leaf function so that its state stays in registers, which a
// loop that also calls append to grow the buffers does not allow.
func nextAtLeast(g []float32, i int, t, top uint32) (int, uint32) {
	for ; i+4 <= len(g); i += 4 {
		x := g[i : i+4 : i+4]
		k0, k1, k2, k3 := magKey(x[0]), magKey(x[1]), magKey(x[2]), magKey(x[3])
		m := max(k0, k1, k2, k3)
		top = max(top, m)
		if m >= t {
			switch {
			case k0 >= t:
				return i, top
			case k1 >= t:
				return i + 1, top
			case k2 >= t:
				return i + 2, top
			}
			return i + 3, top
		}
	}
	for ; i < len(g); i++ {
		b := magKey(g[i])
		top = max(top, b)
		if b >= t {
			return i, top
		}
	}
	return len(g), top
}
