package nets

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
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
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprint("winoAlways=", always), func(t *testing.T) {
			defer func(a bool) { winoAlways = a }(winoAlways)
			winoAlways = always
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

// TestDynamicCoversEveryPieceOnce checks dynamic's ranges and worker indices.
func TestDynamicCoversEveryPieceOnce(t *testing.T) {
	for _, c := range []struct{ n, pieces int }{{0, 4}, {1, 8}, {5, 8}, {32, 8}, {33, 7}, {1000, 3}} {
		seen := make([]atomic.Int32, c.n)
		pieces := make([]atomic.Int32, c.pieces)
		w := dynamicWorkers(c.n, c.pieces)
		dynamic(c.n, c.pieces, func(worker, piece, lo, hi int) {
			if worker < 0 || worker >= w {
				t.Errorf("n=%d: worker %d of %d", c.n, worker, w)
			}
			pieces[piece].Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Errorf("n=%d pieces=%d: element %d seen %d times", c.n, c.pieces, i, seen[i].Load())
			}
		}
		for p := range min(c.n, c.pieces) {
			if pieces[p].Load() != 1 {
				t.Errorf("n=%d pieces=%d: piece %d run %d times", c.n, c.pieces, p, pieces[p].Load())
			}
		}
	}
}
