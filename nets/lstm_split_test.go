package nets

import (
	"math"
	"runtime"
	"slices"
	"testing"
)

// TestLSTMIndependentOfCores trains a language model whose batch, hidden size and vocabulary do
// not divide evenly among cores, for a few steps with 1, 2 and 3 goroutines per op, and checks
// that losses and gradients are the same bit for bit: the LSTM splits its streams, the decoder
// its vocabulary columns and the bias gradients their columns across cores, and none of that may
// change a result.
func TestLSTMIndependentOfCores(t *testing.T) {
	s := Spec{Arch: "lstm", BatchSize: 5, Seed: 9, Vocab: 1037, SeqLen: 6, HSize: 37, Layers: 2}
	run := func(procs int) ([]float64, [][]float32) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		m, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var losses []float64
		for step := uint64(0); step < 3; step++ {
			res, err := m.TrainStep(randBatch(s, s.BatchSize-int(step%2), step))
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, res.Loss)
		}
		var grads [][]float32
		for _, p := range m.Params() {
			grads = append(grads, p.Grad)
		}
		return losses, grads
	}
	wantLoss, wantGrad := run(1)
	bits := func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }
	for _, procs := range []int{2, 3} {
		loss, grad := run(procs)
		if !slices.Equal(loss, wantLoss) {
			t.Errorf("GOMAXPROCS=%d: losses %v, with one core %v", procs, loss, wantLoss)
		}
		for i := range grad {
			if !slices.EqualFunc(grad[i], wantGrad[i], bits) {
				t.Errorf("GOMAXPROCS=%d: gradient %d differs from the one-core result", procs, i)
			}
		}
	}
}
