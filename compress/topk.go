package compress

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// smallTopK is the length below which TopK.Select selects with quickselect on a copy of the keys:
// for short tensors the radix path's histogram scans and clears would cost more than the
// data, and per-tensor sparsification selects on many small tensors.
const smallTopK = 1 << 12

// chunkTopK is the fewest elements TopK.Select gives one goroutine, so its passes run in
// parallel from 2·chunkTopK = 1M elements (4 MB). Below some hundreds of thousands of
// elements, waking a goroutine and merging a second set of histograms cost more than the
// half pass they save; BenchmarkTopKParallel (two goroutines against one) measures where
// the two cross, and the cut sits above that point because a pipeline's selections
// already run beside other work.
const chunkTopK = 1 << 19

// TopK is the exact top-k Selector: the k largest-magnitude elements. Reused for every step
// it does not allocate once warmed up, except that a call long enough to run in parallel
// allocates a 96-byte closure per extra goroutine and parallel pass: with GOMAXPROCS=2,
// two or three objects per call, whatever the length. It must not be copied (go vet
// says so): copies would share scratch.
type TopK struct {
	keys  []uint32    // copy of the keys for the quickselect path
	parts []radixPart // per-goroutine state of the radix path; parts[0] serves the serial case

	// The radix path gathers the elements at or above the threshold's high bucket here when
	// they are few, so the final pass reads them instead of the whole gradient.
	candIdx []int32
	candKey []uint32

	wg sync.WaitGroup

	// Overrides for tests, zero meaning the default: the fewest elements per goroutine
	// (chunkTopK) and the most goroutines (runtime.GOMAXPROCS).
	chunk, procs int
}

// radixPart is one goroutine's share of the radix path: a contiguous stretch g[start:end]
// and its own histograms, merged by the caller between passes, so no pass shares memory
// it writes.
type radixPart struct {
	start, end int
	// high counts keys by their high 16 bits (the sign bit is always 0, so 1<<15 buckets);
	// top is the highest bucket counted, where the scan for the k-th largest starts and
	// clearing stops.
	high []uint32
	top  uint32
	// low counts the keys in the threshold's high bucket by their low 16 bits, and
	// lowCoarse by the top 8 of those: the scan for the threshold walks 256 coarse buckets
	// and then 256 fine ones instead of up to 65536, and clearing skips the empty stretches,
	// which for short gradients would cost more than the passes.
	low       []uint32
	lowCoarse [256]uint32
	bad       int // index of the first non-finite element in the stretch, or -1

	// Set when the histograms are merged: the stretch's keys above the threshold's bucket
	// (then above the threshold) and in it (then equal to it).
	above, equal int
	// The stretch's candidates are candIdx[coff:coff+cn]; its results go to out[off:off+n],
	// ties of them equal to the threshold.
	coff, cn, off, n, ties int
}

// pass names a step of the radix path, so one function runs any of them on a part (a
// function value would escape to the heap on every call, even the serial ones).
type pass int

const (
	passHigh     pass = iota // high over the stretch, and the non-finite check
	passGather               // low over the high bucket, collecting candidates
	passLow                  // low over the high bucket alone
	passTake                 // the stretch's share of the result, from the gradient
	passTakeCand             // the stretch's share of the result, from the candidates
)

// Select returns the indices of the k elements of g with the largest |g[i]|, in ascending
// index order, written into idx[:0] (idx is reallocated only if its capacity is below k, so
// passing the previous result back avoids allocation). k is clamped to [0, len(g)].
//
// The selection is exact and deterministic: among elements whose magnitude equals the k-th
// largest, the lowest indices are taken, so every run and every rank picks the same set.
// It runs in O(n) without sorting: a histogram of the high 16 bits of the magnitudes finds
// the bucket of the k-th largest, a histogram of the low 16 bits of the keys in that bucket
// finds the key itself, and a last pass collects the indices. When few elements reach the
// bucket (the usual case: k is a small fraction of n) the second pass also gathers them and
// the last pass reads only those, so the gradient is read twice. From 1M elements the
// passes are split across goroutines, with the same result.
// Any NaN or ±Inf in g is reported as a *NonFiniteError naming the first one.
func (s *TopK) Select(g []float32, k int, idx []int32) ([]int32, error) {
	n := len(g)
	if n > math.MaxInt32 {
		return idx[:0], fmt.Errorf("compress: top-k over %d elements: indices overflow int32", n)
	}
	k = max(0, min(k, n))
	if cap(idx) < k {
		idx = make([]int32, 0, k)
	}
	out := idx[:0]
	if k == 0 || k == n {
		// Nothing to select, but the input must still be checked.
		if err := checkFinite(g); err != nil {
			return out, err
		}
		for i := range k {
			out = append(out, int32(i))
		}
		return out, nil
	}
	if n >= smallTopK {
		return s.selectRadix(g, k, out)
	}
	t, ties, err := s.thresholdSelect(g, k)
	if err != nil {
		return out, err
	}
	out = out[:k]
	take(g, 0, t, ties, out)
	return out, nil
}

