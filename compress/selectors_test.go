package compress

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/pipeline"
)

func TestNewSelector(t *testing.T) {
	if names := SelectorNames(); !slices.Equal(names, []string{"dgc", "gaussiank", "randomk", "topk"}) {
		t.Fatalf("SelectorNames() = %v, want the four selectors, sorted", names)
	}
	g := []float32{3, -1, 4, -1, 5, -9, 2, 6}
	for _, c := range []struct {
		name  string
		want  string // type of the selector
		exact bool   // whether it must return the exact top 3 of g
	}{
		{"topk", "*compress.TopK", true},
		{"", "*compress.TopK", true},
		{"dgc", "*compress.SampledThreshold", true}, // exact below smallSampled elements
		{"sampled", "*compress.SampledThreshold", true},
		{"gaussiank", "*compress.GaussianK", false},
		{"randomk", "*compress.RandomK", false},
	} {
		a, err := NewSelector(c.name, 1)
		if err != nil {
			t.Fatalf("NewSelector(%q): %v", c.name, err)
		}
		if got := fmt.Sprintf("%T", a); got != c.want {
			t.Errorf("NewSelector(%q) is a %s, want %s", c.name, got, c.want)
		}
		b, _ := NewSelector(c.name, 1)
		if a == b {
			t.Errorf("NewSelector(%q) returned the same selector twice", c.name)
		}
		idx, err := a.Select(g, 3, nil)
		if err != nil {
			t.Fatalf("NewSelector(%q).Select: %v", c.name, err)
		}
		if c.exact && !slices.Equal(idx, []int32{4, 5, 7}) {
			t.Errorf("NewSelector(%q).Select = %v; want [4 5 7]", c.name, idx)
		}
		checkSelection(t, c.name, g, 3, idx)
	}
	if slices.Contains(SelectorNames(), "sampled") {
		t.Error(`the alias "sampled" is listed beside "dgc"`)
	}
	for _, name := range SelectorNames() {
		if _, err := NewSelector(name, 0); err != nil {
			t.Errorf("listed name %q: %v", name, err)
		}
	}
	for _, name := range []string{"DGC", "TopK", "top-k ", "gaussian", "random"} {
		s, err := NewSelector(name, 0)
		if err == nil {
			t.Fatalf("NewSelector(%q) = %T, want an error", name, s)
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+name+`"`) || !strings.Contains(msg, strings.Join(SelectorNames(), ", ")) {
			t.Errorf("NewSelector(%q) error %q should name it and list %v", name, msg, SelectorNames())
		}
	}
}

// exactCount reports whether selector name always returns min(k, n) indices.
func exactCount(name string) bool { return name == "topk" || name == "randomk" }

// checkSelection checks what every selector promises, on any input: at most k indices
// (exactly k for topk and randomk), ascending, unique and in range; at least one when
// k >= 1 and g is not empty, so no tensor goes missing; and, for the selectors that rank by
// magnitude, none smaller than an element left out (checkSampled, which also wants TopK's
// answer whenever k come back).
func checkSelection(t *testing.T, name string, g []float32, k int, got []int32) {
	t.Helper()
	k = max(0, min(k, len(g)))
	if len(got) > k || exactCount(name) && len(got) != k {
		t.Fatalf("%s: %d indices for k=%d", name, len(got), k)
	}
	if k >= 1 && len(got) == 0 {
		t.Fatalf("%s: nothing selected for k=%d of %d", name, k, len(g))
	}
	for j, i := range got {
		if i < 0 || int(i) >= len(g) {
			t.Fatalf("%s: index %d out of range [0, %d)", name, i, len(g))
		}
		if j > 0 && i <= got[j-1] {
			t.Fatalf("%s: indices not ascending and unique at %d: %d after %d", name, j, i, got[j-1])
		}
	}
	if name != "randomk" {
		checkSampled(t, g, k, got)
	}
}

// newSelectors returns one of each listed selector.
func newSelectors(t testing.TB, seed uint64) map[string]Selector {
	m := make(map[string]Selector)
	for _, name := range SelectorNames() {
		s, err := NewSelector(name, seed)
		if err != nil {
			t.Fatal(err)
		}
		m[name] = s
	}
	return m
}

