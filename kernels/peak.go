package kernels

import (
	"math"
	"runtime"
	"sync"
	"time"
)

// Peak is what this machine can do at best, the reference every kernel and training step
// is measured against: single-precision fused multiply-adds from registers, on one core
// and on all, and the memory bandwidth of a STREAM triad.
type Peak struct {
	Loop        string  // the FMA loop measured: avx512, avx2 or go
	FLOPSCore   float64 // floating-point operations per second on one core (an FMA is 2)
	FLOPS       float64 // the same with GOMAXPROCS cores at once
	Threads     int     // GOMAXPROCS
	TriadBytesS float64 // bytes per second of a[i] = b[i] + s·c[i], 12 bytes an element
}

// MeasurePeak measures the peak, each part for about d. The FMA loop and the triad run
// on GOMAXPROCS goroutines for the totals.
func MeasurePeak(d time.Duration) Peak {
	loop, name, perIter := fmaLoop()
	threads := runtime.GOMAXPROCS(0)
	return Peak{
		Loop:        name,
		FLOPSCore:   bestFMARate(loop, perIter, 1, d),
		FLOPS:       bestFMARate(loop, perIter, threads, d),
		Threads:     threads,
		TriadBytesS: triadRate(threads, d),
	}
}

// peakTries is how many parts of its time bestFMARate measures apart.
const peakTries = 5

// bestFMARate is the best of peakTries measurements by fmaRate, each for a peakTries-th of
// d. Other work on the machine can only slow the loop down, so the best is the nearest to
// what the cores can do: on a shared machine one averaged measurement read half the peak
// whenever another process held a core for part of it.
func bestFMARate(loop func(int) float32, perIter float64, workers int, d time.Duration) float64 {
	return bestOf(peakTries, func() float64 { return fmaRate(loop, perIter, workers, d/peakTries) })
}

// bestOf returns the largest of tries results of measure.
func bestOf(tries int, measure func() float64) float64 {
	best := 0.0
	for range tries {
		best = max(best, measure())
	}
	return best
}

// fmaRate runs loop on workers goroutines for about d and returns their FLOP/s together.
func fmaRate(loop func(int) float32, perIter float64, workers int, d time.Duration) float64 {
	// Size one call to about a millisecond, so that the timing overhead vanishes.
	const probe = 1 << 16
	start := time.Now()
	loop(probe)
	n := max(probe, int(float64(probe)*float64(time.Millisecond)/float64(max(time.Since(start), time.Microsecond))))
	var wg sync.WaitGroup
	iters := make([]int, workers)
	start = time.Now()
	for w := range workers {
		wg.Go(func() {
			for time.Since(start) < d {
				loop(n)
				iters[w] += n
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	total := 0
	for _, it := range iters {
		total += it
	}
	return float64(total) * perIter / elapsed
}

// triadElems is the length of each triad array: 64 MiB, far beyond any cache.
const triadElems = 16 << 20

// triadRate runs the STREAM triad on workers goroutines, each over its share of the
// arrays, for about d, and returns the bytes per second it moved by STREAM's count.
func triadRate(workers int, d time.Duration) float64 {
	a := make([]float32, triadElems)
	b := make([]float32, triadElems)
	c := make([]float32, triadElems)
	for i := range b {
		b[i], c[i] = 1, 2
	}
	best := 0.0
	for start := time.Now(); time.Since(start) < d || best == 0; {
		t := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := w*triadElems/workers, (w+1)*triadElems/workers
			wg.Go(func() { triad(a[lo:hi], b[lo:hi], c[lo:hi], 3) })
		}
		wg.Wait()
		best = math.Max(best, 12*triadElems/time.Since(t).Seconds())
	}
	return best
}

// triad sets a[i] = b[i] + s·c[i].
func triad(a, b, c []float32, s float32) {
	b, c = b[:len(a)], c[:len(a)]
	for i := range a {
		a[i] = b[i] + s*c[i]
	}
}

// fmaLoopGo is the portable FMA loop, the pattern of the assembly ones in scalar code.
func fmaLoopGo(n int) float32 {
	var acc [12]float32
	for range n {
		for i := range acc {
			acc[i] = acc[i] + 1*1
		}
	}
	var sum float32
	for _, v := range acc {
		sum += v
	}
	return sum
}
