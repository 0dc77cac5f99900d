package sim

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/ssfusion/ssfusion/profile"
)

// Gradients are synthetic gradients for a profile's tensors, the same every step: what a
// simulated rank pushes. Each tensor is normal with a scale of its own, spread over two
// orders of magnitude as real layers' gradients are, so that a buffer-wide selection
// (multi-tensor) leaves the small-scale tensors out as it does in training. Read-only once
// made, so jobs may share them.
type Gradients struct {
	tensors [][]float32 // in the profile's (backprop) order
}

// NewGradients makes the gradients of p's tensors from seed, scaled for density (see
// Gradients).
func NewGradients(p *profile.Profile, seed uint64, density float64) *Gradients {
	rng := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	g := &Gradients{tensors: make([][]float32, len(p.Tensors))}
	for i, t := range p.Tensors {
		scale := math.Exp(rng.NormFloat64()) * 1e-3
		v := make([]float32, t.Numel)
		for j := range v {
			v[j] = float32(rng.NormFloat64() * scale)
		}
		g.tensors[i] = v
	}
	g.normalize(p.Params(), density, rng)
	return g
}

// normalize scales the gradients so that about density of their elements exceed
// 1/(2 sqrt(k)), the quantile estimated from a sample.
func (g *Gradients) normalize(numel int, density float64, rng *rand.Rand) {
	if !(density > 0 && density < 1) || numel == 0 {
		return
	}
	const samples = 1 << 16
	mags := make([]float64, samples)
	for i := range mags {
		j := rng.IntN(numel)
		t := 0
		for j >= len(g.tensors[t]) {
			j -= len(g.tensors[t])
			t++
		}
		mags[i] = math.Abs(float64(g.tensors[t][j]))
	}
	slices.Sort(mags)
	q := mags[int(float64(samples-1)*(1-density))]
	if q == 0 {
		return
	}
	k := math.Max(1, math.Floor(density*float64(numel)))
	scale := float32(1 / (2 * math.Sqrt(k)) / q)
	for _, v := range g.tensors {
		for i := range v {
			v[i] *= scale
		}
	}
}

// Fill writes into grad the gradient of the profile's i-th tensor (backprop order) in step
// step. The values differ from step to step, rotated by a step-dependent offset and with a
// step-dependent sign, so that the residuals of error feedback wander as they do in
// training instead of growing by the same gradient every step, which would make a
// threshold selector (ExDyna) pick ever more elements.
func (g *Gradients) Fill(grad []float32, i, step int) {
	src := g.tensors[i]
	n := len(src)
	h := mix(uint64(step)<<32 | uint64(i))
	off := int(h % uint64(n))
	copy(grad, src[off:])
	copy(grad[n-off:], src[:off])
	if h>>63 == 1 {
		for j := range grad {
			grad[j] = -grad[j]
		}
	}
}

// mix is SplitMix64's finaliser: a cheap hash whose bits all depend on all of x's.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
