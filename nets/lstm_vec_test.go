package nets

import (
	"math"
	"math/rand/v2"
	"testing"
)

// vecInputs returns n values spread over [lo, hi) with a few exact edge points mixed in.
func vecInputs(r *rand.Rand, n int, lo, hi float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*r.Float32()
	}
	return x
}

// checkVec compares a vector kernel with a float64 reference on every length up to 50 (so that
// every tail length is covered) and on a long sweep, within maxAbs + maxRel·|want|.
func checkVec(t *testing.T, name string, fn func(dst, src []float32), ref func(float64) float64, lo, hi float32, maxAbs, maxRel float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{4099}
	for n := 0; n <= 50; n++ {
		lengths = append(lengths, n)
	}
	var worst float64
	for _, n := range lengths {
		src := vecInputs(r, n, lo, hi)
		dst := make([]float32, n+1)
		dst[n] = 42 // past the end: must stay untouched
		fn(dst[:n], src)
		if dst[n] != 42 {
			t.Fatalf("%s wrote past the end of %d elements", name, n)
		}
		for i, x := range src {
			want := ref(float64(x))
			d := math.Abs(float64(dst[i]) - want)
			if d > maxAbs+maxRel*math.Abs(want) {
				t.Fatalf("%s(%g) = %g, want %g", name, x, dst[i], want)
			}
			worst = max(worst, d/(maxAbs+maxRel*math.Abs(want)))
		}
	}
	t.Logf("%s: worst error %.3g of the tolerance", name, worst)
}

func TestSigmoidVec(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	checkVec(t, "sigmoid", sigmoidVec, sig, -100, 100, 2e-35, 3e-7) // clamped to [-80, 80]
	checkVec(t, "sigmoid", sigmoidVec, sig, -3, 3, 0, 3e-7)
}

func TestTanhVec(t *testing.T) {
	checkVec(t, "tanh", tanhVec, math.Tanh, -12, 12, 0, 3e-7)
	checkVec(t, "tanh", tanhVec, math.Tanh, -1, 1, 0, 3e-7)
	checkVec(t, "tanh", tanhVec, math.Tanh, -0.01, 0.01, 0, 3e-7)
}

func TestExpShiftSumVec(t *testing.T) {
	for _, mx := range []float32{0, 3, 60} {
		exp := func(dst, src []float32) {
			got := expShiftSumVec(dst, src, mx)
			var want float64
			for _, e := range dst[:len(src)] {
				want += float64(e)
			}
			if math.Abs(got-want) > 1e-12*want {
				t.Fatalf("sum %g, want %g", got, want)
			}
		}
		ref := func(x float64) float64 {
			x = float64(float32(x) - mx) // the kernel's argument, rounded
			if x < -87.33654 {
				return 0
			}
			return math.Exp(x)
		}
		checkVec(t, "expShiftSum", exp, ref, -120, mx, 0x1p-126, 3e-7)
	}
	nan := float32(math.NaN())
	if s := expShiftSumVec(make([]float32, 3), []float32{0, nan, -1}, 0); !math.IsNaN(s) {
		t.Errorf("a NaN logit gave the sum %g", s)
	}
}

func TestMaxScaleF32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 70; n++ {
		x := vecInputs(r, n, -5, 5)
		want := x[0]
		for _, v := range x {
			want = max(want, v)
		}
		if got := maxF32(x); got != want {
			t.Fatalf("maxF32 of %d = %g, want %g", n, got, want)
		}
		y := append([]float32(nil), x...)
		z := append(make([]float32, 0, n+1), x...)
		z = append(z, 7)
		scaleF32(z[:n], 0.5)
		for i := range y {
			if z[i] != 0.5*y[i] {
				t.Fatalf("scaleF32: %g·0.5 = %g", y[i], z[i])
			}
		}
		if z[n] != 7 {
			t.Fatalf("scaleF32 wrote past %d elements", n)
		}
	}
	if got := maxF32([]float32{-1, float32(math.Inf(-1))}); got != -1 {
		t.Errorf("maxF32 = %g", got)
	}
}

func TestAddF32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 70; n++ {
		x, y := vecInputs(r, n+1, -5, 5), vecInputs(r, n, -5, 5)
		want := append([]float32(nil), x...)
		for i := range y {
			want[i] += y[i]
		}
		addF32(x[:n], y)
		for i := range want {
			if x[i] != want[i] {
				t.Fatalf("addF32 of %d: element %d = %g, want %g", n, i, x[i], want[i])
			}
		}
	}
}

func TestLSTMCellBackwardVec(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, h := range []int{1, 7, 16, 17, 33, 200} {
		g := vecInputs(r, 4*h, 0, 1)
		tc, cp := vecInputs(r, h, -1, 1), vecInputs(r, h, -2, 2)
		dh, dn, dc := vecInputs(r, h, -1, 1), vecInputs(r, h, -1, 1), vecInputs(r, h, -1, 1)
		want, wantDC := make([]float32, 4*h), append([]float32(nil), dc...)
		lstmCellBackwardGo(g, want, tc, cp, dh, dn, wantDC)
		got, gotDC := make([]float32, 4*h+1), append(append([]float32(nil), dc...), 5)
		got[4*h] = 5
		lstmCellBackward(g, got[:4*h], tc, cp, dh, dn, gotDC[:h])
		if got[4*h] != 5 || gotDC[h] != 5 {
			t.Fatalf("h=%d: wrote past the end", h)
		}
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("h=%d: gate gradient %d = %g, want %g", h, i, got[i], want[i])
			}
		}
		for i := range wantDC {
			if d := math.Abs(float64(gotDC[i] - wantDC[i])); d > 1e-6*(1+math.Abs(float64(wantDC[i]))) {
				t.Fatalf("h=%d: dc[%d] = %g, want %g", h, i, gotDC[i], wantDC[i])
			}
		}
	}
}
