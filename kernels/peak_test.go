package kernels

import (
	"testing"
	"time"
)

// TestFMALoopRuns: the measured loop does the work it is counted for: after n iterations
// every lane of every accumulator holds n, and they sum to flopsPerIter/2 · n.
func TestFMALoopRuns(t *testing.T) {
	loop, name, perIter := fmaLoop()
	for _, n := range []int{0, 1, 1000} {
		if got, want := loop(n), float32(perIter/2)*float32(n); got != want {
			t.Errorf("%s loop of %d iterations: sum %g, want %g", name, n, got, want)
		}
	}
}

// TestBestOf: the peak is the best try, wherever it falls among them.
func TestBestOf(t *testing.T) {
	for _, tries := range [][]float64{{5, 1, 1}, {1, 5, 1}, {1, 1, 5}, {5}} {
		i := 0
		got := bestOf(len(tries), func() float64 { i++; return tries[i-1] })
		if got != 5 || i != len(tries) {
			t.Errorf("bestOf(%v) = %g after %d tries, want 5 after %d", tries, got, i, len(tries))
		}
	}
}

func TestTriad(t *testing.T) {
	a, b, c := make([]float32, 37), make([]float32, 37), make([]float32, 37)
	for i := range b {
		b[i], c[i] = float32(i), 2
	}
	triad(a, b, c, 3)
	for i, v := range a {
		if v != float32(i)+6 {
			t.Fatalf("a[%d] = %g, want %d", i, v, i+6)
		}
	}
}

// BenchmarkPeak reports this machine's peak: FMA FLOP/s on one core and on all, and the
// triad's memory bandwidth.
func BenchmarkPeak(b *testing.B) {
	var p Peak
	for range b.N {
		p = MeasurePeak(300 * time.Millisecond)
	}
	b.ReportMetric(p.FLOPSCore/1e9, "GFLOP/s-core")
	b.ReportMetric(p.FLOPS/1e9, "GFLOP/s-all")
	b.ReportMetric(p.TriadBytesS/1e9, "GB/s-triad")
}