// TestSelectorsContract runs every selector over the edge cases of n and k and over
// gradients that defeat estimates: ties, zeros, light and heavy tails.
func TestSelectorsContract(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	type tc struct {
		name string
		g    []float32
		k    int
	}
	cases := []tc{
		{"n=0", nil, 3},
		{"n=0 k=0", []float32{}, 0},
		{"k=0", []float32{1, 2, 3}, 0},
		{"negative k", []float32{1, 2, 3}, -5},
		{"k>n", []float32{1, -2, 3}, 10},
		{"n=1", []float32{-0.5}, 1},
		{"n=2 k=1", []float32{0, 1}, 1},
		{"all equal", []float32{4, 4, -4, 4, 4, -4}, 3},
		{"zeros", make([]float32, 9), 2},
		{"one outlier", []float32{0, 0, 0, 1e30, 0, 0, 0}, 2},
	}
	for _, n := range []int{1, 2, 7, 100, 5000, smallSampled, 300_000} {
		uniform, equal, sparse := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range n {
			uniform[i] = float32(2*r.Float64() - 1)
			equal[i] = -1.5
			if r.IntN(100) == 0 {
				sparse[i] = float32(r.NormFloat64())
			}
		}
		ks := []int{1, n / 1000, n / 100, n / 20, n / 2, n - 1, n}
		slices.Sort(ks)
		for _, k := range slices.Compact(ks) {
			cases = append(cases,
				tc{fmt.Sprintf("gauss n=%d k=%d", n, k), gaussGrad(r, n), k},
				tc{fmt.Sprintf("mixed scales n=%d k=%d", n, k), randGrad(r, n, 0), k},
				tc{fmt.Sprintf("few values n=%d k=%d", n, k), randGrad(r, n, 7), k},
				tc{fmt.Sprintf("cauchy n=%d k=%d", n, k), cauchyGrad(r, n), k},
				tc{fmt.Sprintf("uniform n=%d k=%d", n, k), uniform, k},
				tc{fmt.Sprintf("all equal n=%d k=%d", n, k), equal, k},
				tc{fmt.Sprintf("mostly zeros n=%d k=%d", n, k), sparse, k},
			)
		}
	}
	sels := newSelectors(t, 3)
	idx := make(map[string][]int32)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.g)
			for _, name := range SelectorNames() {
				var err error
				if idx[name], err = sels[name].Select(c.g, c.k, idx[name]); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !slices.Equal(in, c.g) {
					t.Fatalf("%s modified its input", name)
				}
				checkSelection(t, name, c.g, c.k, idx[name])
			}
		})
	}
}

// selectorBand is the count each selector documents on normally distributed gradients.
func selectorBand(name string, k int) (lo, hi int) {
	switch name {
	case "dgc":
		return k * 3 / 4, k // SampledThreshold's comment: [0.75k, k]
	case "gaussiank":
		return max(1, k-int(math.Ceil(4*math.Sqrt(float64(k))))-2), k // GaussianK's comment
	}
	return k, k
}

// TestSelectorsDensity checks the achieved density of every selector on Gaussian gradients
// against the band it documents.
func TestSelectorsDensity(t *testing.T) {
	if testing.Short() {
		t.Skip("draws 1e6-element gradients")
	}
	r := rand.New(rand.NewPCG(33, 34))
	sels := newSelectors(t, 5)
	for _, n := range []int{100_000, 1_000_000} {
		g := make([]float32, n)
		for _, density := range []float64{0.001, 0.01, 0.05} {
			k := KFor(n, density)
			t.Run(fmt.Sprintf("n=%d density=%g", n, density), func(t *testing.T) {
				var idx []int32
				for trial := range 3 {
					mu, sigma := 0.0, 1.0
					if trial == 2 {
						mu, sigma = 0.3, 2 // a mean off zero must not cost Gaussian-k a tail
					}
					for i := range g {
						g[i] = float32(mu + sigma*r.NormFloat64())
					}
					for _, name := range SelectorNames() {
						var err error
						if idx, err = sels[name].Select(g, k, idx); err != nil {
							t.Fatal(err)
						}
						if lo, hi := selectorBand(name, k); len(idx) < lo || len(idx) > hi {
							t.Errorf("%s N(%g,%g²): %d selected (density %.5f), want [%d, %d] of k=%d",
								name, mu, sigma, len(idx), float64(len(idx))/float64(n), lo, hi, k)
						}
					}
				}
			})
		}
	}
}

// TestSelectorsNonFinite checks that every selector refuses NaN and ±Inf wherever they
// are and whatever k, naming the first, also through the Compressor's wrapping.
func TestSelectorsNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	sels := newSelectors(t, 7)
	for _, n := range []int{1, 5, 1000, 5000, smallSampled} {
		clean := gaussGrad(r, n)
		for _, bad := range [][]int{{0}, {n - 1}, {n / 2, n - 1}, {n - 1, n / 3}} {
			ks := []int{0, 1, n / 100, n / 2, n}
			slices.Sort(ks)
			for _, k := range slices.Compact(ks) {
				for _, v := range []float32{nan, inf, -inf} {
					g := slices.Clone(clean)
					for _, i := range bad {
						g[i] = v
					}
					first := slices.Min(bad)
					for _, name := range SelectorNames() {
						_, err := sels[name].Select(g, k, nil)
						var nf *NonFiniteError
						if !errors.As(err, &nf) || nf.Index != first || math.Float32bits(nf.Value) != math.Float32bits(g[first]) {
							t.Fatalf("%s n=%d bad %v k=%d value %v: err %v, want NonFiniteError at %d", name, n, bad, k, v, err, first)
						}
					}
				}
			}
		}
	}
}

