package nets

import (
	"math"
	"testing"
)

// TestLSTMCarriesStateAcrossSteps checks truncated BPTT against one long sequence: with the state
// carried, the mean loss of two steps of T tokens equals the loss of one step of 2T tokens (same
// seed, so the same parameters), for training and evaluation alike.
func TestLSTMCarriesStateAcrossSteps(t *testing.T) {
	s := tinyLSTM
	long := s
	long.SeqLen = 2 * s.SeqLen
	whole := randBatch(long, long.BatchSize, 4)
	half := func(k int) *Batch {
		b := &Batch{N: s.BatchSize}
		for r := 0; r < s.BatchSize; r++ {
			from := r*long.SeqLen + k*s.SeqLen
			b.Tokens = append(b.Tokens, whole.Tokens[from:from+s.SeqLen]...)
			b.Labels = append(b.Labels, whole.Labels[from:from+s.SeqLen]...)
		}
		return b
	}
	for _, run := range []struct {
		name string
		step func(Model, *Batch) Result
	}{
		{"train", func(m Model, b *Batch) Result { return mustTrain(t, m, b) }},
		{"evaluate", func(m Model, b *Batch) Result { return mustEval(t, m, b) }},
	} {
		a, b := mustNew(t, s), mustNew(t, long)
		r1, r2 := run.step(a, half(0)), run.step(a, half(1))
		r := run.step(b, whole)
		if got := (r1.Loss + r2.Loss) / 2; math.Abs(got-r.Loss) > 1e-6 || r1.Correct+r2.Correct != r.Correct {
			t.Errorf("%s: two carried halves give loss %.7g (%d correct), the whole sequence %.7g (%d)", run.name, got, r1.Correct+r2.Correct, r.Loss, r.Correct)
		}
	}
}

// TestLSTMResetState checks that the training and evaluation states are separate and that the
// resets bring each back to zero.
func TestLSTMResetState(t *testing.T) {
	m, err := New(tinyLSTM)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rec, ok := m.(Recurrent)
	if !ok {
		t.Fatalf("%T does not implement Recurrent", m)
	}
	b := randBatch(tinyLSTM, tinyLSTM.BatchSize, 1)
	t1 := mustTrain(t, m, b)
	if t2 := mustTrain(t, m, b); t2.Loss == t1.Loss {
		t.Errorf("the second step's loss equals the first: no state carried")
	}
	rec.ResetState()
	if t3 := mustTrain(t, m, b); t3 != t1 {
		t.Errorf("after ResetState: %+v, want %+v", t3, t1)
	}
	e1 := mustEval(t, m, b)
	if e2 := mustEval(t, m, b); e2.Loss == e1.Loss {
		t.Errorf("the second evaluation's loss equals the first: no state carried")
	}
	rec.ResetEvalState()
	mustTrain(t, m, b) // training state must not leak into evaluation
	if e3 := mustEval(t, m, b); e3 != e1 {
		t.Errorf("after ResetEvalState: %+v, want %+v", e3, e1)
	}
	if _, ok := Model(mustNew(t, tinyMLP)).(Recurrent); ok {
		t.Errorf("an MLP implements Recurrent")
	}
}
