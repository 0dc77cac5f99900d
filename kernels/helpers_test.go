package kernels

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

func randSlice(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// assertClose fails unless a and b agree to float32 accumulation accuracy.
func assertClose(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values, want %d", what, len(a), len(b))
	}
	var scale float64
	for _, v := range b {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > 1e-4*(1+scale) {
			t.Fatalf("%s[%d] = %g, want %g (of %d values)", what, i, a[i], b[i], len(a))
		}
	}
}

// cpuTime is the CPU time the process has used: with other work on the machine, CPU time per
// iteration is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
