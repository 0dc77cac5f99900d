package compress

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// randomkStream is the PCG stream of every RandomK: the seed alone tells instances apart,
// and a stream other than SampledThreshold's keeps the two from drawing the same numbers
// for the same seed.
const randomkStream = 0x6a09e667f3bcc909

// RandomK is the random-k Selector: k distinct indices drawn uniformly at random, whatever
// the values, the unbiased baseline against which magnitude-based selection is judged.
// With error feedback the elements it leaves out are sent later, so it still converges,
// more slowly.
//
// The draw is Floyd's algorithm, which gives every k-subset of [0, n) the same probability
// with exactly k random numbers, over a bitmap of n bits kept in the selector; the indices
// then come out ascending either by sorting the k drawn (when k·log2(k) is below the n/64
// words of the bitmap) or by one scan of the bitmap, which also clears it. So a call costs
// O(k) random draws plus O(min(k log k, n/64)) to order them.
//
// It still reads all of g once: the pipelines rely on selection to stop a NaN or ±Inf
// gradient before it is sent (and picked up by every worker), and a selector that skipped the
// check would let a non-finite element through whenever it drew it. That pass is most of
// the cost; BenchmarkSelectors measures it beside the draw and ordering. A call that fails
// consumes no random numbers.
//
// The indices depend only on the seed and the sequence of (len(g), k) of the calls, not on
// the values: two RandomKs with equal seeds give equal results call for call, and RandomKs
// with different seeds (one per rank and selecting goroutine, as the pipelines seed them)
// send different elements. Exactly min(k, len(g)) indices, k = 0 and k = n included. Reused, it does not allocate once its bitmap has grown to
// the longest gradient (n/8 bytes); it is not safe for concurrent use. The zero RandomK is
// usable, as if seeded with 0.
type RandomK struct {
	seed uint64
	pcg  *rand.PCG
	rng  *rand.Rand
	bits []uint64 // membership bitmap of the draw, all zero between calls
}

// NewRandomK returns a RandomK whose draws come from a PCG seeded with seed.
func NewRandomK(seed uint64) *RandomK {
	pcg := rand.NewPCG(seed, randomkStream)
	return &RandomK{seed: seed, pcg: pcg, rng: rand.New(pcg)}
}

// Reseed implements Reseeder.
func (s *RandomK) Reseed(step, tensor int) {
	if s.pcg == nil {
		*s = *NewRandomK(0)
	}
	s.pcg.Seed(s.seed, drawStream(randomkStream, step, tensor))
}

// Select returns min(k, len(g)) distinct indices of g, uniformly at random, ascending, in
// idx[:0] (reallocated only if its capacity is below k). Any NaN or ±Inf in g is reported as
// a *NonFiniteError naming the first one.
func (s *RandomK) Select(g []float32, k int, idx []int32) ([]int32, error) {
	n := len(g)
	if n > math.MaxInt32 {
		return idx[:0], fmt.Errorf("compress: random-k over %d elements: indices overflow int32", n)
	}
	k = max(0, min(k, n))
	if cap(idx) < k {
		idx = make([]int32, 0, k)
	}
	out := idx[:0]
	if err := checkFinite(g); err != nil {
		return out, err
	}
	if k == n {
		for i := range n {
			out = append(out, int32(i))
		}
		return out, nil
	}
	if k == 0 {
		return out, nil
	}
	if s.rng == nil {
		*s = *NewRandomK(0)
	}
	words := (n + 63) / 64
	if len(s.bits) < words {
		s.bits = make([]uint64, words)
	}
	set := s.bits[:words]
	// Floyd: for j from n−k to n−1, draw t in [0, j] and take it, or j if t is taken
	// already. By induction each step leaves every subset of [0, j] of its size equally
	// likely, and j, new at that step, cannot be taken yet.
	out = out[:k]
	for i, j := 0, n-k; j < n; i, j = i+1, j+1 {
		t := s.rng.IntN(j + 1)
		if set[t>>6]&(1<<(t&63)) != 0 {
			t = j
		}
		set[t>>6] |= 1 << (t & 63)
		out[i] = int32(t)
	}
	if k*bits.Len(uint(k)) < words {
		slices.Sort(out)
		for _, t := range out {
			set[t>>6] = 0
		}
		return out, nil
	}
	out = out[:0]
	for w, b := range set {
		if b == 0 {
			continue
		}
		set[w] = 0
		for ; b != 0; b &= b - 1 {
			out = append(out, int32(w<<6+bits.TrailingZeros64(b)))
		}
	}
	return out, nil
}
