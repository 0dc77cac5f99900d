package nets

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
)

func bufferNamed(t *testing.T, n *net, name string) []float32 {
	t.Helper()
	for _, b := range n.Buffers() {
		if b.Name == name {
			return b.Value
		}
	}
	t.Fatalf("no buffer %s", name)
	return nil
}

func paramNamed(t *testing.T, n *net, name string) []float32 {
	t.Helper()
	for _, p := range n.Params() {
		if p.Name == name {
			return p.Value
		}
	}
	t.Fatalf("no parameter %s", name)
	return nil
}

// TestBatchNormRunningStatistics recomputes the first BatchNorm's input (conv1 of the input) by
// hand and checks that one step moves the running statistics to 0.9·old + 0.1·batch statistic,
// with the unbiased variance as PyTorch, over the valid rows only.
func TestBatchNormRunningStatistics(t *testing.T) {
	for _, valid := range []int{4, 3} {
		s := tinyResNet
		n := mustNew(t, s)
		b := randBatch(s, valid, 3)
		w := paramNamed(t, n, "conv1.weight")
		cout := len(w) / (s.Channels * 9)
		mean0, var0 := slices.Clone(bufferNamed(t, n, "bn1.running_mean")), slices.Clone(bufferNamed(t, n, "bn1.running_var"))
		mustTrain(t, n, b)

		for c := 0; c < cout; c++ {
			var vals []float64
			for img := 0; img < valid; img++ {
				for y := 0; y < s.Height; y++ {
					for x := 0; x < s.Width; x++ {
						var sum float64
						for ci := 0; ci < s.Channels; ci++ {
							for i := 0; i < 3; i++ {
								for j := 0; j < 3; j++ {
									yy, xx := y+i-1, x+j-1
									if yy < 0 || yy >= s.Height || xx < 0 || xx >= s.Width {
										continue
									}
									sum += float64(w[((c*s.Channels+ci)*3+i)*3+j]) * float64(b.X[((img*s.Channels+ci)*s.Height+yy)*s.Width+xx])
								}
							}
						}
						vals = append(vals, sum)
					}
				}
			}
			var mean, sq float64
			for _, v := range vals {
				mean += v
			}
			mean /= float64(len(vals))
			for _, v := range vals {
				sq += (v - mean) * (v - mean)
			}
			unbiased := sq / float64(len(vals)-1)
			wantMean := 0.9*float64(mean0[c]) + 0.1*mean
			wantVar := 0.9*float64(var0[c]) + 0.1*unbiased
			gotMean, gotVar := float64(bufferNamed(t, n, "bn1.running_mean")[c]), float64(bufferNamed(t, n, "bn1.running_var")[c])
			if math.Abs(gotMean-wantMean) > 1e-5 || math.Abs(gotVar-wantVar) > 1e-5*wantVar {
				t.Errorf("N=%d channel %d: running mean, var = %.7g, %.7g, want %.7g, %.7g", valid, c, gotMean, gotVar, wantMean, wantVar)
			}
		}
	}
}

// oneBN is conv 1×1 → BatchNorm → linear: small enough to evaluate by hand.
var oneBN = arch{family: imageFamily, build: func(b *builder, x *G.Node, s *Spec) *G.Node {
	x = b.batchNorm(b.conv(x, "conv", 3, 1, 1, 0, false), "bn")
	return b.linear(b.flatten(x), "fc", s.Classes, true)
}}

// TestEvaluateUsesRunningStatistics checks an evaluation forward against a hand computation with
// the running statistics, and that Evaluate leaves parameters, gradients and buffers unchanged.
func TestEvaluateUsesRunningStatistics(t *testing.T) {
	s := Spec{Arch: "onebn", BatchSize: 5, Seed: 9, Channels: 2, Height: 2, Width: 3, Classes: 4}
	n, err := newNet(s, oneBN)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for i := 0; i < 3; i++ {
		mustTrain(t, n, randBatch(s, 5, uint64(i)))
	}
	b := randBatch(s, 4, 10)
	snapshot := func() [][]float32 {
		var out [][]float32
		for _, p := range append(n.Params(), n.Buffers()...) {
			out = append(out, slices.Clone(p.Value))
			if p.Grad != nil {
				out = append(out, slices.Clone(p.Grad))
			}
		}
		return out
	}
	before := snapshot()
	got := mustEval(t, n, b)
	if !slices.EqualFunc(before, snapshot(), slices.Equal) {
		t.Errorf("Evaluate changed a parameter, gradient or buffer")
	}

	w, gamma, beta := paramNamed(t, n, "conv.weight"), paramNamed(t, n, "bn.weight"), paramNamed(t, n, "bn.bias")
	fw, fb := paramNamed(t, n, "fc.weight"), paramNamed(t, n, "fc.bias")
	rm, rv := bufferNamed(t, n, "bn.running_mean"), bufferNamed(t, n, "bn.running_var")
	if rm[0] == 0 || rv[0] == 1 {
		t.Fatalf("running statistics did not move: %v %v", rm, rv)
	}
	hw, cin, cout := s.Height*s.Width, s.Channels, 3
	var loss float64
	correct := 0
	for img := 0; img < b.N; img++ {
		feat := make([]float64, cout*hw)
		for c := 0; c < cout; c++ {
			for p := 0; p < hw; p++ {
				var v float64
				for ci := 0; ci < cin; ci++ {
					v += float64(w[c*cin+ci]) * float64(b.X[(img*cin+ci)*hw+p])
				}
				feat[c*hw+p] = float64(gamma[c])*(v-float64(rm[c]))/math.Sqrt(float64(rv[c])+bnEps) + float64(beta[c])
			}
		}
		logits := make([]float64, s.Classes)
		best := 0
		for k := range logits {
			logits[k] = float64(fb[k])
			for i, f := range feat {
				logits[k] += float64(fw[k*len(feat)+i]) * f
			}
			if logits[k] > logits[best] {
				best = k
			}
		}
		var z float64
		for _, l := range logits {
			z += math.Exp(l)
		}
		loss += math.Log(z) - logits[b.Labels[img]]
		if best == int(b.Labels[img]) {
			correct++
		}
	}
	loss /= float64(b.N)
	if math.Abs(got.Loss-loss) > 1e-5*loss || got.Correct != correct || got.Count != b.N {
		t.Errorf("Evaluate = %+v, want loss %.7g, %d correct of %d", got, loss, correct, b.N)
	}
}

