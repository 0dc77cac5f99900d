package nets

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestReluSpecialValues checks the branch-free ReLU against max(x, 0) and its derivative on
// signed zeros, infinities and NaNs, in the scalar loops and the vector ones.
func TestReluSpecialValues(t *testing.T) { inScalarAndVectorLoops(t, reluSpecialValues) }

// inScalarAndVectorLoops runs check with the scalar loops, then with the vector ones where
// this CPU and build have them.
func inScalarAndVectorLoops(t *testing.T, check func(*testing.T)) {
	defer func(v bool) { bnVector = v }(bnVector)
	have := bnVector
	for _, vector := range []bool{false, true} {
		if vector && !have {
			continue
		}
		bnVector = vector
		check(t)
	}
}

// TestReluVectorLoopsMatchScalar: the vector ReLU loops give the scalar ones' bits on every
// length around their 16-lane steps, special values among the elements.
func TestReluVectorLoopsMatchScalar(t *testing.T) {
	if !bnVector {
		t.Skip("no vector loops on this CPU or build")
	}
	defer func(v bool) { bnVector = v }(bnVector)
	r := rand.New(rand.NewPCG(21, 22))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -float32(math.NaN()), 1e-45, -1e-45}
	for _, n := range []int{1, 5, 15, 16, 17, 31, 32, 33, 100, 1000} {
		a, b := randSlice(r, n), randSlice(r, n)
		for i := 0; i < n; i += 3 {
			a[i] = specials[(i/3)%len(specials)]
		}
		for name, run := range map[string]func(out []float32){
			"relu":     func(out []float32) { reluForward(out, a) },
			"add+relu": func(out []float32) { addReLUForward(out, a, b) },
			"relu.dx":  func(out []float32) { reluBackward(out, a, b) },
		} {
			want, got := make([]float32, n+1), make([]float32, n+1)
			want[n], got[n] = 7, 7 // past the end: must stay
			bnVector = false
			run(want[:n])
			bnVector = true
			run(got[:n])
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Errorf("%s n=%d: element %d is %g (%#x), scalar %g (%#x)", name, n, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					break
				}
			}
		}
	}
}

func reluSpecialValues(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negNaN := math.Float32frombits(math.Float32bits(nan) | 1<<31)
	x := []float32{-1, 0, float32(math.Copysign(0, -1)), 2, inf, -inf, nan, negNaN, 1e-45, -1e-45, 3.4e38}
	y := make([]float32, len(x))
	reluForward(y, x)
	for i, e := range x {
		want := max(e, 0)
		if math.Float32bits(y[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(y[i]))) {
			t.Errorf("relu(%g) = %g, want %g", e, y[i], want)
		}
	}
	dy := make([]float32, len(x))
	for i := range dy {
		dy[i] = float32(i + 1)
	}
	dx := make([]float32, len(x))
	reluBackward(dx, x, dy)
	for i, e := range x {
		want := float32(0)
		if e > 0 {
			want = dy[i]
		}
		if dx[i] != want {
			t.Errorf("relu'(%g)·%g = %g, want %g", e, dy[i], dx[i], want)
		}
	}
}

// TestBatchNormSums checks the unrolled per-channel sums, scalar and vector, against float64 loops
// on lengths around their unrolling.
func TestBatchNormSums(t *testing.T) { inScalarAndVectorLoops(t, batchNormSums) }

func batchNormSums(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 64, 1023} {
		x, dy := randSlice(r, n), randSlice(r, n)
		m := float32(0.25)
		var s, sq, sd, sdx, mag float64
		for i := range x {
			s += float64(x[i])
			d := float64(x[i]) - float64(m)
			sq += d * d
			sd += float64(dy[i])
			sdx += float64(dy[i]) * d
			mag += math.Abs(float64(x[i])) + math.Abs(float64(dy[i]))*(1+math.Abs(d)) + d*d
		}
		tol := 1e-6 * (1 + mag)
		p, q := sumDyDev(dy, x, m)
		y := randSlice(r, n)
		masked := make([]float32, n)
		reluBackward(masked, y, dy)
		mp, mq := sumDyDev(masked, x, m)
		if gp, gq := sumMaskedDyDev(dy, y, x, m); gp != mp || gq != mq {
			t.Errorf("n=%d masked sums %g, %g; want those of the masked dy, %g, %g", n, gp, gq, mp, mq)
		}
		g := make([]float32, n)
		if gp, gq := maskSumDyDev(g, dy, y, x, m); gp != mp || gq != mq || !slices.Equal(g, masked) {
			t.Errorf("n=%d maskSumDyDev: sums %g, %g, want %g, %g, or the masked dy differs", n, gp, gq, mp, mq)
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"sum", float64(sumF32(x)), s}, {"sumsq", float64(sumSqDev(x, m)), sq},
			{"sumdy", float64(p), sd}, {"sumdyx", float64(q), sdx},
		} {
			if math.Abs(c.got-c.want) > tol {
				t.Errorf("n=%d %s = %g, want %g", n, c.name, c.got, c.want)
			}
		}
	}
}
