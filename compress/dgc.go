package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Sampling parameters of SampledThreshold.
const (
	// sampleAbove is how many sampled elements are expected above the k-th largest: the
	// number of elements the estimate lets through then has a relative spread of about
	// 1/sqrt(sampleAbove), 10%. DGC samples a fixed 1% of the gradient instead, which on a
	// GPU costs little; on a CPU each sampled element is a cache miss, so sampling 1% of a
	// large gradient costs about as much as the pass it saves, and the precision depends
	// on this count alone.
	sampleAbove = 100
	// sampleMargin is how many standard deviations of that count the estimate is moved
	// down, so that it usually lets a few more than k elements through, which the exact
	// refinement then cuts to exactly TopK's answer.
	sampleMargin = 2
	// smallSampled is the length below which SampledThreshold is exact TopK: for shorter
	// gradients sampling and refining cost more than the saved pass (BenchmarkSampled
	// measures where the two cross).
	smallSampled = 1 << 17
	// sampleStream is the PCG stream of every SampledThreshold: the seed alone tells
	// instances apart.
	sampleStream = 0x9e3779b97f4a7c15
)

// SampledThreshold is an approximate top-k Selector in the manner of DGC (Lin et al., 2018):
// it estimates the k-th largest magnitude from a random sample of the gradient, takes every
// element at or above the estimate in one pass, and, when more than k pass, keeps the k
// largest of them by exact top-k. It so reads the gradient once where TopK reads it twice,
// which pays on long gradients at small densities; at large densities, or under
// smallSampled elements, TopK is faster (BenchmarkSampled compares them).
//
// The sample takes one uniformly random position in each of m equal strides of g (positions
// ascend, which keeps the reads cheap, and no stretch of a fused gradient goes unsampled),
// with m = 100·n/k, so that about 100 sampled elements lie above the k-th largest. The
// estimate is the sample's j-th largest with j = m·k/n + 2·sqrt(m·k/n), two standard
// deviations beyond the expected rank, so it errs low. What follows:
//   - At most k indices, ascending and unique, and every element returned is at least as
//     large in magnitude as every element not returned. When at least k elements reach the
//     estimate (by design the common case) the result is exactly TopK's, ties included.
//   - Otherwise it returns fewer than k: all elements at or above the estimate. How many
//     depends on ranks only, not on the distribution of the magnitudes. Measured over 1520
//     calls each on Gaussian, Cauchy and log-uniformly scaled Gaussian gradients (n from
//     128K to 4M, k/n from 0.1% to 10%, k >= 1600): exactly k in 97.6-97.9% of calls,
//     0.999k on average, never fewer than 0.87k (in an earlier run of 5160 calls, once
//     0.78k: the tail is thin, not absent). TestSampledDensity checks [0.75k, k].
//   - When more than 2k elements reach the estimate (many elements tied at it, as in a
//     gradient that is mostly zeros) it gives up on the candidates and returns TopK's
//     answer, which costs two more passes.
//   - n < 131072, k < 1600 (the sample would exceed n/16), k = 0 and k = n get TopK's
//     exact answer directly.
//
// NaN and ±Inf are detected in the pass, as TopK does. It is allocation-free once its
// buffers have grown to the largest call, and not safe for concurrent use.
type SampledThreshold struct {
	seed    uint64
	pcg     *rand.PCG
	rng     *rand.Rand
	refiner // refinement, and (its TopK) the whole selection when sampling does not pay

	sample  []float32 // the sampled elements
	candIdx []int32   // indices of the elements at or above the estimate, ascending
	candVal []float32 // their values
}

// NewSampledThreshold returns a SampledThreshold whose sample positions come from a PCG
// seeded with seed: equal seeds give equal results call for call. The zero SampledThreshold
// is usable too, as if seeded with 0.
func NewSampledThreshold(seed uint64) *SampledThreshold {
	pcg := rand.NewPCG(seed, sampleStream)
	return &SampledThreshold{seed: seed, pcg: pcg, rng: rand.New(pcg)}
}

// Reseed implements Reseeder.
func (s *SampledThreshold) Reseed(step, tensor int) {
	if s.pcg == nil {
		s.pcg = rand.NewPCG(0, sampleStream)
		s.rng = rand.New(s.pcg)
	}
	s.pcg.Seed(s.seed, drawStream(sampleStream, step, tensor))
}

