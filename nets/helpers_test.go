package nets

import (
	"math/rand/v2"
	"testing"
)

// Tiny instances of every family, small enough for finite differences.
var (
	tinyMLP    = Spec{Arch: "mlp", BatchSize: 4, Seed: 1, Channels: 2, Height: 3, Width: 3, Classes: 5, Hidden: []int{7, 6}}
	tinyResNet = Spec{Arch: "resnet8", BatchSize: 4, Seed: 2, Channels: 3, Height: 8, Width: 8, Classes: 4, WidthMult: 0.25}
	tinyVGG    = Spec{Arch: "vgg11", BatchSize: 8, Seed: 3, Channels: 2, Height: 12, Width: 12, Classes: 4, WidthMult: 1.0 / 16}
	tinyLSTM   = Spec{Arch: "lstm", BatchSize: 3, Seed: 4, Vocab: 12, SeqLen: 4, HSize: 6, Layers: 2}
)

// mustNew builds s and returns the concrete model.
func mustNew(t testing.TB, s Spec) *net {
	t.Helper()
	m, err := New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	t.Cleanup(func() { m.Close() })
	switch m := m.(type) {
	case *net:
		return m
	case *recurrentNet:
		return m.net
	}
	t.Fatalf("New returned %T", m)
	return nil
}

// randBatch draws a full batch (BatchSize rows) with n valid rows.
func randBatch(s Spec, n int, seed uint64) *Batch {
	r := rand.New(rand.NewPCG(seed, 99))
	b := &Batch{N: n}
	if s.Arch == "lstm" {
		for i := 0; i < s.BatchSize*s.SeqLen; i++ {
			b.Tokens = append(b.Tokens, int32(r.IntN(s.Vocab)))
			b.Labels = append(b.Labels, int32(r.IntN(s.Vocab)))
		}
		return b
	}
	for i := 0; i < s.BatchSize*s.Channels*s.Height*s.Width; i++ {
		b.X = append(b.X, float32(r.NormFloat64()))
	}
	for i := 0; i < s.BatchSize; i++ {
		b.Labels = append(b.Labels, int32(r.IntN(s.Classes)))
	}
	return b
}

// firstRows returns the first n rows of a full batch as a batch of its own.
func firstRows(s Spec, b *Batch, n int) *Batch {
	if s.Arch == "lstm" {
		return &Batch{N: n, Tokens: b.Tokens[:n*s.SeqLen], Labels: b.Labels[:n*s.SeqLen]}
	}
	return &Batch{N: n, X: b.X[:n*s.Channels*s.Height*s.Width], Labels: b.Labels[:n]}
}

func zeroGrads(n *net) {
	for _, p := range n.params {
		clear(p.Grad)
	}
}

func cloneGrads(n *net) [][]float32 {
	var out [][]float32
	for _, p := range n.params {
		out = append(out, append([]float32(nil), p.Grad...))
	}
	return out
}

func mustTrain(t testing.TB, m Model, b *Batch) Result {
	t.Helper()
	r, err := m.TrainStep(b)
	if err != nil {
		t.Fatalf("TrainStep: %v", err)
	}
	return r
}

func mustEval(t testing.TB, m Model, b *Batch) Result {
	t.Helper()
	r, err := m.Evaluate(b)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return r
}
