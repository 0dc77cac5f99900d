package nets

import (
	"math"
	"testing"
)

// ulpDiff is the distance in float32 steps between two finite non-negative float32s.
func ulpDiff(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

func checkExp(t *testing.T, name string, x, got float32, maxULP int64) {
	t.Helper()
	want := float32(math.Exp(float64(x)))
	if want < 0x1p-126 { // subnormal or zero: absolute error of a few subnormal steps
		if math.Abs(float64(got-want)) > 4*0x1p-149 {
			t.Fatalf("%s(%g) = %g, want %g", name, x, got, want)
		}
		return
	}
	if ulp := ulpDiff(got, want); ulp > maxULP {
		t.Fatalf("%s(%g) = %g, want %g (%d ulp)", name, x, got, want, ulp)
	}
}

func TestExpf32Accuracy(t *testing.T) {
	// A dense sweep over the finite range plus every float32 near 0 and near the bounds.
	var worst int64
	for x := float32(expMinArg); x <= expMaxArg; x += 0.000731 {
		checkExp(t, "expf32", x, expf32(x), 2)
		if w := float32(math.Exp(float64(x))); w >= 0x1p-126 {
			worst = max(worst, ulpDiff(expf32(x), w))
		}
	}
	for _, base := range []float32{0, -87.33654, expMaxArg, expMinArg, 1, -1, 0.5 * math.Ln2, -0.5 * math.Ln2} {
		x := base
		for i := 0; i < 2000; i++ {
			for _, y := range []float32{x, -x} {
				if y <= expMaxArg && y >= expMinArg {
					checkExp(t, "expf32", y, expf32(y), 2)
				}
			}
			x = math.Nextafter32(x, float32(math.Inf(1)))
		}
	}
	t.Logf("worst error over normal results: %d ulp", worst)
}

func TestExpf32EdgeCases(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	cases := []struct{ x, want float32 }{
		{0, 1},
		{float32(math.Copysign(0, -1)), 1},
		{-inf, 0},
		{inf, inf},
		{-1000, 0},
		{-104, 0},
		{1000, inf},
		{89, inf},
		{math.Nextafter32(expMaxArg, inf), inf},
		{88.72283935546875, inf},
		{1, float32(math.E)},
	}
	for _, c := range cases {
		if got := expf32(c.x); got != c.want {
			t.Errorf("expf32(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if got := expf32(expMaxArg); math.IsInf(float64(got), 0) || got < 3.4e38 {
		t.Errorf("expf32(%g) = %g, want the largest finite range", float32(expMaxArg), got)
	}
	if got := expf32(nan); got == got {
		t.Errorf("expf32(NaN) = %g", got)
	}
	if got := expf32(-103.9); got <= 0 {
		t.Errorf("expf32(-103.9) = %g, want a positive subnormal", got)
	}
}

func TestExpShiftSum(t *testing.T) {
	src := make([]float32, 0, 4000)
	for x := float32(-120); x <= 30; x += 0.0371 {
		src = append(src, x)
	}
	src = append(src, float32(math.Inf(-1)))
	mx := float32(30)
	dst := make([]float32, len(src))
	sum := expShiftSum(dst, src, mx)
	var want float64
	for j, z := range src {
		x := z - mx
		e := float32(math.Exp(float64(x)))
		want += float64(e)
		if x < -87.33654 {
			if dst[j] != 0 && math.Abs(float64(dst[j]-e)) > 0x1p-126 {
				t.Fatalf("exp(%g) = %g, want 0 or %g", x, dst[j], e)
			}
			continue
		}
		if dst[j] != expf32(x) {
			t.Fatalf("expShiftSum at %g: %g, expf32 gives %g", x, dst[j], expf32(x))
		}
		checkExp(t, "expShiftSum", x, dst[j], 2)
	}
	if math.Abs(sum-want) > 1e-6*want {
		t.Fatalf("sum = %g, want %g", sum, want)
	}
	if got := expShiftSum(dst[:3], []float32{0, float32(math.NaN()), -1}, 0); !math.IsNaN(got) {
		t.Fatalf("sum with a NaN = %g, want NaN", got)
	}
	if got := expShiftSum(nil, nil, 0); got != 0 {
		t.Fatalf("empty sum = %g", got)
	}
}
