// Command peak measures this machine's limits, single-precision FMA throughput from
// registers on one core and on all, and the memory bandwidth of a STREAM triad, and
// prints beside them, as a fraction of the peak, the GEMM kernels' rate on the products of
// a training step (a serial product against one core's peak, a parallel one against all
// cores') and whole training steps of the models the benchmarks compare with PyTorch
// (their counted FLOPs, nets.Model.StepFLOPs, over the step's time, against all cores), and
// top-k selection's rate of reading a large gradient against the triad's bandwidth.
//
//	go run ./tools/peak [-time 500ms]
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/kernels"
	"github.com/ssfusion/ssfusion/nets"
)

// shape is one matrix product C(m×n) = op(A)·op(B), k the inner dimension.
type shape struct {
	name    string
	tA, tB  bool
	m, n, k int
	par     bool
}

// shapes are large products, which show what the kernels reach at best, and the small-
// channel products of ResNet-20 (batch 32, one image per GEMM on its first stages).
var shapes = []shape{
	{"large 1024x1024x1024 (parallel)", false, false, 1024, 1024, 1024, true},
	{"large 1024x1024x1024 (one core)", false, false, 1024, 1024, 1024, false},
	{"resnet20 conv1 fwd 16x1024x27", false, false, 16, 1024, 27, false},
	{"resnet20 stage 1 fwd 16x1024x144", false, false, 16, 1024, 144, false},
	{"resnet20 stage 1 dx 144x1024x16", true, false, 144, 1024, 16, false},
	{"resnet20 stage 1 dw 16x144x1024", false, true, 16, 144, 1024, false},
	{"resnet20 stage 2 fwd 32x256x288", false, false, 32, 256, 288, false},
	{"resnet20 stage 3 fwd 64x256x576 (parallel)", false, false, 64, 256, 576, true},
	{"vgg16 conv 512x64x4608 (parallel)", false, false, 512, 64, 4608, true},
}

func main() {
	d := flag.Duration("time", 500*time.Millisecond, "how long each measurement runs")
	flag.Parse()
	p := kernels.MeasurePeak(*d)
	fmt.Printf("peak (%s FMA loop, %d threads): %.1f GFLOP/s on one core, %.1f on all; triad %.1f GB/s\n",
		p.Loop, p.Threads, p.FLOPSCore/1e9, p.FLOPS/1e9, p.TriadBytesS/1e9)
	fmt.Printf("GEMM kernel: %s\n\n", kernels.GEMMKernel())
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "product\tGFLOP/s\tof peak\t")
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes {
		rate := gemmRate(r, s, *d)
		peak := p.FLOPSCore
		if s.par {
			peak = p.FLOPS
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.0f%%\t\n", s.name, rate/1e9, 100*rate/peak)
	}
	w.Flush()
	fmt.Println()
	fmt.Fprintln(w, "training step\tGFLOP/s\tof peak\t")
	for _, spec := range models {
		rate, err := stepRate(spec, *d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peak:", err)
			os.Exit(1)
		}
		fmt.Fprintf(w, "%s, batch %d\t%.1f\t%.0f%%\t\n", spec.Arch, spec.BatchSize, rate/1e9, 100*rate/p.FLOPS)
	}
	w.Flush()
	fmt.Println()
	fmt.Fprintln(w, "selection\tGB/s\tof triad\t")
	for _, par := range []bool{true, false} {
		rate, err := topKRate(r, par, *d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peak:", err)
			os.Exit(1)
		}
		name := fmt.Sprintf("top-k, 1%% of %dM floats", topKElems>>20)
		if !par {
			name += " (one core)"
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.0f%%\t\n", name, rate/1e9, 100*rate/p.TriadBytesS)
	}
	w.Flush()
}

// topKElems is the size of the gradient topKRate selects from: 100 MB of float32, as a
// large model's fused gradient, far beyond the caches.
const topKElems = 25 << 20

// topKRate times exact top-k selection of 1% of topKElems normal floats for about d (at
// least three times) and returns the gradient's bytes over the time of one selection: the
// rate of a selector that reads the gradient once. With par unset the selection runs with
// GOMAXPROCS 1, on one goroutine.
func topKRate(r *rand.Rand, par bool, d time.Duration) (float64, error) {
	g := make([]float32, topKElems)
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	if !par {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	s := &compress.TopK{}
	k := topKElems / 100
	idx, err := s.Select(g, k, nil) // warm up
	if err != nil {
		return 0, err
	}
	runs := 0
	start := time.Now()
	for runs < 3 || time.Since(start) < d {
		if idx, err = s.Select(g, k, idx); err != nil {
			return 0, err
		}
		runs++
	}
	return 4 * float64(topKElems) * float64(runs) / time.Since(start).Seconds(), nil
}

// models are the training steps of the comparison with PyTorch (tools/bench-vs-pytorch).
var models = []nets.Spec{
	{Arch: "resnet20", BatchSize: 32, Channels: 3, Height: 32, Width: 32, Classes: 10},
	{Arch: "vgg16", BatchSize: 32, Channels: 3, Height: 32, Width: 32, Classes: 10},
	{Arch: "lstm", BatchSize: 20, Vocab: 10000, SeqLen: 35, HSize: 200, Layers: 2},
}

// stepRate times training steps of spec on a random batch for about d (at least three)
// and returns the counted FLOP/s.
func stepRate(spec nets.Spec, d time.Duration) (float64, error) {
	m, err := nets.New(spec)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	r := rand.New(rand.NewPCG(3, 4))
	b := &nets.Batch{N: spec.BatchSize}
	if spec.Arch == "lstm" {
		for range spec.BatchSize * spec.SeqLen {
			b.Tokens = append(b.Tokens, int32(r.IntN(spec.Vocab)))
			b.Labels = append(b.Labels, int32(r.IntN(spec.Vocab)))
		}
	} else {
		for range spec.BatchSize * spec.Channels * spec.Height * spec.Width {
			b.X = append(b.X, float32(r.NormFloat64()))
		}
		for range spec.BatchSize {
			b.Labels = append(b.Labels, int32(r.IntN(spec.Classes)))
		}
	}
	if _, err := m.TrainStep(b); err != nil { // warm up
		return 0, err
	}
	steps := 0
	start := time.Now()
	for steps < 3 || time.Since(start) < d {
		if _, err := m.TrainStep(b); err != nil {
			return 0, err
		}
		steps++
	}
	return m.StepFLOPs() * float64(steps) / time.Since(start).Seconds(), nil
}

// gemmRate times s's product for about d and returns its FLOP/s.
func gemmRate(r *rand.Rand, s shape, d time.Duration) float64 {
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	a, b, c := fill(s.m*s.k), fill(s.k*s.n), make([]float32, s.m*s.n)
	lda, ldb := s.k, s.n
	if s.tA {
		lda = s.m
	}
	if s.tB {
		ldb = s.k
	}
	kernels.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, b, ldb, 0, c, s.n, s.par) // warm up
	runs := 0
	start := time.Now()
	for time.Since(start) < d {
		kernels.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, b, ldb, 0, c, s.n, s.par)
		runs++
	}
	return float64(2*s.m*s.n*s.k) * float64(runs) / time.Since(start).Seconds()
}