// Select returns the indices of at most k elements of g, the largest in magnitude, as
// ascending indices in idx[:0]; see the type's comment for how close to k it gets.
func (s *SampledThreshold) Select(g []float32, k int, idx []int32) ([]int32, error) {
	n := len(g)
	k = max(0, min(k, n))
	if k == 0 || k == n || n < smallSampled || n > math.MaxInt32 {
		return s.exact.Select(g, k, idx)
	}
	m := sampleSize(n, k)
	if m > n/16 {
		// Below 16·sampleAbove = 1600 elements to select, the sample would cost about
		// what it saves.
		return s.exact.Select(g, k, idx)
	}
	t, ok := s.estimate(g, k, m)
	if !ok {
		return s.exact.Select(g, k, idx) // the sample holds a NaN or Inf: report the first
	}
	cand, vals, err := s.collect(g, t, 2*k)
	if err != nil {
		return idx[:0], err
	}
	if cand == nil {
		// Over 2k elements reach the estimate, so many tie at it: exact selection costs
		// less than refining that many candidates.
		return s.exact.Select(g, k, idx)
	}
	// The candidates hold every element at or above the estimate, so their top k are
	// exactly g's.
	return s.top(cand, vals, k, idx)
}

// refiner is the last step the threshold selectors share: from the candidates a threshold
// let through, keep the k largest.
type refiner struct {
	exact TopK    // the refinement, and the selector's exact fallback
	pos   []int32 // positions among the candidates kept by the refinement
}

// top returns in idx[:0], ascending, the k candidates of largest magnitude (ties to the
// lowest positions), or all of them when there are no more than k. When the candidates
// hold every element of g at or above g's k-th largest magnitude, that is exactly g's top k.
// vals must be finite: the selectors checked them while collecting.
func (r *refiner) top(cand []int32, vals []float32, k int, idx []int32) ([]int32, error) {
	if len(cand) <= k {
		return append(idx[:0], cand...), nil
	}
	var err error
	if r.pos, err = r.exact.Select(vals, k, r.pos); err != nil {
		return idx[:0], fmt.Errorf("compress: refining %d candidates: %w", len(cand), err)
	}
	out := grow(idx, k)
	for j, p := range r.pos {
		out[j] = cand[p]
	}
	return out, nil
}

// sampleSize is the number of elements SampledThreshold samples from n > 0 to select
// 0 < k <= n: enough that sampleAbove of them are expected above the k-th largest.
func sampleSize(n, k int) int {
	return int(min(int64(n), int64(sampleAbove)*int64(n)/int64(k)))
}

// estimate returns the key of an estimate of g's k-th largest magnitude from m sampled
// elements, one at a random position in each of m equal strides of g, or false if the
// sample holds a non-finite element.
func (s *SampledThreshold) estimate(g []float32, k, m int) (uint32, bool) {
	if s.rng == nil {
		s.pcg = rand.NewPCG(0, sampleStream)
		s.rng = rand.New(s.pcg)
	}
	n := len(g)
	s.sample = grow(s.sample, m)
	for i := range s.sample {
		lo, hi := int(int64(i)*int64(n)/int64(m)), int(int64(i+1)*int64(n)/int64(m))
		s.sample[i] = g[lo+s.rng.IntN(hi-lo)]
	}
	// The sample's count above the k-th largest of g is about binomial with mean ks and
	// variance ks; aiming sampleMargin deviations higher errs towards more candidates.
	ks := float64(k) * float64(m) / float64(n)
	j := min(m, int(math.Ceil(ks+sampleMargin*math.Sqrt(ks))))
	top, err := s.exact.Select(s.sample, j, s.pos)
	s.pos = top
	if err != nil {
		return 0, false
	}
	t := uint32(infKey)
	for _, p := range top {
		t = min(t, magKey(s.sample[p]))
	}
	return t, true
}

// collect returns the indices and values of the elements of g whose key is at least t,
// a finite key, so that every NaN and Inf is among them and is reported, the first as a
// *NonFiniteError. It returns nil if there are more than limit.
func (s *SampledThreshold) collect(g []float32, t uint32, limit int) ([]int32, []float32, error) {
	if cap(s.candIdx) < limit {
		s.candIdx = make([]int32, 0, limit)
		s.candVal = make([]float32, 0, limit)
	}
	cand, vals := s.candIdx[:0], s.candVal[:0]
	for i, x := range g {
		b := magKey(x)
		if b < t {
			continue
		}
		if b >= infKey {
			return nil, nil, &NonFiniteError{Index: i, Value: x}
		}
		if len(cand) == limit {
			// The rest of g is unchecked, but the caller hands it to exact selection.
			return nil, nil, nil
		}
		cand, vals = append(cand, int32(i)), append(vals, x)
	}
	return cand, vals, nil
}