// checkFinite returns a *NonFiniteError for the first NaN or ±Inf in g.
func checkFinite(g []float32) error {
	for i, x := range g {
		if magKey(x) >= infKey {
			return &NonFiniteError{Index: i, Value: x}
		}
	}
	return nil
}

// take fills dst with the indices, offset by base, of the elements of g whose key is above
// t and of the first ties elements equal to t, in index order: one forward pass gives the
// lowest-indexed ties for free. The caller sizes dst to exactly that many.
func take(g []float32, base int, t uint32, ties int, dst []int32) {
	if len(dst) == 0 {
		return
	}
	j := 0
	for i, x := range g {
		if b := magKey(x); b > t || (b == t && ties > 0) {
			if b == t {
				ties--
			}
			dst[j] = int32(base + i)
			if j++; j == len(dst) {
				return
			}
		}
	}
}

// takeCand is take over gathered candidates: indices idx with keys keys.
func takeCand(idx []int32, keys []uint32, t uint32, ties int, dst []int32) {
	if len(dst) == 0 {
		return
	}
	j := 0
	for i, b := range keys {
		if b > t || (b == t && ties > 0) {
			if b == t {
				ties--
			}
			dst[j] = idx[i]
			if j++; j == len(dst) {
				return
			}
		}
	}
}

// selectRadix is Select by radix histograms, for 1 <= k < len(g) and len(g) >= smallTopK.
func (s *TopK) selectRadix(g []float32, k int, out []int32) ([]int32, error) {
	parts := s.split(len(g))
	s.run(passHigh, len(g), g, parts, 0, nil)
	for i := range parts {
		if bad := parts[i].bad; bad >= 0 {
			for j := range parts {
				clear(parts[j].high[:parts[j].top+1]) // leave them clean for the next call
			}
			return out, &NonFiniteError{Index: bad, Value: g[bad]}
		}
	}
	hi, need := highBucket(parts, k)
	// The candidates are the keys in or above bucket hi. Gathering them costs a write each
	// and spares the last pass a read of the whole gradient; the bound of 1/8 of the length
	// keeps that a saving and caps the buffers a TopK keeps at a quarter of g's bytes.
	cands := 0
	for i := range parts {
		p := &parts[i]
		p.coff, p.cn = cands, p.above+p.equal
		cands += p.cn
	}
	gather := cands <= len(g)/8
	if gather {
		if cap(s.candIdx) < cands {
			// With headroom: the count varies from call to call.
			s.candIdx = make([]int32, 0, cands+cands/4)
			s.candKey = make([]uint32, 0, cands+cands/4)
		}
		s.candIdx, s.candKey = s.candIdx[:cands], s.candKey[:cands]
		s.run(passGather, len(g), g, parts, hi, nil)
	} else {
		s.run(passLow, len(g), g, parts, hi, nil)
	}
	lo, ties := lowBits(parts, need)
	// Share out the k slots in part order: each part takes all its keys above the
	// threshold and, while they last, its keys equal to it, so the ties go to the lowest
	// indices exactly as one pass in index order would give them.
	off := 0
	for i := range parts {
		p := &parts[i]
		p.ties = min(p.equal, ties)
		ties -= p.ties
		p.off, p.n = off, p.above+p.ties
		off += p.n
	}
	out = out[:k]
	if gather {
		s.run(passTakeCand, cands, g, parts, hi<<16|lo, out)
	} else {
		s.run(passTake, len(g), g, parts, hi<<16|lo, out)
	}
	return out, nil
}

// split cuts n elements into one contiguous stretch per goroutine and returns their parts,
// whose histograms are allocated once and left clean by every call.
func (s *TopK) split(n int) []radixPart {
	w := n / s.chunkSize()
	if w >= 2 {
		procs := s.procs
		if procs <= 0 {
			procs = runtime.GOMAXPROCS(0)
		}
		w = min(w, procs)
	}
	w = max(w, 1)
	for len(s.parts) < w {
		s.parts = append(s.parts, radixPart{high: make([]uint32, 1<<15), low: make([]uint32, 1<<16)})
	}
	parts := s.parts[:w]
	for i := range parts {
		p := &parts[i]
		p.start, p.end = i*(n/w)+min(i, n%w), (i+1)*(n/w)+min(i+1, n%w)
		p.top = 0
		p.bad = -1
		p.above, p.equal = 0, 0
	}
	return parts
}

// run does one pass, reading work elements, over every part: the first on the calling
// goroutine and each other on its own, unless the pass is too short to pay for waking
// goroutines (the final pass over gathered candidates usually is). t is the pass's
// threshold: the high bucket for passGather and passLow, the full key for the final passes,
// which write into out.
func (s *TopK) run(ps pass, work int, g []float32, parts []radixPart, t uint32, out []int32) {
	if work < 2*s.chunkSize() {
		for i := range parts {
			s.do(ps, g, &parts[i], t, out)
		}
		return
	}
	for i := 1; i < len(parts); i++ {
		p := &parts[i]
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.do(ps, g, p, t, out)
		}()
	}
	s.do(ps, g, &parts[0], t, out)
	s.wg.Wait()
}

