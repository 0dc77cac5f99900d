package nets

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/ssfusion/ssfusion/kernels"
)

// TestGradientsDoNotDependOnCores trains the same step with one core and with two, several times,
// and compares every gradient bitwise: the images of the 16×16 layers (one per GEMM) and the
// groups of four of the 8×8 layers go in pieces the cores take as they come, and the filter
// gradients must still be summed in a fixed order. It runs with im2col and with Winograd.
func TestGradientsDoNotDependOnCores(t *testing.T) {
	s := Spec{Arch: "resnet8", BatchSize: 16, Seed: 9, Channels: 3, Height: 16, Width: 16, Classes: 4, WidthMult: 0.25}
	b := randBatch(s, s.BatchSize, 5)
	grads := func(procs int) [][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		n := mustNew(t, s)
		zeroGrads(n)
		mustTrain(t, n, b)
		return cloneGrads(n)
	}
	same := func(a, b []float32) bool {
		return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
	}
	for _, alg := range []kernels.ConvAlgorithm{kernels.ConvAuto, kernels.ConvWinograd} {
		t.Run(fmt.Sprint("winogradAlways=", alg == kernels.ConvWinograd), func(t *testing.T) {
			defer func(a kernels.ConvAlgorithm) { convAlgorithm = a }(convAlgorithm)
			convAlgorithm = alg
			want := grads(1)
			for run := range 4 {
				for i, g := range grads(2 + run%2) {
					if !same(g, want[i]) {
						t.Fatalf("run %d: gradient %d differs from the one-core run", run, i)
					}
				}
			}
		})
	}
}
