package trainer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/nets"
)

func param(name string, w, g []float32) nets.Param {
	return nets.Param{Name: name, Shape: []int{len(w)}, Value: w, Grad: g}
}

// reference implements torch.optim.SGD in float64 for one scalar.
func reference(w, g []float64, lr, mu, wd float64, nesterov bool) float64 {
	v := 0.0
	for i, gi := range g {
		d := gi + wd*w[0]
		if i == 0 || mu == 0 {
			v = d
		} else {
			v = mu*v + d
		}
		if nesterov {
			d += mu * v
		} else if mu > 0 {
			d = v
		}
		w[0] -= lr * d
	}
	return w[0]
}

func TestSGDMatchesPyTorchSemantics(t *testing.T) {
	grads := []float64{0.5, -0.25, 1, 0.125}
	for _, tc := range []struct {
		name     string
		mu, wd   float64
		nesterov bool
	}{
		{"plain", 0, 0, false},
		{"weight decay", 0, 0.1, false},
		{"momentum", 0.9, 0, false},
		{"momentum+wd", 0.9, 0.01, false},
		{"nesterov", 0.9, 0.01, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := []float32{2}
			g := []float32{0}
			params := []nets.Param{param("w", w, g)}
			opt := NewSGD(params, tc.mu, tc.nesterov, tc.wd)
			for _, gi := range grads {
				g[0] = float32(gi)
				opt.Step(params, 0.1)
			}
			want := reference([]float64{2}, grads, 0.1, tc.mu, tc.wd, tc.nesterov)
			if math.Abs(float64(w[0])-want) > 1e-5 {
				t.Fatalf("w = %v, want %v", w[0], want)
			}
		})
	}
}

// TestSGDStepBitExact: the unrolled update kernels give, bit for bit, what one plain loop
// of PyTorch's update gives, for lengths that do and do not fill their blocks of four, over
// several steps so that the velocity carries over.
func TestSGDStepBitExact(t *testing.T) {
	plain := func(w, g, v []float32, lr, wd, mu float32, nesterov bool) {
		for j := range w {
			d := g[j] + wd*w[j]
			if v == nil {
				w[j] -= lr * d
				continue
			}
			v[j] = mu*v[j] + d
			if nesterov {
				d += mu * v[j]
			} else {
				d = v[j]
			}
			w[j] -= lr * d
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name     string
		mu, wd   float64
		nesterov bool
	}{
		{"plain", 0, 5e-4, false},
		{"momentum", 0.9, 5e-4, false},
		{"momentum without decay", 0.9, 0, false},
		{"nesterov", 0.9, 5e-4, true},
	} {
		for _, n := range []int{0, 1, 3, 4, 5, 8, 37} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				w, g := make([]float32, n), make([]float32, n)
				for j := range w {
					w[j] = float32(rng.NormFloat64())
				}
				want := append([]float32(nil), w...)
				var v []float32
				if tc.mu > 0 {
					v = make([]float32, n)
				}
				params := []nets.Param{param("w", w, g)}
				opt := NewSGD(params, tc.mu, tc.nesterov, tc.wd)
				for step := range 3 {
					for j := range g {
						g[j] = float32(rng.NormFloat64())
					}
					lr := 0.1 / float64(step+1)
					opt.Step(params, lr)
					plain(want, g, v, float32(lr), float32(tc.wd), float32(tc.mu), tc.nesterov)
					for j := range w {
						if math.Float32bits(w[j]) != math.Float32bits(want[j]) {
							t.Fatalf("step %d: w[%d] = %v, a plain loop gives %v", step, j, w[j], want[j])
						}
					}
				}
			})
		}
	}
}

func BenchmarkSGDStep(b *testing.B) {
	// ResNet-20's 272474 parameters as one tensor: the update's cost is per element.
	w, g := make([]float32, 272474), make([]float32, 272474)
	for j := range g {
		g[j] = float32(j%7) - 3
	}
	params := []nets.Param{param("w", w, g)}
	opt := NewSGD(params, 0.9, false, 5e-4)
	b.SetBytes(4 * 4 * int64(len(w))) // w and v read and written, g read: about four passes
	for b.Loop() {
		opt.Step(params, 0.1)
	}
}

func TestClipGradNorm(t *testing.T) {
	a, b := []float32{3, 0}, []float32{4}
	params := []nets.Param{param("a", make([]float32, 2), a), param("b", make([]float32, 1), b)}
	norm, err := ClipGradNorm(params, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(norm-5) > 1e-6 {
		t.Fatalf("norm before clipping = %v, want 5", norm)
	}
	after, _ := GradNorm(params)
	if math.Abs(after-1) > 1e-5 {
		t.Fatalf("norm after clipping = %v, want 1", after)
	}
	if math.Abs(float64(a[0])/float64(b[0])-0.75) > 1e-6 {
		t.Fatalf("clipping changed the direction: %v %v", a, b)
	}
	// Under the limit nothing changes.
	if _, err := ClipGradNorm(params, 10); err != nil || math.Abs(float64(b[0])-0.8) > 1e-5 {
		t.Fatalf("clipping under the limit changed b to %v (err %v)", b, err)
	}
}

func TestGradNormRejectsNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		params := []nets.Param{param("ok", []float32{0}, []float32{1}), param("layer2.weight", []float32{0}, []float32{bad})}
		_, err := GradNorm(params)
		if err == nil || !strings.Contains(err.Error(), "layer2.weight") {
			t.Fatalf("GradNorm with %v: error %v, want one naming layer2.weight", bad, err)
		}
	}
}

func TestSchedule(t *testing.T) {
	step := Schedule{Base: 1, Kind: "step", WarmupSteps: 4, Milestones: []float64{1, 2}, Gamma: 0.1, StepsPerEpoch: 10}
	cos := Schedule{Base: 1, Kind: "cosine", StepsPerEpoch: 10, TotalSteps: 10}
	for _, tc := range []struct {
		name string
		s    Schedule
		step int
		want float64
	}{
		{"warmup first", step, 0, 0.25},
		{"warmup last", step, 3, 1},
		{"before milestone", step, 9, 1},
		{"first milestone", step, 10, 0.1},
		{"second milestone", step, 25, 0.01},
		{"cosine start", cos, 0, 1},
		{"cosine middle", cos, 5, 0.5},
		{"cosine end", cos, 10, 0},
		{"cosine past end", cos, 15, 0},
		{"const", Schedule{Base: 0.3, Kind: "const"}, 100, 0.3},
	} {
		if got := tc.s.LR(tc.step); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: LR(%d) = %v, want %v", tc.name, tc.step, got, tc.want)
		}
	}
}