// chunkSize is the fewest elements a pass gives one goroutine.
func (s *TopK) chunkSize() int {
	if s.chunk > 0 {
		return s.chunk
	}
	return chunkTopK
}

// do runs pass ps over part p.
func (s *TopK) do(ps pass, g []float32, p *radixPart, t uint32, out []int32) {
	switch ps {
	case passHigh:
		p.countHigh(g[p.start:p.end], p.start)
	case passGather:
		p.gather(g[p.start:p.end], p.start, t, s.candIdx[p.coff:p.coff+p.cn], s.candKey[p.coff:p.coff+p.cn])
	case passLow:
		p.countLow(g[p.start:p.end], t)
	case passTake:
		take(g[p.start:p.end], p.start, t, p.ties, out[p.off:p.off+p.n])
	case passTakeCand:
		takeCand(s.candIdx[p.coff:p.coff+p.cn], s.candKey[p.coff:p.coff+p.cn], t, p.ties, out[p.off:p.off+p.n])
	}
}

// countHigh counts the keys of g, the part's stretch starting at index base, by their high
// 16 bits, stopping at the first non-finite element.
func (p *radixPart) countHigh(g []float32, base int) {
	h := p.high[:1<<15]
	top := uint32(0)
	for i, x := range g {
		b := magKey(x)
		if b >= infKey {
			p.bad = base + i
			break
		}
		h[b>>16]++
		top = max(top, b>>16)
	}
	p.top = top
}

// countLow counts the keys of g in high bucket hi by their low 16 bits.
func (p *radixPart) countLow(g []float32, hi uint32) {
	h, c := p.low[:1<<16], &p.lowCoarse
	for _, x := range g {
		if b := magKey(x); b>>16 == hi {
			h[b&0xffff]++
			c[b>>8&0xff]++
		}
	}
}

// gather is countLow that also copies every key of g in or above bucket hi, with its index
// (g starts at base), to idx and keys, which the caller sized to exactly that many.
func (p *radixPart) gather(g []float32, base int, hi uint32, idx []int32, keys []uint32) {
	h, c := p.low[:1<<16], &p.lowCoarse
	j := 0
	for i, x := range g {
		b := magKey(x)
		if b>>16 < hi {
			continue
		}
		idx[j], keys[j] = int32(base+i), b
		j++
		if b>>16 == hi {
			h[b&0xffff]++
			c[b>>8&0xff]++
		}
	}
}

// highBucket merges the parts' high histograms, scanning down from the highest bucket any
// of them counted, and returns the bucket holding the need-th largest key and how many of
// that bucket's keys the top need takes. It sets each part's above to the keys it counted
// higher and its equal to those in the bucket, and clears the histograms for the next call.
func highBucket(parts []radixPart, need int) (uint32, int) {
	top := uint32(0)
	for i := range parts {
		top = max(top, parts[i].top)
	}
	b := top
	for {
		c := 0
		for i := range parts {
			c += int(parts[i].high[b])
		}
		if c >= need {
			break
		}
		need -= c
		b-- // the counts add up to at least need, so b stops before passing 0
	}
	for i := range parts {
		p := &parts[i]
		h := p.high[:p.top+1]
		p.above, p.equal = 0, 0
		if int(b) < len(h) {
			p.above = sum(h[b+1:])
			p.equal = int(h[b])
		}
		clear(h)
	}
	return b, need
}

// lowBits is highBucket for the low histograms, coarse then fine: it returns the low 16
// bits of the need-th largest key within the high bucket and how many keys equal to it the
// top need takes, adds to each part's above its keys above that, and sets its equal.
func lowBits(parts []radixPart, need int) (uint32, int) {
	cb := 0xff
	for {
		c := 0
		for i := range parts {
			c += int(parts[i].lowCoarse[cb])
		}
		if c >= need {
			break
		}
		need -= c
		cb--
	}
	lo := cb<<8 | 0xff
	for {
		c := 0
		for i := range parts {
			c += int(parts[i].low[lo])
		}
		if c >= need {
			break
		}
		need -= c
		lo--
	}
	for i := range parts {
		p := &parts[i]
		p.above += sum(p.lowCoarse[cb+1:]) + sum(p.low[lo+1:(cb+1)<<8])
		p.equal = int(p.low[lo])
		for c, n := range p.lowCoarse {
			if n > 0 {
				clear(p.low[c<<8 : (c+1)<<8])
			}
		}
		clear(p.lowCoarse[:])
	}
	return uint32(lo), need
}

func sum(a []uint32) int {
	s := 0
	for _, c := range a {
		s += int(c)
	}
	return s
}

// thresholdSelect returns the key of the k-th largest magnitude of g, 1 <= k < len(g), and
// how many elements equal to it the top k holds, by quickselect on a copy of the keys.
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
