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

// TestTrainStateResumes checks that a model given another's parameters and training state
// trains on exactly as the original does: same loss and same gradients, bit for bit, with
// dropout drawing from its stream and the LSTM state carried.
func TestTrainStateResumes(t *testing.T) {
	s := tinyLSTM
	s.Dropout = 0.3
	a, b := mustNew(t, s), mustNew(t, s)
	batch := randBatch(s, s.BatchSize, 2)
	for range 2 {
		zeroGrads(a)
		mustTrain(t, a, batch)
		for i, p := range a.Params() {
			for j, g := range p.Grad {
				p.Value[j] -= 0.1 * g
			}
			copy(b.Params()[i].Value, p.Value)
		}
	}
	state, err := a.TrainState()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetTrainState(state); err != nil {
		t.Fatal(err)
	}
	zeroGrads(a)
	zeroGrads(b)
	ra, rb := mustTrain(t, a, batch), mustTrain(t, b, batch)
	if ra != rb {
		t.Fatalf("resumed model: %+v, original: %+v", rb, ra)
	}
	ga, gb := cloneGrads(a), cloneGrads(b)
	for i := range ga {
		for j := range ga[i] {
			if math.Float32bits(ga[i][j]) != math.Float32bits(gb[i][j]) {
				t.Fatalf("gradient %d[%d]: resumed %g, original %g", i, j, gb[i][j], ga[i][j])
			}
		}
	}
	// A model that has not been given the state draws other dropout masks.
	c := mustNew(t, s)
	for i, p := range a.Params() {
		copy(c.Params()[i].Value, p.Value)
	}
	zeroGrads(c)
	if rc := mustTrain(t, c, batch); rc == ra {
		t.Errorf("a fresh model trains as the resumed one: the state carried nothing")
	}
}

// TestSetTrainStateRejectsForeignState checks that truncated state, or state from a model of
// another shape, is an error.
func TestSetTrainStateRejectsForeignState(t *testing.T) {
	small := tinyLSTM
	wide := tinyLSTM
	wide.HSize *= 2
	state, err := mustNew(t, wide).TrainState()
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, small)
	for name, s := range map[string][]byte{"other shape": state, "truncated": state[:len(state)/2], "empty": nil} {
		if err := m.SetTrainState(s); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	own, err := m.TrainState()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetTrainState(append(own, 0)); err == nil {
		t.Errorf("trailing byte: no error")
	}
}
