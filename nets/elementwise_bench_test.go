package nets

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// triadBandwidth is the machine's memory bandwidth (kernels.MeasurePeak's triad), measured
// once per test binary for BenchmarkElementwise's fraction of it.
var triadBandwidth = sync.OnceValue(func() float64 { return kernels.MeasurePeak(200 * time.Millisecond).TriadBytesS })

// BenchmarkElementwise times the memory-bound passes of a CNN step, as the training step runs
// them (each op's Do, split across the cores), on the activations of ResNet-20's first stage
// (batch 32, 16 channels of 32x32: 2 MiB) and of VGG-16's first block (64 channels: 8 MiB).
// Its rate counts the bytes a pass must move at least, each input read once and the output
// written once (BatchNorm's forward: x in, y out; its input gradient: x, dy and, after a
// ReLU, y in, dx out), and of-triad sets that rate against the triad's bandwidth.
func BenchmarkElementwise(b *testing.B) {
	for _, s := range []struct {
		name string
		c    int
	}{{"resnet20-stage1", 16}, {"vgg16-block1", 64}} {
		const batch, hw = 32, 32 * 32
		n := batch * s.c * hw
		shape := tensor.Shape{batch, s.c, 32, 32}
		r := rand.New(rand.NewPCG(5, 6))
		x, dy := randTensor(r, shape...), randTensor(r, shape...)
		gamma, beta := randTensor(r, s.c), randTensor(r, s.c)
		for _, relu := range []bool{false, true} {
			bn := newBenchBN(s.c, batch, relu)
			y, err := bn.Do(x, gamma, beta)
			if err != nil {
				b.Fatal(err)
			}
			suffix := ""
			if relu {
				suffix = "+relu"
			}
			benchPass(b, fmt.Sprintf("%s/batchnorm%s", s.name, suffix), 8*n, func() (G.Value, error) { return bn.Do(x, gamma, beta) })
			dxIn := []G.Value{x, gamma, dy}
			bytes := 12 * n
			if relu {
				dxIn, bytes = append(dxIn, y), 16*n
			}
			dx := &bnDXOp{opBase: opBase{name: "bn.dx", arity: len(dxIn)}, fwd: bn}
			benchPass(b, fmt.Sprintf("%s/batchnorm%s.dx", s.name, suffix), bytes, func() (G.Value, error) { return dx.Do(dxIn...) })
		}
		relu := &reluOp{opBase: opBase{name: "relu", arity: 1}, shape: shape}
		benchPass(b, s.name+"/relu", 8*n, func() (G.Value, error) { return relu.Do(x) })
		reluDX := &reluGradOp{opBase: opBase{name: "relu.dx", arity: 2}, shape: shape}
		benchPass(b, s.name+"/relu.dx", 12*n, func() (G.Value, error) { return reluDX.Do(x, dy) })
		add := &addReLUOp{opBase: opBase{name: "add+relu", arity: 2}, shape: shape}
		benchPass(b, s.name+"/add+relu", 12*n, func() (G.Value, error) { return add.Do(x, dy) })
	}
}

// newBenchBN is a training BatchNorm op over c channels of a full batch of nb rows.
func newBenchBN(c, nb int, relu bool) *bnOp {
	st := &bnStats{mean: make([]float32, c), vari: make([]float32, c)}
	return &bnOp{opBase: opBase{name: "bn", arity: 3}, st: st, step: &stepState{n: nb}, train: true, relu: relu, dims: 4, c: c,
		mean: make([]float32, c), istd: make([]float32, c), sdy: make([]float64, c), sdyx: make([]float64, c)}
}

// benchPass times pass, which moves at least bytes, and reports that rate against the triad's.
func benchPass(b *testing.B, name string, bytes int, pass func() (G.Value, error)) {
	b.Run(name, func(b *testing.B) {
		if _, err := pass(); err != nil { // first use allocates the op's output
			b.Fatal(err)
		}
		b.SetBytes(int64(bytes))
		for b.Loop() {
			if _, err := pass(); err != nil {
				b.Fatal(err)
			}
		}
		rate := float64(bytes) * float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(100*rate/triadBandwidth(), "%-of-triad")
	})
}
