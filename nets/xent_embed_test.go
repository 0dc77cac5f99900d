package nets

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestXentFusedGradient checks the loss and the gradient the forward prepares against a float64
// softmax, for an incoming gradient other than 1 and with a padding row.
func TestXentFusedGradient(t *testing.T) {
	const rows, k = 4, 37
	z := make([]float32, rows*k)
	for i := range z {
		z[i] = float32(math.Sin(float64(i)*1.7)) * 30
	}
	tgt := &target{labels: []int32{3, 0, 36, 5}, weight: []float32{0.25, 0.25, 0, 0.5}}
	st := &stepState{}
	o := &xentOp{opBase: opBase{name: "xent", arity: 1}, tgt: tgt, st: st, k: k, shape: tensor.Shape{rows, k}}
	zt := tensor.New(tensor.WithBacking(z), tensor.WithShape(rows, k))
	lv, err := o.Do(zt)
	if err != nil {
		t.Fatal(err)
	}
	const g = 2.5
	d := &xentGradOp{opBase: opBase{name: "xent.dz", arity: 2}, fwd: o, shape: tensor.Shape{rows, k}}
	dv, err := d.Do(lv, G.NewF32(g))
	if err != nil {
		t.Fatal(err)
	}
	dz, err := floats(dv)
	if err != nil {
		t.Fatal(err)
	}
	var loss float64
	for r := 0; r < rows; r++ {
		zr := z[r*k : (r+1)*k]
		mx := math.Inf(-1)
		for _, e := range zr {
			mx = math.Max(mx, float64(e))
		}
		var sum float64
		for _, e := range zr {
			sum += math.Exp(float64(e) - mx)
		}
		w := float64(tgt.weight[r])
		l := int(tgt.labels[r])
		loss += w * (math.Log(sum) + mx - float64(zr[l]))
		for j, e := range zr {
			want := math.Exp(float64(e)-mx) / sum
			if j == l {
				want--
			}
			want *= g * w
			if got := float64(dz[r*k+j]); math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("dz[%d][%d] = %g, want %g", r, j, got, want)
			}
		}
	}
	got, _ := scalar(lv)
	if math.Abs(float64(got)-loss) > 1e-5*math.Abs(loss) || math.Abs(o.loss-loss) > 1e-6*math.Abs(loss) {
		t.Fatalf("loss = %g (%g), want %g", got, o.loss, loss)
	}
}

// TestEmbedOp checks the gather and the scatter-add of the embedding with repeated indices, and
// that the gradient buffer is cleared between runs.
func TestEmbedOp(t *testing.T) {
	const vocab, e = 5, 3
	w := make([]float32, vocab*e)
	for i := range w {
		w[i] = float32(i)
	}
	idx := []int{4, 1, 4, 0}
	o := &embedOp{opBase: opBase{name: "encoder", arity: 1}, idx: idx, shape: tensor.Shape{len(idx), e}}
	wt := tensor.New(tensor.WithBacking(w), tensor.WithShape(vocab, e))
	yv, err := o.Do(wt)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := floats(yv)
	for r, i := range idx {
		for c := 0; c < e; c++ {
			if y[r*e+c] != w[i*e+c] {
				t.Fatalf("y[%d][%d] = %g, want %g", r, c, y[r*e+c], w[i*e+c])
			}
		}
	}
	d := &embedGradOp{opBase: opBase{name: "encoder.dw", arity: 1}, fwd: o, shape: tensor.Shape{vocab, e}}
	gy := make([]float32, len(idx)*e)
	for i := range gy {
		gy[i] = float32(i + 1)
	}
	for run := 0; run < 2; run++ {
		dv, err := d.Do(tensor.New(tensor.WithBacking(gy), tensor.WithShape(len(idx), e)))
		if err != nil {
			t.Fatal(err)
		}
		dw, _ := floats(dv)
		want := make([]float32, vocab*e)
		for r, i := range idx {
			for c := 0; c < e; c++ {
				want[i*e+c] += gy[r*e+c]
			}
		}
		for i := range want {
			if dw[i] != want[i] {
				t.Fatalf("run %d: dw[%d] = %g, want %g", run, i, dw[i], want[i])
			}
		}
		for i := range dw {
			dw[i] = 99 // what a hook may leave behind
		}
	}
	o.idx[0] = vocab
	if _, err := o.Do(wt); err == nil {
		t.Fatal("an index out of range was accepted")
	}
}
