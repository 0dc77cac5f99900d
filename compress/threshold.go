package compress

import (
	"encoding/binary"
	"math"
)

// ThresholdKind is the Timing kind of a threshold scan (AppendAtLeast), as the simulator's
// selection model knows it.
const ThresholdKind = "threshold"

// AppendAtLeast is the threshold selector, the selection of ExDyna (and of any pipeline
// whose threshold is kept rather than found): it appends to dst the index, plus base, of
// every element of g whose magnitude reaches tau, as little-endian uint32 in ascending
// order, and returns the extended buffer. Magnitudes compare as integers: the bits of a
// non-negative float32 order like its value, so clearing the sign bit gives a key. tau must
// be positive; a NaN or ±Inf element has a key above every threshold and is selected.
func AppendAtLeast(dst []byte, g []float32, base int, tau float32) []byte {
	key := math.Float32bits(tau)
	for i, a := range g {
		if magKey(a) >= key {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(base+i))
		}
	}
	return dst
}

// AppendIndicesAtLeast is AppendAtLeast for callers that keep indices as int32: it appends
// the position in g of every element whose magnitude reaches tau, in ascending order.
func AppendIndicesAtLeast(dst []int32, g []float32, tau float32) []int32 {
	key := math.Float32bits(tau)
	for i, a := range g {
		if magKey(a) >= key {
			dst = append(dst, int32(i))
		}
	}
	return dst
}

// CountAtLeast is how many elements of g AppendAtLeast would select at tau.
func CountAtLeast(g []float32, tau float32) int {
	key, n := math.Float32bits(tau), 0
	for _, a := range g {
		if magKey(a) >= key {
			n++
		}
	}
	return n
}

// estimateAbove is how many sampled elements KthEstimator expects at or above the
// magnitude it estimates. The count of the whole slice at or above the estimate then strays
// from k by about 1/sqrt(estimateAbove), 5%, one standard deviation.
const estimateAbove = 400

// KthEstimator estimates the k-th largest magnitude of a slice from a sample of it: a
// threshold that lets about k elements through, found for a small fraction of what an
// exact selection costs when k is large. It is deterministic: equal slices give equal
// estimates on every rank. The zero KthEstimator is ready to use; it keeps its scratch
// space from call to call.
type KthEstimator struct {
	keys []uint32
}

// Estimate returns an estimate of the k-th largest magnitude in g, and how many elements
// it sampled to find it. With k at most estimateAbove it samples all of g and the estimate
// is exact. Otherwise it takes one element from each of m equal strides of g, m chosen so
// that about estimateAbove sampled elements lie at or above the k-th largest; the position
// within each stride comes from a fixed hash of the stride's number, so that a regular
// layout of g (kernels, channels) does not line up with the sample. k is clamped to
// [1, len(g)]; an empty g gives +Inf, which no element reaches. A NaN or ±Inf element
// counts as larger than every finite one, so an estimate may be NaN or +Inf.
func (e *KthEstimator) Estimate(g []float32, k int) (float32, int) {
	n := len(g)
	if n == 0 {
		return float32(math.Inf(1)), 0
	}
	k = max(1, min(k, n))
	m := n
	if k > estimateAbove {
		m = int(min(int64(n), (int64(estimateAbove)*int64(n)+int64(k)-1)/int64(k)))
	}
	e.keys = grow(e.keys, m)
	if m == n {
		for i, v := range g {
			e.keys[i] = magKey(v)
		}
	} else {
		for i := range e.keys {
			lo, hi := int(int64(i)*int64(n)/int64(m)), int(int64(i+1)*int64(n)/int64(m))
			e.keys[i] = magKey(g[lo+strideOffset(i, hi-lo)])
		}
	}
	j := max(1, min(m, int((int64(k)*int64(m)+int64(n)/2)/int64(n)))) // k scaled to the sample
	return math.Float32frombits(selectKth(e.keys, m-j)), m
}

// strideOffset is a position in [0, width) that varies irregularly with the stride i: the
// high bits of a Fibonacci hash of i.
func strideOffset(i, width int) int {
	return int((uint64(i) * 0x9e3779b97f4a7c15 >> 32) % uint64(width))
}