// BenchmarkSelectors times every selector choosing 1% of N(0,1) gradients of 1M elements and
// of 25M, a large model's fused gradient.
func BenchmarkSelectors(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
	}{{"1M", 1 << 20}, {"25M", 25_000_000}} {
		var g []float32
		k := c.n / 100
		for _, name := range SelectorNames() {
			b.Run(fmt.Sprintf("n=%s/%s", c.name, name), func(b *testing.B) {
				if g == nil {
					g = gaussGrad(rand.New(rand.NewPCG(37, 38)), c.n)
				}
				s, err := NewSelector(name, 1)
				if err != nil {
					b.Fatal(err)
				}
				idx, err := s.Select(g, k, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(4 * c.n))
				for b.Loop() {
					idx, _ = s.Select(g, k, idx)
				}
				b.ReportMetric(float64(len(idx))/float64(k), "k-fraction")
			})
		}
	}
}

// countingRecorder sums what a Compressor reports.
type countingRecorder struct{ calls, elements, missing int }

func (r *countingRecorder) Selected(_ time.Duration, elements, missing int) {
	r.calls++
	r.elements += elements
	r.missing += missing
}

// TestCompressorWithSelectors runs every selector under a Compressor with error feedback,
// as the per-tensor pipelines do: every tensor sends something each step, the values sent
// are the accumulated ones, what was fed is what was sent plus what is held back, and
// every selection is reported.
func TestCompressorWithSelectors(t *testing.T) {
	sizes := []int{1, 7, 300, 5000, 200_000}
	for _, name := range SelectorNames() {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(39, 40))
			var rec countingRecorder
			sel, err := NewSelector(name, 11)
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewCompressor(Config{Density: 0.01, Selector: name}, sizes, []Selector{sel}, pipeline.WallClock{}, &rec, func() int { return 0 })
			if err != nil {
				t.Fatal(err)
			}
			mem := c.Memory()
			fed, sent := make([][]float64, len(sizes)), make([][]float64, len(sizes))
			for id, n := range sizes {
				fed[id], sent[id] = make([]float64, n), make([]float64, n)
			}
			var part SparseTensor
			picked := 0
			for range 4 {
				for id, n := range sizes {
					g := gaussGrad(r, n)
					for i, v := range g {
						fed[id][i] += float64(v)
					}
					if err := c.Accumulate(id, g); err != nil {
						t.Fatal(err)
					}
					acc := mem.Residual(id)
					before := slices.Clone(acc)
					k := c.K(n)
					if k != KFor(n, 0.01) {
						t.Fatalf("tensor %d: K = %d, want %d", id, k, KFor(n, 0.01))
					}
					if err := c.Select(0, id, &part); err != nil {
						t.Fatal(err)
					}
					if part.ID != id || len(part.Values) != len(part.Indices) || Missing(n, len(part.Indices)) != 0 {
						t.Fatalf("tensor %d: part %d, %d indices, %d values", id, part.ID, len(part.Indices), len(part.Values))
					}
					picked += len(part.Indices)
					checkSelection(t, name, before, k, part.Indices)
					for j, i := range part.Indices {
						if part.Values[j] != before[i] || acc[i] != 0 {
							t.Fatalf("tensor %d index %d: sent %g of %g, left %g", id, i, part.Values[j], before[i], acc[i])
						}
						sent[id][i] += float64(part.Values[j])
					}
				}
			}
			if rec.calls != 4*len(sizes) || rec.elements != picked || rec.missing != 0 {
				t.Errorf("recorded %d selections of %d elements, %d missing; want %d of %d, 0 missing", rec.calls, rec.elements, rec.missing, 4*len(sizes), picked)
			}
			for id := range sizes {
				res := mem.Residual(id)
				for i := range res {
					if d := fed[id][i] - sent[id][i] - float64(res[i]); math.Abs(d) > 1e-4 {
						t.Fatalf("tensor %d element %d: fed %g, sent %g + held %g", id, i, fed[id][i], sent[id][i], res[i])
					}
				}
			}
			g := gaussGrad(r, sizes[3])
			g[42] = float32(math.Inf(-1))
			err = c.Compress(3, g, &part)
			var nf *NonFiniteError
			if !errors.As(err, &nf) || nf.Index != 42 || !strings.Contains(err.Error(), "tensor 3") {
				t.Fatalf("-Inf in tensor 3: err %v, want a NonFiniteError at 42 naming the tensor", err)
			}
		})
	}
}
