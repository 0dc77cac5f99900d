package nets

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/kernels"
)

// TestGradientsMatchFiniteDifferences compares the gradients of TrainStep with central differences
// of its loss for a tiny instance of every family: on the largest coordinate of every tensor, on
// random coordinates and along a random direction through the whole tensor. BatchNorm is in
// training mode, so a perturbation also moves the batch statistics and the check covers the
// gradient through them.
//
// In float32 a difference step cannot be much below 1e-4 before rounding dominates, and at such
// sizes a step sometimes crosses a ReLU or max-pool kink (BatchNorm puts many pre-activations near
// zero), or meets the strong curvature of BatchNorm over a few values. So each check takes steps
// of 1e-3, 3e-4 and 1e-4 and passes when one of them agrees within a tolerance widened by their
// spread: a kink spoils one step size but rarely all, while a gradient with the wrong sign, the
// wrong scale or a missing term disagrees at every one (the mutations tried while writing this
// test: BatchNorm without its mean or variance term, a scaled γ gradient, LSTM without the
// forget-gate path, a halved recurrent gradient, perturbed convolution gradients, a negated linear
// gradient, all fail). The LSTM has no kinks and gets a tight tolerance. The op tests compare the
// kernels exactly against Gorgonia's own ops.
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	withDropout := tinyLSTM
	withDropout.Dropout = 0.3
	withDropout.Seed = 5
	for _, tc := range []struct {
		name string
		spec Spec
		n    int  // valid rows
		wino bool // every 3×3 convolution with Winograd, however few its channels
	}{
		{"mlp", tinyMLP, 4, false},
		{"mlp-padded", tinyMLP, 3, false},
		{"resnet8", tinyResNet, 4, false},
		{"resnet8-padded", tinyResNet, 3, false},
		{"vgg11", tinyVGG, 8, false},
		{"vgg11-padded", tinyVGG, 5, false},
		{"vgg11-winograd", tinyVGG, 8, true},
		{"resnet8-winograd", tinyResNet, 4, true},
		{"lstm", tinyLSTM, 3, false},
		{"lstm-dropout-padded", withDropout, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wino {
				defer func(a kernels.ConvAlgorithm) { convAlgorithm = a }(convAlgorithm)
				convAlgorithm = kernels.ConvWinograd
			}
			n := mustNew(t, tc.spec)
			b := randBatch(tc.spec, tc.n, 7)
			rel, abs := 0.05, 1e-3
			if tc.spec.Arch == "lstm" {
				// Smooth: no kinks, so the tolerance can be tight. Stronger recurrent weights make
				// the gradient through h_{t-1} a large part of every gradient.
				rel, abs = 0.01, 2e-4
				for _, p := range n.params {
					if strings.HasSuffix(p.Name, ".w_hh") {
						for i := range p.Value {
							p.Value[i] *= 4
						}
					}
				}
			}
			loss := func() float64 {
				// The same dropout masks and initial LSTM state for every evaluation.
				n.dropRNG = newRNG(tc.spec.Seed, streamDropout)
				for _, l := range n.train.lstms {
					l.reset()
				}
				return mustTrain(t, n, b).Loss
			}
			zeroGrads(n)
			loss()
			grads := cloneGrads(n)

			// fd returns central differences of the loss along d (scaled in place) at two steps.
			fd := func(v, d []float32) [3]float64 {
				old := append([]float32(nil), v...)
				var out [3]float64
				for k, eps := range []float32{1e-3, 3e-4, 1e-4} {
					for i := range v {
						v[i] = old[i] + eps*d[i]
					}
					lp := loss()
					for i := range v {
						v[i] = old[i] - eps*d[i]
					}
					lm := loss()
					out[k] = (lp - lm) / (2 * float64(eps))
				}
				copy(v, old)
				return out
			}
			r := rand.New(rand.NewPCG(11, 12))
			for pi, p := range n.params {
				g := grads[pi]
				scale := math.Abs(float64(g[argmaxAbs(g)]))
				agree := func(num [3]float64, an float64) bool {
					lo, hi := slices.Min(num[:]), slices.Max(num[:])
					for _, f := range num {
						if math.Abs(f-an) <= rel*math.Max(math.Abs(f), math.Abs(an))+abs+0.01*scale+(hi-lo) {
							return true
						}
					}
					return false
				}
				unit := make([]float32, len(g))
				for k, i := range []int{argmaxAbs(g), r.IntN(len(g)), r.IntN(len(g))} {
					clear(unit)
					unit[i] = 1
					num := fd(p.Value, unit)
					an := float64(g[i])
					if !agree(num, an) {
						t.Errorf("%s[%d]: backward %.6g, finite differences %.6g", p.Name, i, an, num)
					}
					if k == 0 && scale > 2e-3 && (agree(num, -an) || agree(num, 2*an)) {
						t.Errorf("%s[%d]: the check cannot tell %.6g from a wrong sign or scale", p.Name, i, an)
					}
				}
				// A random unit direction through the whole tensor.
				var norm, dot float64
				for i := range unit {
					unit[i] = float32(r.NormFloat64())
					norm += float64(unit[i]) * float64(unit[i])
				}
				for i := range unit {
					unit[i] /= float32(math.Sqrt(norm))
					dot += float64(unit[i]) * float64(g[i])
				}
				if num := fd(p.Value, unit); !agree(num, dot) {
					t.Errorf("%s along a random direction: backward %.6g, finite differences %.6g", p.Name, dot, num)
				}
			}
		})
	}
}

func argmaxAbs(g []float32) int {
	best := 0
	for i, v := range g {
		if math.Abs(float64(v)) > math.Abs(float64(g[best])) {
			best = i
		}
	}
	return best
}