// histogramShift drops the low mantissa bits of a magnitude key: what remains, the
// exponent and the top three mantissa bits, numbers the bin, so that each bin spans a
// factor of 2^(1/8), about 9%.
const histogramShift = 20

// HistogramBins is the number of bins a magnitude histogram can have; the last ones hold
// the infinities and NaNs.
const HistogramBins = 1 << (31 - histogramShift)

// finiteBins are the bins of finite magnitudes.
const finiteBins = infKey >> histogramShift

// A Histogram counts the magnitudes of a sample in the bins of histogramShift: Counts[i]
// sampled elements fell in bin First+i, and each sampled element stands for Weight
// elements of the whole it was sampled from.
type Histogram struct {
	First  int
	Counts []uint32
	Weight float64
}

// Histogram returns in dst the histogram of the sample the last Estimate drew from g,
// trimmed to the non-empty bins; its weight is len(g) over the sample's size.
func (e *KthEstimator) Histogram(g []float32, dst []uint32) Histogram {
	if len(e.keys) == 0 || len(g) == 0 {
		return Histogram{Counts: dst[:0]}
	}
	first, last := HistogramBins, -1
	for _, key := range e.keys {
		b := int(key >> histogramShift)
		first, last = min(first, b), max(last, b)
	}
	counts := grow(dst, last-first+1)
	clear(counts)
	for _, key := range e.keys {
		counts[int(key>>histogramShift)-first]++
	}
	return Histogram{First: first, Counts: counts, Weight: float64(len(g)) / float64(len(e.keys))}
}

// Above returns how many elements of the whole h was sampled from reach magnitude t, by
// h's sample: the bins above t's whole, and of t's own bin the share above t, taken as
// spread geometrically within the bin as ThresholdFor takes it. Infinite and NaN
// magnitudes do not count.
func (h Histogram) Above(t float32) float64 {
	tb := int(magKey(t) >> histogramShift)
	n := 0.0
	for i, c := range h.Counts {
		b := h.First + i
		switch {
		case c == 0 || b < tb || b >= finiteBins:
		case b > tb:
			n += float64(c)
		default:
			lo, hi := binEdge(b), binEdge(b+1)
			if tv := float64(t); tv > lo && !math.IsInf(hi, 1) {
				n += float64(c) * math.Log(hi/tv) / math.Log(hi/lo)
			} else {
				n += float64(c)
			}
		}
	}
	return n * h.Weight
}

// ThresholdFor returns the magnitude that about k elements of the wholes the histograms
// were sampled from reach, together: the bin where the weighted count from the top passes
// k, and within it a geometric interpolation. It reports false when the histograms hold no
// finite non-zero magnitude. With fewer than k elements in all, it returns the smallest
// sampled magnitude.
func ThresholdFor(hs []Histogram, k int) (float32, bool) {
	var sum [finiteBins]float64
	lowest := finiteBins
	for _, h := range hs {
		for i, c := range h.Counts {
			// Bin 0 holds zero and the tiniest subnormals: no threshold there.
			if b := h.First + i; b > 0 && b < finiteBins && c > 0 {
				sum[b] += float64(c) * h.Weight
				lowest = min(lowest, b)
			}
		}
	}
	above := 0.0
	for b := finiteBins - 1; b >= lowest; b-- {
		if sum[b] > 0 && above+sum[b] >= float64(k) {
			lo, hi := binEdge(b), binEdge(b+1)
			if math.IsInf(hi, 1) {
				return float32(lo), true
			}
			f := (float64(k) - above) / sum[b] // the share of the bin to take, from its top
			return float32(hi * math.Pow(lo/hi, f)), true
		}
		above += sum[b]
	}
	if lowest >= finiteBins {
		return 0, false
	}
	return float32(binEdge(lowest)), true
}

// binEdge is the smallest magnitude of bin b.
func binEdge(b int) float64 { return float64(math.Float32frombits(uint32(b) << histogramShift)) }
