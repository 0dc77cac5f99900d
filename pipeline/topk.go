package pipeline

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// NonFiniteError reports a NaN or infinite gradient element. Top-k by magnitude has no
// meaning for such a tensor, and sending it would poison every worker's model, so selection
// refuses it and names the first offending position.
type NonFiniteError struct {
	Index int
	Value float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("pipeline: non-finite gradient element %v at index %d", e.Value, e.Index)
}

// magKey is the ordering key of |x|: the IEEE bits of a non-negative float order like
// unsigned integers, so clearing the sign bit lets selection work on integers.
func magKey(x float32) uint32 { return math.Float32bits(x) & 0x7fffffff }

// infKey is the key of +Inf; every key at or above it is Inf or NaN.
const infKey = 0x7f800000

// smallTopK is the length below which TopK.Select selects with quickselect on a copy of the keys:
// for short tensors the radix path's histogram scans and clears would cost more than the
// data, and per-tensor sparsification selects on many small tensors.
const smallTopK = 1 << 12

// A Selector picks the elements of a gradient a sparsifying pipeline sends: about k of
// them, returned as ascending indices in idx[:0] (reallocated only when its capacity is too
// small, so passing the previous result back avoids allocation). A NaN or ±Inf element is a
// *NonFiniteError. Selectors keep scratch buffers between calls and are not safe for
// concurrent use: give each goroutine its own.
type Selector interface {
	Select(g []float32, k int, idx []int32) ([]int32, error)
}

// TopK is the exact top-k Selector: the k largest-magnitude elements. Reused for every step
// it does not allocate once warmed up.
type TopK struct {
	hist1 []uint32 // counts by the high 16 bits of the key (the sign bit is always 0)
	hist2 []uint32 // counts by the low 16 bits, within the threshold's high bucket
	keys  []uint32 // copy of the keys for the quickselect path
}

// Select returns the indices of the k elements of g with the largest |g[i]|, in ascending
// index order, written into idx[:0] (idx is reallocated only if its capacity is below k, so
// passing the previous result back avoids allocation). k is clamped to [0, len(g)].
//
// The selection is exact and deterministic: among elements whose magnitude equals the k-th
// largest, the lowest indices are taken, so every run and every rank picks the same set.
// It runs in O(n): a two-pass 16-bit radix histogram on the magnitude bits finds the exact
// k-th largest key, and a third pass collects the indices, so no full sort is ever done.
// Any NaN or ±Inf in g is reported as a *NonFiniteError.
func (s *TopK) Select(g []float32, k int, idx []int32) ([]int32, error) {
	n := len(g)
	if n > math.MaxInt32 {
		return idx[:0], fmt.Errorf("pipeline: top-k over %d elements: indices overflow int32", n)
	}
	k = max(0, min(k, n))
	if cap(idx) < k {
		idx = make([]int32, 0, k)
	}
	out := idx[:0]
	if k == 0 || k == n {
		// Nothing to select, but the input must still be checked.
		for i, x := range g {
			if magKey(x) >= infKey {
				return out, &NonFiniteError{Index: i, Value: x}
			}
		}
		for i := range k {
			out = append(out, int32(i))
		}
		return out, nil
	}
	// t is the key of the k-th largest magnitude and ties how many elements equal to it
	// belong to the top k.
	var t uint32
	var ties int
	var err error
	if n < smallTopK {
		t, ties, err = s.thresholdSelect(g, k)
	} else {
		t, ties, err = s.thresholdRadix(g, k)
	}
	if err != nil {
		return out, err
	}
	// Elements above the threshold are all taken; the remaining slots go to the
	// lowest-indexed elements equal to it, which a single forward pass gives for free.
	for i, x := range g {
		if b := magKey(x); b > t || (b == t && ties > 0) {
			if b == t {
				ties--
			}
			out = append(out, int32(i))
			if len(out) == k {
				break
			}
		}
	}
	return out, nil
}

// thresholdRadix returns the key of the k-th largest magnitude of g, 1 <= k < len(g), and
// how many elements equal to it the top k holds, with two histogram passes: the first over the high 16 bits of every key, the second over the
// low 16 bits of the keys in the bucket that holds the k-th largest.
func (s *TopK) thresholdRadix(g []float32, k int) (uint32, int, error) {
	if s.hist1 == nil {
		s.hist1 = make([]uint32, 1<<15)
		s.hist2 = make([]uint32, 1<<16)
	}
	h1, h2 := s.hist1, s.hist2
	top := uint32(0)
	for i, x := range g {
		b := magKey(x)
		if b >= infKey {
			// Leave the histogram clean for the next call.
			clear(h1)
			return 0, 0, &NonFiniteError{Index: i, Value: x}
		}
		h1[b>>16]++
		top = max(top, b>>16)
	}
	// Scan down from the largest bucket: for small k this stops after a few buckets.
	hi, need := top, uint32(k)
	for ; ; hi-- {
		if c := h1[hi]; c < need {
			need -= c
		} else {
			break
		}
	}
	clear(h1[:top+1]) // nothing above top was touched
	top2 := uint32(0)
	for _, x := range g {
		if b := magKey(x); b>>16 == hi {
			h2[b&0xffff]++
			top2 = max(top2, b&0xffff)
		}
	}
	lo := top2
	for ; ; lo-- {
		if c := h2[lo]; c < need {
			need -= c
		} else {
			break
		}
	}
	clear(h2[:top2+1])
	return hi<<16 | lo, int(need), nil
}

// thresholdSelect is thresholdRadix by quickselect on a copy of the keys.
func (s *TopK) thresholdSelect(g []float32, k int) (uint32, int, error) {
	if cap(s.keys) < len(g) {
		s.keys = make([]uint32, len(g), max(len(g), smallTopK))
	}
	keys := s.keys[:len(g)]
	for i, x := range g {
		b := magKey(x)
		if b >= infKey {
			return 0, 0, &NonFiniteError{Index: i, Value: x}
		}
		keys[i] = b
	}
	t := selectKth(keys, len(keys)-k)
	// selectKth leaves every key above position len-k no smaller than t, so only that
	// stretch needs counting.
	ties := 0
	for _, b := range keys[len(keys)-k:] {
		if b == t {
			ties++
		}
	}
	return t, ties, nil
}

// selectKth returns the m-th smallest element of a (0-based), reordering a. It is
// quickselect with a median-of-three pivot; after 2·log2(n) rounds without converging it
// sorts what remains, so adversarial inputs cost O(n log n) rather than O(n²).
func selectKth(a []uint32, m int) uint32 {
	lo, hi := 0, len(a)-1
	budget := 2 * bits.Len(uint(len(a)))
	for lo < hi {
		if budget == 0 {
			slices.Sort(a[lo : hi+1])
			return a[m]
		}
		budget--
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		p := a[mid]
		// Hoare partition; stopping on equal keys keeps runs of ties balanced.
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// Now a[lo:j+1] <= p, a[i:hi+1] >= p and everything strictly between equals p.
		switch {
		case m <= j:
			hi = j
		case m >= i:
			lo = i
		default:
			return p
		}
	}
	return a[m]
}