// TestEvaluateLeavesTrainingStateAlone interleaves Evaluate between training steps and checks that
// everything the training graph computes is bitwise what it is without the evaluation: BatchNorm
// statistics, carried LSTM state and the dropout generator included.
func TestEvaluateLeavesTrainingStateAlone(t *testing.T) {
	lstm := tinyLSTM
	lstm.Dropout = 0.25
	for _, s := range []Spec{tinyResNet, lstm} {
		t.Run(s.Arch, func(t *testing.T) {
			a, b := mustNew(t, s), mustNew(t, s)
			b1, b2 := randBatch(s, s.BatchSize, 1), randBatch(s, s.BatchSize, 2)
			ra1 := mustTrain(t, a, b1)
			mustEval(t, a, b2)
			ra2 := mustTrain(t, a, b2)
			rb1 := mustTrain(t, b, b1)
			rb2 := mustTrain(t, b, b2)
			if ra1 != rb1 || ra2 != rb2 {
				t.Errorf("results with an evaluation in between %+v %+v, without %+v %+v", ra1, ra2, rb1, rb2)
			}
			for i, p := range a.Params() {
				q := b.Params()[i]
				if !slices.Equal(p.Grad, q.Grad) || !slices.Equal(p.Value, q.Value) {
					t.Errorf("%s differs after an evaluation in between", p.Name)
				}
			}
			for i, p := range a.Buffers() {
				if !slices.Equal(p.Value, b.Buffers()[i].Value) {
					t.Errorf("%s differs after an evaluation in between", p.Name)
				}
			}
		})
	}
}

// TestBatchNormVectorLoopsMatchScalar compares the vector loops of BatchNorm with the scalar ones,
// on lengths around the vector width and with special values where the ReLU decides: the sums
// and gradients to rounding (they add in another order), the ReLU's choice exactly.
func TestBatchNormVectorLoopsMatchScalar(t *testing.T) {
	if !bnVector {
		t.Skip("no vector loops on this CPU")
	}
	defer func(v bool) { bnVector = v }(bnVector)
	r := rand.New(rand.NewPCG(21, 22))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	special := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, nan, -nan, 1e-45, -1e-45}
	for _, n := range []int{1, 3, 15, 16, 17, 31, 32, 33, 100, 1024} {
		x, dy, y := randSlice(r, n), randSlice(r, n), randSlice(r, n)
		for i := 0; i < n; i += 7 {
			y[i] = special[i%len(special)]
		}
		const m, is, a, b, mdy, mdyx = 0.25, 1.5, 0.75, -0.5, 0.125, -0.375
		type result struct {
			sums                 []float32
			g, aff, relu, dx, xr []float32
		}
		run := func(vector bool) result {
			bnVector = vector
			var res result
			p, q := sumDyDev(dy, x, m)
			mp, mq := sumMaskedDyDev(dy, y, x, m)
			res.g = make([]float32, n)
			gp, gq := maskSumDyDev(res.g, dy, y, x, m)
			res.sums = []float32{sumF32(x), sumSqDev(x, m), p, q, mp, mq, gp, gq}
			res.aff, res.relu, res.dx = make([]float32, n), make([]float32, n), make([]float32, n)
			affine(res.aff, x, a, b)
			affineReLU(res.relu, y, a, b)
			bnGrad(res.dx, dy, x, m, is, a, mdy, mdyx)
			return res
		}
		want, got := run(false), run(true)
		name := fmt.Sprintf("n=%d", n)
		assertClose(t, name+" sums", got.sums, want.sums)
		if got.sums[4] != got.sums[6] || got.sums[5] != got.sums[7] {
			t.Errorf("%s: masked sums %v differ between the one-pass and two-pass loops", name, got.sums[4:])
		}
		assertClose(t, name+" affine", got.aff, want.aff)
		assertClose(t, name+" bnGrad", got.dx, want.dx)
		for i := range y {
			if math.Float32bits(got.g[i]) != math.Float32bits(want.g[i]) {
				t.Errorf("%s: masked dy[%d] (y = %g) = %g, want %g", name, i, y[i], got.g[i], want.g[i])
			}
			if (got.relu[i] == 0) != (want.relu[i] == 0) || math.IsNaN(float64(got.relu[i])) != math.IsNaN(float64(want.relu[i])) {
				t.Errorf("%s: relu(%g·a+b) = %g, want %g", name, y[i], got.relu[i], want.relu[i])
			}
		}
	}
}
