package nets

import (
	"math"
	"testing"
)

// TestPaddingRowsAreIgnored compares a model built for B rows, fed N < B valid rows plus padding
// rows of noise, with a model built for exactly N rows fed the valid rows: loss, accuracy,
// gradients and BatchNorm statistics must agree. Both ways of passing a short batch (N rows only,
// or B rows) are checked.
func TestPaddingRowsAreIgnored(t *testing.T) {
	for _, s := range []Spec{tinyMLP, tinyResNet, tinyVGG, tinyLSTM} {
		t.Run(s.Arch, func(t *testing.T) {
			const valid = 2
			full := randBatch(s, valid, 5) // B rows; rows valid.. are noise
			exact := s
			exact.BatchSize = valid
			for _, short := range []bool{false, true} {
				a, b := mustNew(t, s), mustNew(t, exact)
				in := full
				if short {
					in = firstRows(s, full, valid)
				}
				for step := 0; step < 2; step++ { // the second step also checks carried LSTM state
					ra, rb := mustTrain(t, a, in), mustTrain(t, b, firstRows(s, full, valid))
					ea, eb := mustEval(t, a, in), mustEval(t, b, firstRows(s, full, valid))
					for _, r := range [][2]Result{{ra, rb}, {ea, eb}} {
						if math.Abs(r[0].Loss-r[1].Loss) > 1e-6*r[1].Loss || r[0].Correct != r[1].Correct || r[0].Count != r[1].Count {
							t.Fatalf("short=%v step %d: padded %+v, exact %+v", short, step, r[0], r[1])
						}
					}
				}
				for i, p := range a.Params() {
					assertClose(t, p.Name+" gradient", p.Grad, b.Params()[i].Grad)
				}
				for i, p := range a.Buffers() {
					assertClose(t, p.Name, p.Value, b.Buffers()[i].Value)
				}
			}
		})
	}
}
